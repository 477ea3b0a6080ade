"""Semantic search scored in the process, with the process's vector cache (docs/store.md, "Semantic search").

Whatever the cache holds (nothing, every candidate, some at older versions, or
too little room), a search answers exactly what reading every vector answers:
the same items, in the same order, with the same float64 scores, and those are
the exact cosines.
"""

from __future__ import annotations

import math
import random
from datetime import timedelta
from decimal import Decimal, localcontext

import numpy as np
import pytest
from django.db import connection, transaction
from django.test import override_settings
from django.utils import timezone

from store_app import puts as store_puts, selectors, semantic, services
from store_app.models import StoreItem
from store_app.vectorcache import VectorCache, cache

pytestmark = pytest.mark.django_db

OFF = override_settings(MEMORYADMIN_STORE_VECTOR_CACHE_MB=0)


def _search(actor, vector, *, prefix=("c",), limit=10, offset=0, filter=None, now=None):
    request = selectors.store_search_validate(
        namespace_prefix=list(prefix), query="q", query_vector=list(vector), dims=len(vector), limit=limit, offset=offset, filter=filter
    )
    return [(item.key, item.score) for item in selectors.store_item_search(actor=actor, request=request, now=now)]


def _put_many(actor, rows, namespace=("c",)) -> None:
    """(key, value, vectors) rows as one batch of puts (one statement, as the batch endpoint writes them)."""
    checked = [
        store_puts.put_validate(actor=actor, namespace=list(namespace), key=key, value=value, vectors=vectors)
        for key, value, vectors in rows
    ]
    with transaction.atomic():
        store_puts.puts_apply(actor=actor, puts=checked)


def _random_rows(rng, count, dims, *, start=0):
    rows = []
    for i in range(start, start + count):
        if i % 7 == 3:
            vectors = {}  # no vector: listed after the scored, newest first
        elif i % 11 == 5:
            vectors = {"zero": [0.0] * dims}  # scores 0
        elif i % 13 == 6:
            vectors = {"other": [rng.uniform(-1, 1) for _ in range(dims + 1)]}  # other dims: unscored here
        else:
            vectors = {f"f{j}": [rng.uniform(-1, 1) for _ in range(dims)] for j in range(1 + i % 3)}
        rows.append((f"k{i}", {"n": i, "even": i % 2 == 0}, vectors))
    return rows


def _exact(query, vectors) -> Decimal:
    """The best cosine of float32-rounded vectors, to 40 digits (the reference for order and value)."""
    q = [Decimal(float(x)) for x in np.asarray(query, dtype="<f4")]
    with localcontext() as context:
        context.prec = 40
        q_norm = sum(x * x for x in q).sqrt()
        best = None
        for vector in vectors:
            v = [Decimal(float(x)) for x in np.asarray(vector, dtype="<f4")]
            v_norm = sum(x * x for x in v).sqrt()
            score = Decimal(0) if q_norm == 0 or v_norm == 0 else sum(a * b for a, b in zip(q, v)) / (q_norm * v_norm)
            best = score if best is None else max(best, score)
        return best


def _every_way(actor, query, **search):
    """The answer read from the database, then from a cold cache, then from the warm one."""
    with OFF:
        reference = _search(actor, query, **search)
    cache.clear()
    cold = _search(actor, query, **search)
    warm = _search(actor, query, **search)
    return reference, cold, warm


@pytest.mark.parametrize("dims", [8, 64])
def test_cached_answers_are_those_of_reading_every_vector_bit_for_bit(alice, dims):
    rng = random.Random(dims)
    _put_many(alice, _random_rows(rng, 90, dims))
    queries = [[rng.uniform(-1, 1) for _ in range(dims)] for _ in range(3)] + [[0.0] * dims]
    for query in queries:
        for search in (
            {"limit": 10},
            {"limit": 5, "offset": 7},
            {"limit": 100},  # past the scored items into the unscored
            {"limit": 10, "filter": {"even": True}},
            {"limit": 10, "prefix": ("c",)},
        ):
            reference, cold, warm = _every_way(alice, query, **search)
            assert cold == reference and warm == reference, search
    # Some items rewritten (new vectors, none, other fields): the cache holds their old versions.
    _put_many(alice, _random_rows(rng, 4, dims, start=40) + [("k1", {"n": 1}, {}), ("k2", {"n": 2}, {"f0": [1.0] * dims})])
    for query in queries:
        warm = _search(alice, query, limit=100)
        with OFF:
            assert warm == _search(alice, query, limit=100)


