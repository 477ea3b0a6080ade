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
- Everywhere else (PostgreSQL without pgvector, SQLite): numpy scores every
  candidate exactly, in float64, as the in-memory store does, with the vectors
  the process keeps (store_app.vectorcache): one statement answers the
  candidates' ids and vectors versions, and the vectors the process lacks at
  those versions are read by one more. Without the cache, one statement answers
  every candidate's place in the newest-first order with its vectors' float32
  bytes (1 kB for 256 dimensions: a bytea column copies them out as they are
  stored). Scoring in SQL instead (a dot product over `unnest`) costs about
  25 µs a vector; numpy's is under one.
"""

from __future__ import annotations

import json
import math

import numpy as np
from django.conf import settings
from django.db import connections
from django.db.models import F, Window
from django.db.models.functions import RowNumber

from . import vectorcache
from .models import StoreItem, StoreVector, vector_column_type
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
SELECT c.place, c.id, c.vectors_version, v.norm, {column}
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
    """The page, scored in the process: the candidates' vectors come from the process's cache
    (store_app.vectorcache) when it holds them at the candidates' versions, else from the database.

    Without a cache, or when it holds nothing of these dims yet: one statement reads every
    candidate with its vectors (kept for the next searches). Otherwise one statement reads
    the candidates' ids and versions only; the vectors the cache lacks are read by one more
    (by id when they are few, else with every candidate's, as without a cache).
    """
    alias, q = qs.db, np.asarray(query, dtype=np.float64)
    if not vectorcache.cache.enabled() or not vectorcache.cache.holds_any(alias, dims):
        return _ranked_from_database(qs, prefix, q, query_norm, dims, limit, offset, cap)
    ids, versions, updated = _candidate_versions(qs, cap)
    found = vectorcache.cache.lookup(alias, dims, ids, versions)
    missing = np.flatnonzero(~found.hit)
    if len(missing) > _MISSING_BY_ID * len(ids):
        return _ranked_from_database(qs, prefix, q, query_norm, dims, limit, offset, cap)
    places, scores = found.places, np.zeros(0)
    if len(found.rows):
        scores = _cosines(found.snapshot.matrix, found.snapshot.norms, q, query_norm, rows=found.rows)
    if len(missing):
        item_ids, item_versions, counts, norms, matrix = _vectors_of(connections[alias], ids[missing], dims)
        vectorcache.cache.add(alias, dims, item_ids, item_versions, counts, norms, matrix)
        # The missing candidates' places, by id (an item deleted since the first statement has none:
        # it is left unscored here, and the page's read leaves it out).
        by_id = np.argsort(ids[missing], kind="stable")
        read = missing[by_id[np.searchsorted(ids[missing], item_ids, sorter=by_id)]]
        places = np.concatenate([places, np.repeat(read, counts)])
        scores = np.concatenate([scores, _cosines(matrix, norms, q, query_norm)])
    return _page(ids, places, scores, limit, offset, updated=updated)


# Past this share of the candidates missing from the cache, reading every candidate's vectors
# with them (one pass over the prefix's vectors) costs less than reading those by id.
_MISSING_BY_ID = 0.25


def _ranked_from_database(qs, prefix, q, query_norm, dims, limit, offset, cap):
    """One statement: every candidate's place (newest first) and version with its vectors' bytes."""
    connection = connections[qs.db]
    candidates = (
        _candidates(qs)
        .annotate(place=Window(RowNumber(), order_by=[F("updated_at").desc(), F("id").desc()]))
        .values("place", "id", "vectors_version")[:cap]
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
    ids, versions, places, norms, matrix = _columns(rows, dims)
    if vectorcache.cache.enabled() and len(ids):
        # Kept by item: each candidate's vectors in a run of rows, none for the vectorless.
        order = np.argsort(places, kind="stable")
        counts = np.bincount(places, minlength=len(ids))
        vectorcache.cache.add(qs.db, dims, ids, versions, counts, norms[order], matrix[order])
    return _page(ids, places, _cosines(matrix, norms, q, query_norm), limit, offset)


# The candidates' ids, last updates (timestamptz_send: microseconds, big-endian) and versions as
# one bytea of 24 bytes a candidate, in no order: numpy orders them. The subquery's LIMIT is the
# cap plus one, without ORDER BY, so that PostgreSQL sorts nothing when the prefix holds no more
# than the cap (the count tells); past it, the newest `cap` are selected again in order.
_VERSIONS_SQL = """
SELECT count(*), string_agg(int8send(c.id) || timestamptz_send(c.updated_at) || int8send(c.vectors_version), ''::bytea)
FROM ({candidates}) c
"""
_VERSIONS_DTYPE = np.dtype([("id", ">i8"), ("at", ">i8"), ("version", ">i8")])


def _candidate_versions(qs, cap: int) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """The candidates' ids and vectors versions, and when they are in no order their last updates
    (else newest first): one statement, or two on PostgreSQL when more items than the cap match."""
    connection = connections[qs.db]
    if connection.vendor != "postgresql":
        rows = list(_candidates(qs).values_list("id", "vectors_version")[:cap])
        both = np.array(rows, dtype=np.int64).reshape(len(rows), 2)
        return both[:, 0].copy(), both[:, 1].copy(), None
    columns = ("id", "updated_at", "vectors_version")
    for subquery in (qs.order_by().values(*columns)[: cap + 1], _candidates(qs).values(*columns)[:cap]):
        sql, params = subquery.query.get_compiler(connection=connection).as_sql()
        [(count, data)] = _fetch_binary(connection, _VERSIONS_SQL.format(candidates=sql), list(params))
        if count <= cap:
            break
    rows = np.frombuffer(data or b"", dtype=_VERSIONS_DTYPE)
    return rows["id"].astype(np.int64), rows["version"].astype(np.int64), rows["at"].astype(np.int64)


_BY_ID_SQL = """
SELECT i.id, i.vectors_version, v.norm, {column}
FROM {items} i LEFT JOIN {vectors} v ON v.item_id = i.id AND v.dims = %s {condition}
WHERE i.id {ids}
"""


def _vectors_of(connection, item_ids: np.ndarray, dims: int):
    """The items' versions and vectors of `dims`, read in one statement: (ids, versions, vector
    counts, norms, matrix), the vectors in the order of their items. An item gone since is not there."""
    quote = connection.ops.quote_name
    names = {"items": quote(StoreItem._meta.db_table), "vectors": quote(StoreVector._meta.db_table)}
    wanted = [int(item_id) for item_id in item_ids]
    if connection.vendor != "postgresql":
        sql = _BY_ID_SQL.format(column="v.vector", condition="", ids="IN (SELECT value FROM json_each(%s))", **names)
        with connection.cursor() as cursor:
            cursor.execute(sql, [dims, json.dumps(wanted)])
            rows = cursor.fetchall()
    elif native_pgvector(connection.alias):
        sql = _BY_ID_SQL.format(column="v.vector::real[]", condition="", ids="= ANY(%s)", **names)
        with connection.cursor() as cursor:
            cursor.execute(sql, [dims, wanted])
            rows = cursor.fetchall()
    else:
        sql = _BY_ID_SQL.format(column="v.vector", condition="AND octet_length(v.vector) = %s", ids="= ANY(%s)", **names)
        rows = _fetch_binary(connection, sql, [dims, 4 * dims, wanted])
    rows.sort(key=lambda row: row[0])
    versions = dict((row[0], row[1]) for row in rows)
    ids = np.fromiter(versions, dtype=np.int64, count=len(versions))
    norms, values, owners = _usable([row[2] for row in rows], [row[3] for row in rows], dims, [row[0] for row in rows])
    counts = np.zeros(len(ids), dtype=np.int64)
    if len(owners):
        np.add.at(counts, np.searchsorted(ids, owners), 1)
    versions_array = np.fromiter(versions.values(), dtype=np.int64, count=len(versions))
    return ids, versions_array, counts, norms, values


def _usable(norms, values, dims: int, owners):
    """The vectors among `values` that are `dims` float32 numbers with a finite norm (a LEFT JOIN's
    NULLs, and what a put never stores, left out): (norms, float32 matrix, their owners as an array)."""
    if not all(value is None or isinstance(value, bytes) for value in values):
        values = [None if value is None else _vector_bytes(value, dims) for value in values]
    size = 4 * dims
    kept = [
        i for i, (value, vector_norm) in enumerate(zip(values, norms))
        if value is not None and len(value) == size and vector_norm is not None and math.isfinite(vector_norm)
    ]
    if len(kept) < len(values):
        norms, values, owners = [norms[i] for i in kept], [values[i] for i in kept], [owners[i] for i in kept]
    matrix = np.frombuffer(b"".join(values), dtype="<f4").reshape(len(values), dims)
    return np.array(norms, dtype=np.float64), matrix, np.array(owners, dtype=np.int64)


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
    """(ids and versions by place, then each vector's place, norm and float32 numbers) from `_ROWS_SQL`'s rows."""
    if not rows:
        none = np.zeros(0, dtype=np.int64)
        return none, none, none, np.zeros(0), np.zeros((0, dims), dtype="<f4")
    places, item_ids, item_versions, norms, values = zip(*rows)
    places = np.array(places, dtype=np.int64) - 1
    ids = np.zeros(int(places.max()) + 1, dtype=np.int64)
    ids[places] = item_ids
    versions = np.zeros(len(ids), dtype=np.int64)
    versions[places] = item_versions
    norms, matrix, places = _usable(norms, values, dims, places)
    return ids, versions, places, norms, matrix


_CHUNK = 512


def _dots(matrix, query, rows=None):
    """Each float32 row's dot product with the float64 query, in float64 (a float32 product is
    exact there), converted 512 rows at a time so that the copy stays in the CPU's cache; `rows`
    picks the rows of `matrix`. einsum sums each row alike wherever it stands, where BLAS's
    matrix-vector product rounds a row by its position (its kernels take rows four at a time,
    the rest one by one): equal vectors always get equal scores, and ties stay ties."""
    count = len(matrix) if rows is None else len(rows)
    if count and rows is not None:
        low, high = int(rows.min()), int(rows.max()) + 1
        if high - low <= count + count // 4:
            # The rows lie close together (a prefix's vectors were kept in one run): every row of
            # their span, read in place, costs less than copying them out one by one.
            return _dots(matrix[low:high], query)[rows - low]
    dots = np.empty(count)
    for start in range(0, count, _CHUNK):
        part = matrix[start : start + _CHUNK] if rows is None else matrix[rows[start : start + _CHUNK]]
        dots[start : start + _CHUNK] = np.einsum("ij,j->i", part.astype(np.float64), query)
    return dots


def _cosines(matrix, norms, query, query_norm: float, rows=None):
    """Each vector's cosine with the query: the dot product over the stored norms times the
    query's (0 when either vector is all zeros)."""
    count = len(matrix) if rows is None else len(rows)
    if query_norm == 0 or count == 0:
        return np.zeros(count)
    dots = _dots(matrix, query, rows)
    denominators = (norms if rows is None else norms[rows]) * query_norm
    return np.divide(dots, denominators, out=np.zeros_like(dots), where=denominators != 0)


def _page(ids, places, scores, limit: int, offset: int, *, updated=None):
    """The page of (item id, score or None), as `_RANK_PGVECTOR_SQL` orders.

    `ids` are the candidates' newest first, or in any order with `updated`,
    their last updates; `places` and `scores` are one entry per vector,
    `places` indexing `ids`: an item's score is its vectors' best. Scored
    items best first, then the unscored; ties, and the unscored, newest
    first (updated_at, then id, both descending). Only the candidates that
    can reach the page are sorted.
    """
    count = len(ids)
    if count == 0:
        return []
    best = np.full(count, -np.inf)
    has_vector = np.zeros(count, dtype=bool)
    if len(places):
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
    if updated is None:
        order = chosen[np.lexsort((chosen, primary[chosen]))][offset:wanted]
    else:  # ~x is -x - 1: descending, without overflow
        order = chosen[np.lexsort((~ids[chosen], ~updated[chosen], primary[chosen]))][offset:wanted]
    return [(int(ids[i]), float(best[i]) if has_vector[i] else None) for i in order]
