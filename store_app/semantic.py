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
and database), else with an `unnest` dot product in plain SQL. SQLite reads the
candidates' vectors and computes the same in Python.
"""

from __future__ import annotations

from django.conf import settings
from django.db import connections

from .models import StoreVector, vector_array
from .vectors import cosine, float32, norm

_pgvector: dict[str, bool] = {}

_RANK_SQL = """
WITH candidates AS MATERIALIZED ({candidates}),
scored AS (
    SELECT v.item_id, MAX({score}) AS score
    FROM {vectors} v JOIN candidates c ON v.item_id = c.id
    WHERE v.dims = %s
    GROUP BY v.item_id
)
SELECT c.id, s.score FROM candidates c LEFT JOIN scored s ON s.item_id = c.id
ORDER BY s.score DESC NULLS LAST, c.updated_at DESC, c.id DESC
LIMIT %s OFFSET %s
"""
# Scores divide by the stored norms; a zero vector scores 0 rather than NaN.
_SCORE_PGVECTOR = "CASE WHEN v.norm = 0 THEN 0.0 ELSE ((v.vector::vector <#> %s::vector) * -1) / (v.norm * %s) END"
_SCORE_SQL = (
    "CASE WHEN v.norm = 0 THEN 0.0 ELSE "
    "(SELECT sum(a::float8 * b::float8) FROM unnest(v.vector, %s::real[]) AS t(a, b)) / (v.norm * %s) END"
)


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


def ranked_ids(*, qs, vector: list[float], dims: int, limit: int, offset: int) -> list[tuple[int, float | None]]:
    """(item id, score or None) of one page of the candidates of `qs`, best first."""
    if limit == 0:
        return []
    query = float32(vector)
    query_norm = norm(query)
    cap = settings.MEMORYADMIN_STORE_VECTOR_CANDIDATES
    if connections[qs.db].vendor == "postgresql":
        return _ranked_postgresql(qs, query, query_norm, dims, limit, offset, cap)
    return _ranked_python(qs, query, query_norm, dims, limit, offset, cap)


def _ranked_postgresql(qs, query, query_norm, dims, limit, offset, cap):
    connection = connections[qs.db]
    candidates = _candidates(qs).values("id", "updated_at")[:cap]
    candidates_sql, candidates_params = candidates.query.get_compiler(connection=connection).as_sql()
    values = query.tolist()
    if query_norm == 0:
        score, score_params = "0.0", []
    elif pgvector_in_use(qs.db):
        score, score_params = _SCORE_PGVECTOR, [values, query_norm]
    else:
        score, score_params = _SCORE_SQL, [values, query_norm]
    sql = _RANK_SQL.format(
        candidates=candidates_sql, score=score, vectors=connection.ops.quote_name(StoreVector._meta.db_table)
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [*candidates_params, *score_params, dims, limit, offset])
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
