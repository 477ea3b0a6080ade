"""POST /store/batch (docs/store.md, rule ST11): one transaction, reads before writes, the last put of a key."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memoryadmin.models import AuditEvent
from store_app import services
from store_app.batch import MAX_BATCH_OPS
from store_app.models import StoreItem

BATCH = "/api/v1/store/batch"
pytestmark = pytest.mark.django_db


def run(api, ops, **extra):
    return api.post(BATCH, {"ops": ops, **extra}, format="json")


def put(key, value, namespace=("b",), **fields):
    return {"op": "put", "namespace": list(namespace), "key": key, "value": value, **fields}


def get(key, namespace=("b",)):
    return {"op": "get", "namespace": list(namespace), "key": key}


def test_reads_answer_from_before_the_writes_and_the_last_put_of_a_key_wins(alice, alice_api):
    services.store_item_put(actor=alice, namespace=["b"], key="old", value={"v": 0})
    response = run(
        alice_api,
        [
            put("new", {"v": 1}),
            get("new"),
            get("old"),
            put("old", {"v": 2}),
            {"op": "search", "namespace_prefix": ["b"]},
            put("new", {"v": 3}),
            {"op": "delete", "namespace": ["b"], "key": "old"},
            {"op": "list_namespaces", "prefix": ["b"]},
        ],
    )
    assert response.status_code == 200, response.content
    results = [entry["result"] for entry in response.json()["results"]]
    assert results[0] is None and results[1] is None
    assert results[2]["value"] == {"v": 0}
    assert [item["key"] for item in results[4]] == ["old"]
    assert results[7] == [["b"]]
    assert {item.key: item.value for item in StoreItem.objects.all()} == {"new": {"v": 3}}


@pytest.mark.parametrize(
    "bad, field",
    [
        (put("k", "not an object"), "ops[1].value"),
        (put("k", {}, namespace=()), "ops[1].namespace"),
        ({"op": "get", "namespace": ["b"]}, "ops[1].key"),
        ({"op": "frobnicate"}, "ops[1].op"),
        ("get", "ops[1].op"),
        ({"op": "search", "filter": {"n": {"$regex": "x"}}}, "ops[1].filter"),
        ({"op": "search", "limit": -1}, "ops[1].limit"),
        ({"op": "list_namespaces", "max_depth": 0}, "ops[1].max_depth"),
        (put("k", {}, vectors={"t": [1.0]}, dims=2), "ops[1].vectors"),
    ],
)
def test_an_atomic_batch_refuses_a_bad_operation_naming_it_and_writes_nothing(alice_api, bad, field):
    response = run(alice_api, [put("first", {"v": 1}), bad])
    assert response.status_code == 400, response.content
    assert field in response.json()["errors"]
    assert not StoreItem.objects.exists()


def test_an_atomic_batch_touching_another_users_item_is_a_403_and_writes_nothing(alice, bob, alice_api):
    services.store_item_put(actor=bob, namespace=["b"], key="bobs", value={"v": "bob"})
    response = run(alice_api, [put("mine", {"v": 1}), put("bobs", {"v": "alice"})])
    assert response.status_code == 403
    assert "ops[1]" in response.json()["detail"]
    assert list(StoreItem.objects.values_list("key", flat=True)) == ["bobs"]
    assert AuditEvent.objects.filter(action="access.denied").count() == 1


def test_not_atomic_each_operation_answers_on_its_own(alice, bob, alice_api):
    services.store_item_put(actor=bob, namespace=["b"], key="bobs", value={"v": "bob"})
    response = run(
        alice_api,
        [put("mine", {"v": 1}), put("bobs", {"v": "alice"}), get("bobs"), {"op": "search", "filter": 3}, get("mine")],
        atomic=False,
    )
    assert response.status_code == 200
    results = response.json()["results"]
    assert results[0] == {"result": None}
    assert results[1]["error"]["status"] == 403 and results[2]["error"]["status"] == 403
    assert results[3]["error"]["status"] == 400 and "filter" in results[3]["error"]["errors"]
    assert results[4] == {"result": None}  # read before the batch's writes
    assert StoreItem.objects.get(key="mine").value == {"v": 1}
    assert StoreItem.objects.get(key="bobs").value == {"v": "bob"}
    assert AuditEvent.objects.filter(action="access.denied").count() == 2


def test_the_body_is_checked(alice_api):
    assert run(alice_api, "nope").status_code == 400
    assert "ops" in alice_api.post(BATCH, {}, format="json").json()["errors"]
    too_many = run(alice_api, [get("k")] * (MAX_BATCH_OPS + 1))
    assert too_many.status_code == 400 and "ops" in too_many.json()["errors"]
    assert "atomic" in run(alice_api, [get("k")], atomic="maybe").json()["errors"]
    assert run(alice_api, []).json() == {"results": []}


def test_operators_read_in_a_batch_but_write_nothing(alice, operator_api):
    services.store_item_put(actor=alice, namespace=["b"], key="k", value={"v": 1})
    assert run(operator_api, [get("k")]).json()["results"][0]["result"]["value"] == {"v": 1}
    assert run(operator_api, [put("k", {"v": 2})]).status_code == 403
    assert run(operator_api, [{"op": "delete", "namespace": ["b"], "key": "k"}]).status_code == 403


def test_gets_cost_the_same_queries_for_five_or_a_hundred(alice, alice_api):
    for i in range(100):
        services.store_item_put(actor=alice, namespace=["b", f"n{i % 4}"], key=f"k{i}", value={"i": i})

    def gets(count):
        with CaptureQueriesContext(connection) as queries:
            response = run(alice_api, [get(f"k{i}", ("b", f"n{i % 4}")) for i in range(count)])
        assert [entry["result"]["value"]["i"] for entry in response.json()["results"]] == list(range(count))
        return len([q for q in queries.captured_queries if "store_app_storeitem" in q["sql"]])

    assert gets(5) == gets(100)


def test_puts_cost_the_same_queries_for_five_or_a_hundred(alice, alice_api):
    """One upsert for all the puts (with TTLs, vectors, overwrites), one DELETE and one INSERT of vectors."""
    for i in range(200):
        services.store_item_put(actor=alice, namespace=["b"], key=f"old{i}", value={"i": i}, vectors={"t": [1.0, 0.0]}, dims=2)

    def puts(count, prefix):
        ops = [
            put(f"{prefix}{i}" if i % 2 else f"old{i}", {"i": i, "text": "é" * (i % 3)}, ttl=1 + i if i % 3 else None,
                vectors={"t": [0.5, float(i)]}, dims=2)
            for i in range(count)
        ]
        with CaptureQueriesContext(connection) as queries:
            response = run(alice_api, ops)
        assert response.status_code == 200, response.content
        assert response.json() == {"results": [{"result": None}] * count}
        return len(queries.captured_queries)

    puts(1, "w")  # the key's first request looks it up; the next ones find it in the process's cache
    assert puts(5, "a") == puts(100, "b")
    assert StoreItem.objects.get(key="b99").value == {"i": 99, "text": ""}


def test_a_batch_stores_what_single_puts_store(alice, alice_api):
    """Values, TTLs and times as the single put writes them, whatever the statement the batch runs."""
    values = [
        {"double": 1e20, "small": 1.5e-7, "long": 12345678901234567890123456789, "zero": -0.0},
        {"text": "naïve café ☕ 😀", "nested": {"list": [1, 2.5, None, True, {"deep": ["x"]}]}},
        {"quote": 'a "quoted" \\ back\\slash', "e": "1e+20 stays text", "empty": {}},
    ]
    ttls = [None, 0.5, 1440.25]
    single = [(f"s{i}", value, ttl) for i, (value, ttl) in enumerate(zip(values, ttls))]
    for key, value, ttl in single:
        services.store_item_put(actor=alice, namespace=["b", "single"], key=key, value=value, ttl=ttl)
    response = run(alice_api, [put(f"s{i}", value, ("b", "many"), ttl=ttl) for i, (value, ttl) in enumerate(zip(values, ttls))])
    assert response.status_code == 200, response.content
    got = run(alice_api, [{**get(key, ns), "refresh_ttl": False} for ns in (("b", "single"), ("b", "many")) for key, _, _ in single]).json()["results"]
    assert [entry["result"]["value"] for entry in got[:3]] == [entry["result"]["value"] for entry in got[3:]]
    assert got[0]["result"]["value"]["double"] == 1e20 and got[0]["result"]["value"]["long"] == 12345678901234567890123456789
    for key, _, ttl in single:
        one, many = StoreItem.objects.get(namespace_path="b.single", key=key), StoreItem.objects.get(namespace_path="b.many", key=key)
        assert many.ttl == one.ttl
        assert (many.expires_at - many.updated_at) == (one.expires_at - one.updated_at) if ttl else many.expires_at is None
        assert many.created_at == many.updated_at
    # Overwritten by a batch: created_at kept, the TTL replaced (or removed).
    created = StoreItem.objects.get(namespace_path="b.many", key="s1").created_at
    assert run(alice_api, [put("s1", {"v": 2}, ("b", "many")), put("s2", {"v": 3}, ("b", "many"), ttl=5)]).status_code == 200
    again = StoreItem.objects.get(namespace_path="b.many", key="s1")
    assert again.created_at == created and again.value == {"v": 2} and again.ttl is None and again.expires_at is None
    assert StoreItem.objects.get(namespace_path="b.many", key="s2").ttl.total_seconds() == 300
