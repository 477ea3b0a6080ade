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

# A row per candidate and vector of the query's dims, a candidate without one once with NULLs;
# `place` 1 is the newest. No ORDER BY: the places order them in numpy. On PostgreSQL the
# length condition leaves out what is not `dims` float32 numbers (a put never stores one).
_ROWS_SQL = """
SELECT c.place, c.id, v.norm, {column}
FROM ({candidates}) c LEFT JOIN {vectors} v ON v.item_id = c.id AND v.dims = %s {condition}
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
    condition, condition_params = _prefix_condition(connection, prefix)
    table = connection.ops.quote_name(StoreVector._meta.db_table)
    if connection.vendor != "postgresql":
        sql = _ROWS_SQL.format(column="v.vector", candidates=candidates_sql, vectors=table, condition="")
        with connection.cursor() as cursor:
            cursor.execute(sql, [*candidates_params, dims])
            rows = cursor.fetchall()
    elif native_pgvector(qs.db):
        # pgvector's column with MEMORYADMIN_STORE_PGVECTOR=off: read through its cast to real[].
        sql = _ROWS_SQL.format(column="v.vector::real[]", candidates=candidates_sql, vectors=table, condition=condition)
        with connection.cursor() as cursor:
            cursor.execute(sql, [*candidates_params, dims, *condition_params])
            rows = cursor.fetchall()
    else:
        condition = "AND octet_length(v.vector) = %s " + condition
        sql = _ROWS_SQL.format(column="v.vector", candidates=candidates_sql, vectors=table, condition=condition)
        rows = _fetch_binary(connection, sql, [*candidates_params, dims, 4 * dims, *condition_params])
    return _page(*_columns(rows, dims), query, query_norm, limit, offset)


def _fetch_binary(connection, sql: str, params: list) -> list[tuple]:
    """The statement's rows in PostgreSQL's binary format, where bytea travels as it is
    (Django's cursors bind on the client, which answers text: bytea in hex, twice the
    bytes, encoded and decoded byte by byte). The statement is bound as Django's cursor
    binds it, then sent through a cursor of the same connection and transaction, wrapped
    as Django wraps its own (logged, counted, execute_wrapper hooks)."""
    import psycopg

    with connection.cursor() as cursor:
        # A server-binding cursor (the server_side_binding option) has no mogrify: it sends the parameters.
        mogrify = getattr(cursor.cursor, "mogrify", None)
    if mogrify is not None:
        sql, params = mogrify(sql, params), None
    raw = psycopg.Cursor(connection.connection)
    raw.format = psycopg.pq.Format.BINARY
    wrapped = connection.make_debug_cursor(raw) if connection.queries_logged else connection.make_cursor(raw)
    with wrapped:
        wrapped.execute(sql, params)
        return wrapped.fetchall()


def _columns(rows, dims: int):
    """(ids by place, then each vector's place, norm and float32 numbers) from `_ROWS_SQL`'s rows."""
    if not rows:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0), np.zeros((0, dims), dtype="<f4")
    places, item_ids, norms, values = zip(*rows)
    places = np.array(places, dtype=np.int64) - 1
    ids = np.zeros(int(places.max()) + 1, dtype=np.int64)
    ids[places] = item_ids
    if not all(value is None or isinstance(value, bytes) for value in values):
        values = [None if value is None else _vector_bytes(value, dims) for value in values]
    size = 4 * dims
    if None in values or any(len(value) != size for value in values):
        kept = [i for i, value in enumerate(values) if value is not None and len(value) == size]
        places, norms, values = places[kept], [norms[i] for i in kept], [values[i] for i in kept]
    matrix = np.frombuffer(b"".join(values), dtype="<f4").reshape(len(values), dims)
    return ids, places, np.array(norms, dtype=np.float64), matrix


_CHUNK = 512


def _dots(matrix, query):
    """Each float32 row's dot product with the float64 query, in float64 (a float32 product is
    exact there), converted 512 rows at a time so that the copy stays in the CPU's cache."""
    dots = np.empty(len(matrix))
    for start in range(0, len(matrix), _CHUNK):
        dots[start : start + _CHUNK] = matrix[start : start + _CHUNK].astype(np.float64) @ query
    return dots


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
            dots = _dots(matrix, np.asarray(query, dtype=np.float64))
            denominators = norms * query_norm
            scores = np.divide(dots, denominators, out=np.zeros_like(dots), where=denominators != 0)
        np.maximum.at(best, places, scores)
        has_vector[places] = True
    primary = np.where(has_vector, -best, np.inf)
    wanted = offset + limit
    if wanted < count:
        # Only the first `wanted` places matter: every candidate that ranks no lower than the
        # wanted-th one (ties included), then the exact order of those.
        threshold = np.partition(primary, wanted - 1)[wanted - 1]
        chosen = np.flatnonzero(primary <= threshold)
    else:
        chosen = np.arange(count)
    order = chosen[np.lexsort((chosen, primary[chosen]))][offset:wanted]
    return [(int(ids[i]), float(best[i]) if has_vector[i] else None) for i in order]