def test_scores_and_order_are_the_exact_cosines(alice):
    rng = random.Random(3)
    rows = _random_rows(rng, 60, 16)
    _put_many(alice, rows)
    query = [rng.uniform(-1, 1) for _ in range(16)]
    scored = {key: _exact(query, v.values()) for key, _, v in rows if v and len(next(iter(v.values()))) == 16}
    ids = dict(StoreItem.objects.values_list("key", "id"))  # one batch, one updated_at: ties go by id, newest first
    for _ in range(2):  # cold, then warm
        found = _search(alice, query, limit=100)
        ranked = [(key, score) for key, score in found if score is not None]
        assert [key for key, _ in ranked] == sorted(scored, key=lambda key: (-scored[key], -ids[key]))
        for key, score in ranked:
            assert math.isclose(score, float(scored[key]), rel_tol=1e-14, abs_tol=1e-15)


def test_near_equal_scores_keep_their_exact_order(alice):
    # Vectors one float32 step apart in one number: scores a few 1e-8 apart, far above
    # float64's rounding, far below float32's.
    rng = random.Random(5)
    base = np.array([rng.uniform(-1, 1) for _ in range(32)], dtype="<f4")
    rows = []
    for i in range(24):
        vector = base.copy()
        vector[i % 32] = np.nextafter(vector[i % 32], np.float32(2 if i % 2 else -2))
        rows.append((f"k{i}", {}, {"f": vector.astype(np.float64).tolist()}))
    _put_many(alice, rows)
    query = [rng.uniform(-1, 1) for _ in range(32)]  # not `base`: there the first-order changes cancel
    exact = {key: _exact(query, v.values()) for key, _, v in rows}
    gaps = np.diff(sorted(float(score) for score in exact.values()))
    assert gaps.min() > 1e-12 and gaps.max() < 1e-6  # distinct, yet float32 would not tell them apart
    for _ in range(2):
        found = _search(alice, query, limit=24)
        assert [key for key, _ in found] == sorted(exact, key=lambda key: -exact[key])


def test_equal_vectors_score_equally_wherever_they_stand(alice):
    # random.Random(0)'s vectors are ones whose three copies BLAS's matrix-vector product
    # scores differently (the third taken alone): einsum scores every copy alike.
    r = random.Random(0)
    query = np.array([r.uniform(-1, 1) for _ in range(256)], dtype="<f4").astype(np.float64)
    row = np.array([r.uniform(-1, 1) for _ in range(256)], dtype="<f4")
    assert len(set(semantic._dots(np.tile(row, (3, 1)), query).tolist())) == 1
    other = random.Random(1)
    rows = []
    for i in range(15):
        vector = row if i % 2 == 0 else np.array([other.uniform(-1, 1) for _ in range(256)], dtype="<f4")
        rows.append((f"k{i:02}", {"i": i}, {"f": vector.astype(np.float64).tolist()}))
    for key, value, vectors in rows:  # one put each: a newer updated_at each
        services.store_item_put(actor=alice, namespace=["c"], key=key, value=value, vectors=vectors)
    for way in _every_way(alice, query.tolist(), limit=15):
        tied = [(key, score) for key, score in way if key in {f"k{i:02}" for i in range(0, 15, 2)}]
        assert len({score for _, score in tied}) == 1
        assert [key for key, _ in tied] == [f"k{i:02}" for i in range(14, -1, -2)]  # newest first


def test_ties_across_the_page_boundary_go_newest_first_from_the_cache(alice):
    for i in range(12):
        services.store_item_put(actor=alice, namespace=["c"], key=f"k{i}", value={}, vectors={"f": [1.0, 0.0] if i % 3 else [0.0, 1.0]})
    whole = _search(alice, [1.0, 0.0], limit=100)
    pages = [_search(alice, [1.0, 0.0], limit=3, offset=offset) for offset in range(0, 12, 3)]
    assert [entry for page in pages for entry in page] == whole
    assert [key for key, score in whole if score == 1.0] == ["k11", "k10", "k8", "k7", "k5", "k4", "k2", "k1"]


