"""Ranking search candidates by meaning (docs/store.md, rule ST10 and "Semantic search").

The candidates are the search's items (visible to the actor, live, under the
prefix, matching the filter), the most recently updated
MEMORYADMIN_STORE_VECTOR_CANDIDATES of them. Each candidate's score is the best
cosine similarity between the query vector and its vectors of the same `dims`,
as LangGraph's stores pool an item's fields; candidates without such a vector
follow the scored ones with score None, as in LangGraph's in-memory store.
Ties, and the unscored, go newest first.

Two ways, one answer:

- pgvector's `vector` column (the extension was in the database at migration):
  one statement ranks with pgvector's inner product operator and answers the page.
- Everywhere else (PostgreSQL without pgvector, SQLite): one statement answers
  every candidate's place in the newest-first order with its vectors' float32
  bytes (1 kB for 256 dimensions: a bytea column copies them out as they are
  stored) and numpy scores all of them exactly, in float64, as the in-memory
  store does. Scoring in SQL instead (a dot product over `unnest`) costs about
  25 µs a vector; numpy's is under one.
"""

from __future__ import annotations


import numpy as np
from django.conf import settings
from django.db import connections
from django.db.models import F, Window
from django.db.models.functions import RowNumber

from .models import StoreVector, vector_column_type
from .namespaces import SEPARATOR
from .vectors import float32, norm

_pgvector: dict[str, bool] = {}

# pgvector: the vectors of the prefix are read through their own namespace_path index
# and kept when their item is a candidate; `scores` is materialised so that grouping
# sees (item, score) pairs only. A zero vector scores 0 rather than NaN.
_RANK_PGVECTOR_SQL = """
WITH candidates AS MATERIALIZED ({candidates}),
scores AS MATERIALIZED (
    SELECT v.item_id, {score} AS score
    FROM {vectors} v JOIN candidates c ON c.id = v.item_id
    WHERE v.dims = %s {prefix}
),
best AS (SELECT item_id, MAX(score) AS score FROM scores GROUP BY item_id)
SELECT c.id, b.score FROM candidates c LEFT JOIN best b ON b.item_id = c.id
ORDER BY b.score DESC NULLS LAST, c.updated_at DESC, c.id DESC
LIMIT %s OFFSET %s
"""
_SCORE_PGVECTOR = "CASE WHEN v.norm = 0 THEN 0.0 ELSE ((v.vector <#> %s::vector) * -1) / (v.norm * %s) END"

# PostgreSQL without pgvector: one row of two byte strings, read in binary (no hex). `places`
# holds (place, item id) of every candidate, place 1 being the newest; `scored` (place, norm,
# the vector's float32 bytes) of each of their vectors of the query's dims. int8send and
# float8send write big-endian; the length condition keeps every record the same size.
_PACKED_SQL = """
WITH candidates AS MATERIALIZED ({candidates})
SELECT
    (SELECT string_agg(int8send(c.place) || int8send(c.id), ''::bytea) FROM candidates c),
    (SELECT string_agg(int8send(c.place) || float8send(v.norm) || v.vector, ''::bytea)
     FROM candidates c JOIN {vectors} v ON v.item_id = c.id
     WHERE v.dims = %s AND octet_length(v.vector) = %s {prefix})
"""
# SQLite, and pgvector's column when MEMORYADMIN_STORE_PGVECTOR=off (read as real[]): a row per
# candidate and vector, a candidate without one once with NULLs.
_ROWS_SQL = """
SELECT c.place, c.id, v.norm, {column}
FROM ({candidates}) c LEFT JOIN {vectors} v ON v.item_id = c.id AND v.dims = %s {prefix}
"""

# The float32 bytes of the vector column (little-endian) as real[], in SQL, for converting
# the column to pgvector's type when the extension comes after migration 0006 (docs/store.md).
FLOATS_FROM_BYTES_SQL = """
CREATE FUNCTION pg_temp.store_vector_floats(data bytea) RETURNS real[] LANGUAGE sql IMMUTABLE STRICT AS $$
SELECT array_agg(
    ((1 - 2 * (bits >> 31)) * CASE WHEN ((bits >> 23) & 255) = 0 THEN (bits & 8388607) * (2.0::float8 ^ (-149))
        ELSE ((bits & 8388607) + 8388608) * (2.0::float8 ^ (((bits >> 23) & 255) - 150)) END)::real
    ORDER BY i)
FROM generate_series(0, length(data) / 4 - 1) AS i,
LATERAL (SELECT (get_byte(data, 4 * i)::int8 | (get_byte(data, 4 * i + 1)::int8 << 8)
    | (get_byte(data, 4 * i + 2)::int8 << 16) | (get_byte(data, 4 * i + 3)::int8 << 24)) AS bits) AS b
$$
"""


