"""Ranking search candidates by meaning (docs/store.md, rule ST10 and "Semantic search").

The candidates are the search's items (visible to the actor, live, under the
prefix, matching the filter), the most recently updated
MEMORYADMIN_STORE_VECTOR_CANDIDATES of them. Each candidate's score is the best
cosine similarity between the query vector and its vectors of the same `dims`,
as LangGraph's stores pool an item's fields; candidates without such a vector
follow the scored ones with score None, as in LangGraph's in-memory store.
Ties, and the unscored, go newest first.

PostgreSQL ranks in one statement over the candidates: with pgvector's inner
product operator when the extension is installed (looked up once per process
and database), else with an `unnest` dot product in plain SQL. The column is
pgvector's `vector` when the extension was there at migration (four to eight
times faster to score than casting `real[]`), else `real[]`. SQLite reads the
candidates' vectors and computes the same in Python.
"""

from __future__ import annotations

from django.conf import settings
from django.db import connections

from .models import StoreVector, vector_array
from .namespaces import SEPARATOR
from .vectors import cosine, float32, norm

_pgvector: dict[str, bool] = {}

# The vectors of the prefix are read through their own namespace_path index and
# kept when their item is a candidate (a hash of the candidates' ids, never of the
# vectors); `scores` is materialised so that grouping sees (item, score) pairs only.
_RANK_SQL = """
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
# Scores divide by the stored norms; a zero vector scores 0 rather than NaN. {column}
# is the vector as pgvector's type or as real[], whichever the expression needs.
_SCORE_PGVECTOR = "CASE WHEN v.norm = 0 THEN 0.0 ELSE (({column} <#> %s::vector) * -1) / (v.norm * %s) END"
_SCORE_SQL = (
    "CASE WHEN v.norm = 0 THEN 0.0 ELSE "
    "(SELECT sum(a::float8 * b::float8) FROM unnest({column}, %s::real[]) AS t(a, b)) / (v.norm * %s) END"
)
_column_type: dict[str, str] = {}


def vector_column_type(alias: str) -> str:
    """"vector" or "_float4" (real[]): what migration 0005 made, looked up once per process and database."""
    if alias not in _column_type:
        with connections[alias].cursor() as cursor:
            cursor.execute(
                "SELECT udt_name FROM information_schema.columns WHERE table_name = %s AND column_name = 'vector'",
                [StoreVector._meta.db_table],
            )
            row = cursor.fetchone()
            _column_type[alias] = row[0] if row else "_float4"
    return _column_type[alias]


def pgvector_in_use(alias: str) -> bool:
    """Whether PostgreSQL ranks with pgvector: MEMORYADMIN_STORE_PGVECTOR is "auto" and the extension is there."""
    if settings.MEMORYADMIN_STORE_PGVECTOR == "off" or connections[alias].vendor != "postgresql":
        return False
    if alias not in _pgvector:
        with connections[alias].cursor() as cursor:
            cursor.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'")
            _pgvector[alias] = cursor.fetchone() is not None
    return _pgvector[alias]


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
    if connections[qs.db].vendor == "postgresql":
        return _ranked_postgresql(qs, prefix, query, query_norm, dims, limit, offset, cap)
    return _ranked_python(qs, query, query_norm, dims, limit, offset, cap)


def _ranked_postgresql(qs, prefix, query, query_norm, dims, limit, offset, cap):
    connection = connections[qs.db]
    candidates = _candidates(qs).values("id", "updated_at")[:cap]
    candidates_sql, candidates_params = candidates.query.get_compiler(connection=connection).as_sql()
    values = query.tolist()
    if query_norm == 0:
        score, score_params = "0.0", []
    else:
        native = vector_column_type(qs.db) == "vector"
        if pgvector_in_use(qs.db):
            score = _SCORE_PGVECTOR.format(column="v.vector" if native else "v.vector::vector")
        else:
            score = _SCORE_SQL.format(column="v.vector::real[]" if native else "v.vector")
        score_params = [values, query_norm]
    prefix_sql, prefix_params = "", []
    if prefix:
        # The items' own condition (StoreItem.objects.under), on the vectors' copy of their path.
        path = SEPARATOR.join(prefix)
        prefix_sql = "AND (v.namespace_path = %s OR v.namespace_path LIKE %s)"
        prefix_params = [path, connection.ops.prep_for_like_query(path + SEPARATOR) + "%"]
    sql = _RANK_SQL.format(
        candidates=candidates_sql,
        score=score,
        prefix=prefix_sql,
        vectors=connection.ops.quote_name(StoreVector._meta.db_table),
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [*candidates_params, *score_params, dims, *prefix_params, limit, offset])
        return [(item_id, score) for item_id, score in cursor.fetchall()]


def _ranked_python(qs, query, query_norm, dims, limit, offset, cap):
    connection = connections[qs.db]
    candidates = list(_candidates(qs).values_list("id", "updated_at")[:cap])
    ids = _candidates(qs).values("id")[:cap]
    ids_sql, ids_params = ids.query.get_compiler(connection=connection).as_sql()
    table = connection.ops.quote_name(StoreVector._meta.db_table)
    # Raw rows: the vectors stay float32 bytes, unpacked once each below.
    sql = f"SELECT item_id, norm, vector FROM {table} WHERE dims = %s AND item_id IN ({ids_sql})"
    best: dict[int, float] = {}
    with connection.cursor() as cursor:
        cursor.execute(sql, [dims, *ids_params])
        for item_id, vector_norm, data in cursor.fetchall():
            score = cosine(query, query_norm, vector_array(bytes(data)), vector_norm)
            if item_id not in best or score > best[item_id]:
                best[item_id] = score
    order = sorted(
        candidates,
        key=lambda row: (row[0] in best, best.get(row[0], 0.0), row[1], row[0]),
        reverse=True,
    )
    return [(item_id, best.get(item_id)) for item_id, _ in order[offset : offset + limit]]