@pytest.mark.parametrize("count", [1, 1100])
def test_a_prefix_of_one_item_and_of_many(alice, count):
    rng = random.Random(count)
    _put_many(alice, [(f"k{i}", {}, {"f": [rng.uniform(-1, 1) for _ in range(24)]}) for i in range(count)])
    _put_many(alice, [("elsewhere", {}, {"f": [1.0] * 24})], namespace=("d",))
    query = [rng.uniform(-1, 1) for _ in range(24)]
    reference, cold, warm = _every_way(alice, query, limit=10)
    assert cold == reference and warm == reference and len(reference) == min(count, 10)
    assert "elsewhere" not in dict(reference)


def test_a_write_is_seen_by_the_next_search_without_telling_the_cache(alice):
    _put_many(alice, [(f"k{i}", {}, {"f": [1.0, i / 10]}) for i in range(5)])
    assert _search(alice, [1.0, 0.0])[0][0] == "k0"
    held = cache.nbytes()
    # Any process's put gives new vectors a new version: the entry kept for the old one is not used.
    services.store_item_put(actor=alice, namespace=["c"], key="k0", value={}, vectors={"f": [0.0, 1.0]})
    assert cache.nbytes() == held
    assert [key for key, _ in _search(alice, [1.0, 0.0])] == ["k1", "k2", "k3", "k4", "k0"]
    services.store_item_put(actor=alice, namespace=["c"], key="k1", value={}, index=False)
    assert _search(alice, [1.0, 0.0])[-1] == ("k1", None)
    services.store_item_delete(actor=alice, namespace=["c"], key="k2")
    services.store_item_put(actor=alice, namespace=["c"], key="k3", value={}, vectors={"f": [1.0, 0.0]}, ttl=1)
    later = timezone.now() + timedelta(minutes=2)
    assert [key for key, _ in _search(alice, [1.0, 0.0], now=later)] == ["k4", "k0", "k1"]
    assert _search(alice, [1.0, 0.0])[0] == ("k3", 1.0)


def test_a_rolled_back_put_leaves_nothing_the_cache_could_serve(alice):
    services.store_item_put(actor=alice, namespace=["c"], key="keep", value={}, vectors={"f": [0.6, 0.8]})
    _search(alice, [1.0, 0.0])
    with pytest.raises(RuntimeError), transaction.atomic():
        services.store_item_put(actor=alice, namespace=["c"], key="new", value={}, vectors={"f": [1.0, 0.0]})
        services.store_item_put(actor=alice, namespace=["c"], key="keep", value={}, vectors={"f": [0.0, 1.0]})
        assert [key for key, _ in _search(alice, [1.0, 0.0])] == ["new", "keep"]  # seen, and kept, inside
        raise RuntimeError
    # The same key again (on SQLite even the same id, its AUTOINCREMENT rolled back), other vectors.
    services.store_item_put(actor=alice, namespace=["c"], key="new", value={}, vectors={"f": [-1.0, 0.0]})
    found = _search(alice, [1.0, 0.0])
    assert [key for key, _ in found] == ["keep", "new"]
    assert found[0][1] == pytest.approx(0.6) and found[1][1] == pytest.approx(-1.0)


def test_query_counts_whatever_the_cache_holds(alice, django_assert_num_queries):
    def search():
        return _search(alice, [0.5] * 8, limit=5)

    for size in (10, 200):
        _put_many(alice, [(f"k{i}", {}, {"f": [random.random() for _ in range(8)]}) for i in range(size)])
        cache.clear()
        search()  # the per-process look-ups (the vector column's type, pgvector) are behind us
        cache.clear()
        with django_assert_num_queries(2):  # nothing kept: every candidate with its vectors, the page's items
            search()
        with django_assert_num_queries(2):  # all kept: the candidates' versions, the page's items
            search()
        services.store_item_put(actor=alice, namespace=["c"], key="k3", value={}, vectors={"f": [1.0] * 8})
        with django_assert_num_queries(3):  # one new version: its vectors by id
            search()
        _put_many(alice, [(f"k{i}", {}, {"f": [random.random() for _ in range(8)]}) for i in range(size)])
        with django_assert_num_queries(3):  # most are new: every candidate's vectors again
            search()
        with OFF, django_assert_num_queries(2):
            search()