def native_pgvector(alias: str) -> bool:
    """Whether the vector column is pgvector's type (then the extension is in the database)."""
    return vector_column_type(connections[alias]) == "vector"


def pgvector_in_use(alias: str) -> bool:
    """Whether PostgreSQL ranks with pgvector: MEMORYADMIN_STORE_PGVECTOR is "auto", the extension is
    there (looked up once per process and database) and the vector column is its type."""
    if settings.MEMORYADMIN_STORE_PGVECTOR == "off" or connections[alias].vendor != "postgresql":
        return False
    if alias not in _pgvector:
        with connections[alias].cursor() as cursor:
            cursor.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'")
            _pgvector[alias] = cursor.fetchone() is not None
    return _pgvector[alias] and native_pgvector(alias)


def _candidates(qs):
    return qs.order_by("-updated_at", "-id")


def ranked_ids(
    *, qs, prefix: tuple[str, ...], vector: list[float], dims: int, limit: int, offset: int
) -> list[tuple[int, float | None]]:
    """(item id, score or None) of one page of the candidates of `qs` (whose items are under `prefix`), best first."""
    if limit == 0:
        return []
    query = float32(vector)
    query_norm = norm(query)
    cap = settings.MEMORYADMIN_STORE_VECTOR_CANDIDATES
    if pgvector_in_use(qs.db):
        return _ranked_pgvector(qs, prefix, query, query_norm, dims, limit, offset, cap)
    return _ranked_numpy(qs, prefix, query, query_norm, dims, limit, offset, cap)


def _prefix_condition(connection, prefix) -> tuple[str, list]:
    """The items' own prefix condition (StoreItem.objects.under), on the vectors' copy of their
    path, for PostgreSQL's index on it; SQLite finds the vectors by item."""
    if not prefix or connection.vendor != "postgresql":
        return "", []
    path = SEPARATOR.join(prefix)
    return (
        "AND (v.namespace_path = %s OR v.namespace_path LIKE %s)",
        [path, connection.ops.prep_for_like_query(path + SEPARATOR) + "%"],
    )


def _ranked_pgvector(qs, prefix, query, query_norm, dims, limit, offset, cap):
    connection = connections[qs.db]
    candidates = _candidates(qs).values("id", "updated_at")[:cap]
    candidates_sql, candidates_params = candidates.query.get_compiler(connection=connection).as_sql()
    if query_norm == 0:
        score, score_params = "0.0", []
    else:
        score, score_params = _SCORE_PGVECTOR, [query.tolist(), query_norm]
    prefix_sql, prefix_params = _prefix_condition(connection, prefix)
    sql = _RANK_PGVECTOR_SQL.format(
        candidates=candidates_sql,
        score=score,
        prefix=prefix_sql,
        vectors=connection.ops.quote_name(StoreVector._meta.db_table),
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [*candidates_params, *score_params, dims, *prefix_params, limit, offset])
        return [(item_id, score) for item_id, score in cursor.fetchall()]


def _vector_bytes(value, dims: int) -> bytes | None:
    """A stored vector as float32 little-endian bytes: a blob as it is; pgvector's column, read
    as real[], from its list. None for what is not `dims` numbers (never stored by a put)."""
    if isinstance(value, list):
        try:
            value = np.asarray(value, dtype="<f4").tobytes()
        except (TypeError, ValueError):  # a NULL element
            return None
    data = bytes(value)
    return data if len(data) == 4 * dims else None


