"""The official `langgraph-sdk` store client against a live memoryadmin (docs/store.md, "API guide").

The client sends the key as `x-api-key`, the namespace of a get as a dotted
query parameter, a delete as a JSON body, and expects `null` for a missing item.
"""

from __future__ import annotations

import httpx
import pytest
from langgraph_sdk import get_sync_client

from memoryadmin.apikeys import apikey_create
from store_app.models import StoreItem

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def sdk_store(live_server):
    """A store client per user; closed after the test so the live server's keep-alive threads end."""
    clients = []

    def make(user):
        client = get_sync_client(url=live_server.url + "/api/v1", api_key=apikey_create(owner=user).plaintext)
        clients.append(client)
        return client.store

    yield make
    for client in clients:
        client.close()


def test_the_sdk_client_round_trips_an_item(sdk_store, alice):
    store = sdk_store(alice)
    namespace = ["users", "alice", "preferences"]
    store.put_item(namespace, key="language", value={"language": "zh-CN", "confidence": 0.9})
    item = store.get_item(namespace, key="language")
    assert item["namespace"] == namespace
    assert item["key"] == "language"
    assert item["value"] == {"language": "zh-CN", "confidence": 0.9}
    assert item["created_at"] and item["updated_at"]

    store.put_item(namespace, key="language", value={"language": "en"})
    again = store.get_item(namespace, key="language")
    assert again["value"] == {"language": "en"}
    assert again["created_at"] == item["created_at"]

    store.delete_item(namespace, key="language")
    assert store.get_item(namespace, key="language") is None


def test_the_sdk_client_searches_filters_and_ranks(sdk_store, alice):
    store = sdk_store(alice)
    store.put_item(["memories", "alice"], key="tea", value={"text": "likes green tea", "confidence": 0.9})
    store.put_item(["memories", "alice"], key="coffee", value={"text": "coffee in the morning", "confidence": 0.4})
    store.put_item(["memories", "alicia"], key="tea", value={"text": "tea"})

    everything = store.search_items(["memories", "alice"])
    assert [item["key"] for item in everything["items"]] == ["coffee", "tea"]
    assert all(item["score"] is None for item in everything["items"])

    ranked = store.search_items(["memories"], query="green tea", limit=5)
    # The items sharing a word first, by score; then the rest of the prefix, score 0 (LangGraph lists every item).
    assert [(item["namespace"], item["key"]) for item in ranked["items"]] == [
        (["memories", "alice"], "tea"),
        (["memories", "alicia"], "tea"),
        (["memories", "alice"], "coffee"),
    ]
    assert ranked["items"][0]["score"] >= ranked["items"][1]["score"] > ranked["items"][2]["score"] == 0

    confident = store.search_items(["memories"], filter={"confidence": {"$gte": 0.7}})
    assert [item["key"] for item in confident["items"]] == ["tea"]

    paged = store.search_items(["memories"], limit=1, offset=1)
    assert len(paged["items"]) == 1


def test_the_sdk_client_lists_namespaces(sdk_store, alice):
    store = sdk_store(alice)
    for namespace in (["a", "b", "c"], ["a", "b", "d", "e"], ["a", "c"], ["users", "alice", "preferences"]):
        store.put_item(namespace, key="k", value={"v": 1})
    assert store.list_namespaces(prefix=["a"], max_depth=2)["namespaces"] == [["a", "b"], ["a", "c"]]
    assert store.list_namespaces(suffix=["preferences"])["namespaces"] == [["users", "alice", "preferences"]]
    assert store.list_namespaces(prefix=["a", "*", "d"])["namespaces"] == [["a", "b", "d", "e"]]
    assert store.list_namespaces(limit=2, offset=1)["namespaces"] == [["a", "b", "d", "e"], ["a", "c"]]


def test_the_sdk_client_sets_a_ttl_in_minutes(sdk_store, alice):
    store = sdk_store(alice)
    store.put_item(["scratch"], key="note", value={"text": "temporary"}, ttl=15)
    item = StoreItem.objects.get()
    assert item.ttl_minutes == 15
    assert item.expires_at is not None
    assert store.get_item(["scratch"], key="note", refresh_ttl=False)["value"] == {"text": "temporary"}


def test_the_sdk_client_gets_the_servers_refusals(sdk_store, alice, bob):
    bobs = sdk_store(bob)
    bobs.put_item(["users", "bob"], key="secret", value={"pin": "1234"})
    alices = sdk_store(alice)

    with pytest.raises(httpx.HTTPStatusError) as read:
        alices.get_item(["users", "bob"], key="secret")
    assert read.value.response.status_code == 403

    with pytest.raises(httpx.HTTPStatusError) as write:
        alices.put_item(["users", "bob"], key="secret", value={"pin": "0000"})
    assert write.value.response.status_code == 403
    assert StoreItem.objects.get().value == {"pin": "1234"}

    with pytest.raises(httpx.HTTPStatusError) as reserved:
        alices.put_item(["langgraph", "x"], key="k", value={})
    assert reserved.value.response.status_code == 400
    assert "namespace" in reserved.value.response.json()["errors"]

    assert alices.search_items(["users"])["items"] == []