def test_past_the_candidate_cap_the_cache_answers_the_newest(alice):
    # One batch: one updated_at, ids in key order; then k0 again, the newest.
    _put_many(alice, [(f"k{i}", {}, {"f": [1.0, i / 10]}) for i in range(6)])
    services.store_item_put(actor=alice, namespace=["c"], key="k0", value={}, vectors={"f": [1.0, 0.0]})
    newest = list(StoreItem.objects.order_by("-updated_at", "-id").values_list("key", flat=True)[:3])
    assert newest == ["k0", "k5", "k4"]
    with override_settings(MEMORYADMIN_STORE_VECTOR_CANDIDATES=3):
        for _ in range(3):  # cold, then warm
            assert [key for key, _ in _search(alice, [1.0, 0.0])] == ["k0", "k4", "k5"]


@override_settings(MEMORYADMIN_STORE_VECTOR_CACHE_MB=1)
def test_the_cache_stays_within_its_budget(alice):
    # 1 MiB holds about a thousand 256-number vectors (1 kB and a norm each, 32 bytes an item).
    rng = random.Random(9)
    _put_many(alice, [(f"k{i}", {}, {"f": [rng.uniform(-1, 1) for _ in range(256)]}) for i in range(1100)], namespace=("big",))
    _put_many(alice, [(f"k{i}", {}, {"f": [rng.uniform(-1, 1) for _ in range(256)]}) for i in range(600)], namespace=("mid",))
    _put_many(alice, [(f"k{i}", {}, {"f": [rng.uniform(-1, 1) for _ in range(128)]}) for i in range(600)], namespace=("small",))
    for prefix, dims in (("big", 256), ("mid", 256), ("small", 128), ("mid", 256), ("big", 256), ("small", 128)):
        query = [rng.uniform(-1, 1) for _ in range(dims)]
        found = _search(alice, query, prefix=(prefix,), limit=20)
        with OFF:
            assert found == _search(alice, query, prefix=(prefix,), limit=20)
        assert cache.nbytes() <= 2**20
    assert cache.holds_any(connection.alias, 128)  # the last prefix that fits is kept


def _entries(ids, versions, counts, dims=2):
    ids = np.array(ids, dtype=np.int64)
    counts = np.array(counts, dtype=np.int64)
    rows = int(counts.sum())
    matrix = np.arange(rows * dims, dtype="<f4").reshape(rows, dims) + ids.repeat(counts)[:, None] * 1000
    return ids, np.array(versions, dtype=np.int64), counts, np.linalg.norm(matrix, axis=1), matrix


def _held(found):
    return {tuple(row) for row in found.snapshot.matrix[found.rows].tolist()} if len(found.rows) else set()


@override_settings(MEMORYADMIN_STORE_VECTOR_CACHE_MB=1)
def test_the_cache_finds_an_item_only_at_its_version():
    kept = VectorCache()
    assert kept.add("db", 2, *_entries([5, 3, 9], [1, 1, 1], [1, 2, 0]))
    found = kept.lookup("db", 2, np.array([9, 3, 4, 5]), np.array([1, 1, 1, 2]))
    assert found.hit.tolist() == [True, True, False, False]
    assert found.places.tolist() == [1, 1]  # item 9 has no vector; item 3 has two
    assert _held(found) == {(3002.0, 3003.0), (3004.0, 3005.0)}
    assert kept.add("db", 2, *_entries([3], [2], [1]))  # a new version replaces the entry
    found = kept.lookup("db", 2, np.array([3, 5]), np.array([2, 1]))
    assert found.hit.tolist() == [True, True] and found.places.tolist() == [0, 1]
    assert not kept.lookup("db", 2, np.array([3]), np.array([1])).hit.any()
    assert not kept.lookup("other", 2, np.array([3]), np.array([2])).hit.any()
    assert not kept.lookup("db", 3, np.array([3]), np.array([2])).hit.any()


@override_settings(MEMORYADMIN_STORE_VECTOR_CACHE_MB=1)
def test_the_cache_takes_back_the_rows_of_replaced_versions():
    kept = VectorCache()
    dims = 1000  # 4 kB a vector: about 250 fit in 1 MiB
    for version in range(1, 40):
        assert kept.add("db", dims, *_entries(list(range(100)), [version] * 100, [1] * 100, dims=dims))
        assert kept.nbytes() <= 2**20
    found = kept.lookup("db", dims, np.arange(100), np.full(100, 39))
    assert found.hit.all() and len(found.rows) == 100
    assert found.snapshot.matrix[found.rows][:, 0].tolist() == [i * dims + i * 1000.0 for i in range(100)]
    assert not kept.add("db", dims, *_entries(list(range(300)), [1] * 300, [1] * 300, dims=dims))  # more than 1 MiB