def _ranked_numpy(qs, prefix, query, query_norm, dims, limit, offset, cap):
    connection = connections[qs.db]
    candidates = (
        _candidates(qs)
        .annotate(place=Window(RowNumber(), order_by=[F("updated_at").desc(), F("id").desc()]))
        .values("place", "id")[:cap]
    )
    candidates_sql, candidates_params = candidates.query.get_compiler(connection=connection).as_sql()
    prefix_sql, prefix_params = _prefix_condition(connection, prefix)
    table = connection.ops.quote_name(StoreVector._meta.db_table)
    if connection.vendor == "postgresql" and not native_pgvector(qs.db):
        sql = _PACKED_SQL.format(candidates=candidates_sql, vectors=table, prefix=prefix_sql)
        places, scored = _fetch_binary(connection, sql, [*candidates_params, dims, 4 * dims, *prefix_params])
        ids, places, norms, matrix = _unpack(places, scored, dims)
    else:
        # pgvector's column with MEMORYADMIN_STORE_PGVECTOR=off: read through its cast to real[].
        column = "v.vector::real[]" if connection.vendor == "postgresql" else "v.vector"
        sql = _ROWS_SQL.format(column=column, candidates=candidates_sql, vectors=table, prefix=prefix_sql)
        with connection.cursor() as cursor:
            cursor.execute(sql, [*candidates_params, dims, *prefix_params])
            ids, places, norms, matrix = _from_rows(cursor.fetchall(), dims)
    return _page(ids, places, norms, matrix, query, query_norm, limit, offset)


def _fetch_binary(connection, sql: str, params: list) -> tuple[bytes, bytes]:
    """The statement's one row in PostgreSQL's binary format, where bytea travels as it is
    (Django's cursors bind on the client, which answers text: hex, twice the bytes, decoded
    byte by byte). The statement is bound as Django's cursor would bind it, then sent through
    a cursor of the same connection and transaction, wrapped as Django wraps its own (logged,
    counted, execute_wrapper hooks)."""
    import psycopg

    with connection.cursor() as cursor:
        bound = cursor.cursor.mogrify(sql, params)
    raw = psycopg.Cursor(connection.connection)
    raw.format = psycopg.pq.Format.BINARY
    wrapped = connection.make_debug_cursor(raw) if connection.queries_logged else connection.make_cursor(raw)
    with wrapped:
        wrapped.execute(bound)
        places, scored = wrapped.fetchone()
    return bytes(places or b""), bytes(scored or b"")


def _unpack(places: bytes, scored: bytes, dims: int):
    """(ids by place, then each vector's place, norm and float32 numbers) from `_PACKED_SQL`'s records."""
    candidates = np.frombuffer(places, dtype=[("place", ">i8"), ("id", ">i8")])
    ids = np.zeros(len(candidates), dtype=np.int64)
    ids[candidates["place"] - 1] = candidates["id"]
    records = np.frombuffer(scored, dtype=[("place", ">i8"), ("norm", ">f8"), ("vector", "<f4", (dims,))])
    return ids, records["place"].astype(np.int64) - 1, records["norm"].astype(np.float64), records["vector"]


def _from_rows(rows, dims: int):
    """The same from (place, item id, norm, vector or None) rows."""
    count = max((row[0] for row in rows), default=0)
    ids = np.zeros(count, dtype=np.int64)
    places, norms, blobs = [], [], []
    for place, item_id, vector_norm, value in rows:
        ids[place - 1] = item_id
        data = None if value is None else _vector_bytes(value, dims)
        if data is not None:
            places.append(place - 1)
            norms.append(vector_norm)
            blobs.append(data)
    matrix = np.frombuffer(b"".join(blobs), dtype="<f4").reshape(len(blobs), dims)
    return ids, np.array(places, dtype=np.int64), np.array(norms, dtype=np.float64), matrix


def _page(ids, places, norms, matrix, query, query_norm: float, limit: int, offset: int):
    """The page of (item id, score or None), as `_RANK_PGVECTOR_SQL` orders.

    `ids` are the candidates' by place (newest first); `places`, `norms` and
    `matrix` are one entry per vector. Each vector's cosine is its float32
    numbers' dot product with the query's in float64, divided by the stored
    norms (0 when either is all zeros); an item's score is its best. Scored
    items best first, then the unscored; ties, and the unscored, by place.
    """
    count = len(ids)
    if count == 0:
        return []
    best = np.full(count, -np.inf)
    has_vector = np.zeros(count, dtype=bool)
    valid = np.isfinite(norms)
    places, norms, matrix = places[valid], norms[valid], matrix[valid]
    if len(places):
        if query_norm == 0:
            scores = np.zeros(len(places))
        else:
            dots = matrix.astype(np.float64) @ np.asarray(query, dtype=np.float64)
            denominators = norms * query_norm
            scores = np.divide(dots, denominators, out=np.zeros_like(dots), where=denominators != 0)
        np.maximum.at(best, places, scores)
        has_vector[places] = True
    primary = np.where(has_vector, -best, np.inf)
    order = np.lexsort((np.arange(count), primary))[offset : offset + limit]
    return [(int(ids[i]), float(best[i]) if has_vector[i] else None) for i in order]
