"""The store endpoints in the LangGraph server's shapes (docs/store.md, "API guide")."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from store_app import services
from store_app.models import StoreItem
from tests.store_app.conftest import bulk_items

ITEMS = "/api/v1/store/items"
SEARCH = "/api/v1/store/items/search"
NAMESPACES = "/api/v1/store/namespaces"


def put(client, namespace, key, value, **extra):
    return client.put(ITEMS, {"namespace": namespace, "key": key, "value": value, **extra}, format="json")


def test_put_answers_204_and_get_returns_the_item(alice_api):
    response = put(alice_api, ["users", "alice", "preferences"], "language", {"language": "zh-CN"})
    assert response.status_code == 204
    response = alice_api.get(ITEMS, {"namespace": "users.alice.preferences", "key": "language"})
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"namespace", "key", "value", "created_at", "updated_at"}
    assert body["namespace"] == ["users", "alice", "preferences"]
    assert body["key"] == "language"
    assert body["value"] == {"language": "zh-CN"}


def test_get_of_a_missing_item_is_200_with_null(alice_api):
    response = alice_api.get(ITEMS, {"namespace": "users.nobody", "key": "nothing"})
    assert response.status_code == 200
    assert response.content == b"null"
    assert response["Content-Type"].startswith("application/json")


def test_delete_takes_a_json_body_and_answers_204(alice_api):
    put(alice_api, ["a"], "k", {"v": 1})
    response = alice_api.delete(ITEMS, {"namespace": ["a"], "key": "k"}, format="json")
    assert response.status_code == 204
    assert not StoreItem.objects.exists()
    again = alice_api.delete(ITEMS, {"namespace": ["a"], "key": "k"}, format="json")
    assert again.status_code == 204


def test_put_with_ttl_sets_an_expiry_in_minutes(alice_api):
    before = timezone.now()
    assert put(alice_api, ["s"], "k", {"v": 1}, ttl=30).status_code == 204
    item = StoreItem.objects.get()
    assert before + timedelta(minutes=30) <= item.expires_at <= timezone.now() + timedelta(minutes=30)


def test_get_refreshes_the_ttl_unless_told_not_to(alice, alice_api):
    t0 = timezone.now() - timedelta(minutes=5)
    services.store_item_put(actor=alice, namespace=["s"], key="k", value={}, ttl=10, now=t0)
    alice_api.get(ITEMS, {"namespace": "s", "key": "k", "refresh_ttl": "false"})
    assert StoreItem.objects.get().expires_at == t0 + timedelta(minutes=10)
    alice_api.get(ITEMS, {"namespace": "s", "key": "k"})
    assert StoreItem.objects.get().expires_at > t0 + timedelta(minutes=14)


def test_search_returns_items_with_score(alice_api):
    put(alice_api, ["notes", "alice"], "tea", {"text": "likes green tea"})
    put(alice_api, ["notes", "alice"], "walk", {"text": "walks to work", "steps": 9000})
    put(alice_api, ["notes", "bobby"], "tea", {"text": "tea"})
    response = alice_api.post(SEARCH, {"namespace_prefix": ["notes", "alice"], "query": "tea"}, format="json")
    assert response.status_code == 200
    items = response.json()["items"]
    # The item sharing a word ranks first; the others under the prefix follow with score 0.
    assert [(item["namespace"], item["key"]) for item in items] == [(["notes", "alice"], "tea"), (["notes", "alice"], "walk")]
    assert items[0]["score"] > 0
    assert items[1]["score"] == 0
    plain = alice_api.post(SEARCH, {"namespace_prefix": ["notes"], "filter": {"steps": {"$gt": 100}}}, format="json")
    assert [(item["key"], item["score"]) for item in plain.json()["items"]] == [("walk", None)]


def test_search_without_a_body_prefix_searches_everything_visible(alice_api):
    put(alice_api, ["a"], "k", {})
    response = alice_api.post(SEARCH, {}, format="json")
    assert [item["key"] for item in response.json()["items"]] == ["k"]


def test_namespaces_lists_with_prefix_and_max_depth(alice_api):
    for namespace in (["a", "b", "c"], ["a", "b", "d", "e"], ["a", "x"], ["z"]):
        put(alice_api, namespace, "k", {})
    response = alice_api.post(NAMESPACES, {"prefix": ["a"], "max_depth": 2}, format="json")
    assert response.status_code == 200
    assert response.json() == {"namespaces": [["a", "b"], ["a", "x"]]}
    suffixed = alice_api.post(NAMESPACES, {"suffix": ["*", "e"], "limit": 5, "offset": 0}, format="json")
    assert suffixed.json() == {"namespaces": [["a", "b", "d", "e"]]}
    for blank in (None, ""):  # no limit, as leaving it out
        whole = alice_api.post(NAMESPACES, {"prefix": ["a"], "max_depth": blank}, format="json")
        assert whole.status_code == 200 and len(whole.json()["namespaces"]) == 3


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"namespace": ["users", ""], "key": "k", "value": {}}, "namespace"),
        ({"namespace": ["users", "a.b"], "key": "k", "value": {}}, "namespace"),
        ({"namespace": ["users", "a\u0000b"], "key": "k", "value": {}}, "namespace"),
        ({"namespace": ["langgraph", "x"], "key": "k", "value": {}}, "namespace"),
        ({"namespace": [], "key": "k", "value": {}}, "namespace"),
        ({"namespace": "users", "key": "k", "value": {}}, "namespace"),
        ({"key": "k", "value": {}}, "namespace"),
        ({"namespace": ["a"], "key": "k", "value": [1, 2]}, "value"),
        ({"namespace": ["a"], "key": "k", "value": "text"}, "value"),
        ({"namespace": ["a"], "key": "k"}, "value"),
        ({"namespace": ["a"], "key": "", "value": {}}, "key"),
        ({"namespace": ["a"], "key": "k", "value": {}, "ttl": -1}, "ttl"),
        ({"namespace": ["a"], "key": "k", "value": {}, "ttl": "soon"}, "ttl"),
        ({"namespace": ["a"], "key": "k", "value": {}, "index": "yes"}, "index"),
    ],
)
def test_put_refuses_bad_input_with_400_naming_the_field(alice_api, body, field):
    response = alice_api.put(ITEMS, body, format="json")
    assert response.status_code == 400
    answer = response.json()
    assert answer["code"] == "invalid"
    assert field in answer["errors"]
    assert answer["detail"]
    assert not StoreItem.objects.exists()


def test_put_refuses_a_body_that_is_not_an_object(alice_api):
    response = alice_api.put(ITEMS, [1, 2], format="json")
    assert response.status_code == 400
    assert "body" in response.json()["errors"]


def test_put_refuses_broken_json(alice_api):
    response = alice_api.generic("PUT", ITEMS, '{"namespace": [', content_type="application/json")
    assert response.status_code == 400


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"namespace": "users..x", "key": "k"}, "namespace"),
        ({"namespace": "users", "key": ""}, "key"),
        ({"key": "k"}, "namespace"),
        ({"namespace": "users"}, "key"),
        ({"namespace": "users", "key": "k", "refresh_ttl": "maybe"}, "refresh_ttl"),
    ],
)
def test_get_refuses_bad_parameters(alice_api, params, field):
    response = alice_api.get(ITEMS, params)
    assert response.status_code == 400
    assert field in response.json()["errors"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"namespace_prefix": ["a", ""]}, "namespace_prefix"),
        ({"namespace_prefix": ["a.b"]}, "namespace_prefix"),
        ({"filter": {"n": {"$in": [1]}}}, "filter"),
        ({"filter": {"n": {"$gt": True}}}, "filter"),
        ({"filter": [1]}, "filter"),
        ({"limit": 5000}, "limit"),
        ({"offset": -1}, "offset"),
        ({"query": 12}, "query"),
        ({"refresh_ttl": "maybe"}, "refresh_ttl"),
    ],
)
def test_search_refuses_bad_input(alice_api, body, field):
    response = alice_api.post(SEARCH, body, format="json")
    assert response.status_code == 400
    assert field in response.json()["errors"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"prefix": ["a", ""]}, "prefix"),
        ({"suffix": ["a.b"]}, "suffix"),
        ({"max_depth": 0}, "max_depth"),
        ({"limit": -1}, "limit"),
        ({"offset": "x"}, "offset"),
    ],
)
def test_namespaces_refuses_bad_input(alice_api, body, field):
    response = alice_api.post(NAMESPACES, body, format="json")
    assert response.status_code == 400
    assert field in response.json()["errors"]


def test_delete_refuses_a_bad_namespace(alice_api):
    response = alice_api.delete(ITEMS, {"namespace": ["a", ""], "key": "k"}, format="json")
    assert response.status_code == 400
    assert "namespace" in response.json()["errors"]


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [("get", ITEMS, None), ("put", ITEMS, {}), ("delete", ITEMS, {}), ("post", SEARCH, {}), ("post", NAMESPACES, {})],
)
def test_every_store_endpoint_needs_credentials(anon_api, method, path, body):
    response = getattr(anon_api, method)(path, body, format="json") if body is not None else anon_api.get(path)
    assert response.status_code == 401


def _fill(actor, count: int, start: int = 0) -> None:
    bulk_items(
        (actor, ["bulk", f"group{index % 5}", "items"], f"k{index:04d}", {"n": index, "text": f"memory number {index} about tea"}, 60 if index % 3 == 0 else None)
        for index in range(start, count)
    )


def _queries(client, method: str, path: str, body=None) -> int:
    with CaptureQueriesContext(connection) as captured:
        response = getattr(client, method)(path, body, format="json")
    assert response.status_code == 200, response.content
    return len(captured)


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("post", SEARCH, {"namespace_prefix": ["bulk"], "limit": 10}),
        ("post", SEARCH, {"namespace_prefix": ["bulk"], "query": "tea", "limit": 10}),
        ("post", SEARCH, {"namespace_prefix": ["bulk"], "filter": {"n": {"$gte": 3}}, "limit": 10}),
        ("post", NAMESPACES, {"prefix": ["bulk"]}),
        ("post", NAMESPACES, {"max_depth": 2}),
        ("get", ITEMS, {"namespace": "bulk.group0.items", "key": "k0000"}),
    ],
)
def test_store_endpoints_issue_a_constant_number_of_queries(alice, alice_api, django_assert_num_queries, method, path, body):
    _fill(alice, 10)
    # The first call of a key stamps its last_used_at; measure from the second.
    _queries(alice_api, method, path, body)
    small = _queries(alice_api, method, path, body)
    _fill(alice, 200, start=10)
    with django_assert_num_queries(small):
        response = getattr(alice_api, method)(path, body, format="json")
    assert response.status_code == 200
    payload = response.json()
    if "items" in payload:
        assert len(payload["items"]) == 10


def test_values_come_back_exactly_as_posted(alice_api):
    value = {"text": "<b>bold</b> & \"quoted\"", "nested": {"list": [1, 2.5, None, True]}, "unicode": "记住我"}
    put(alice_api, ["a"], "k", value)
    body = alice_api.get(ITEMS, {"namespace": "a", "key": "k"}).json()
    assert body["value"] == value
    assert json.loads(json.dumps(body["value"])) == value
