"""`MemoryAdminStore` as the long-term store of a real LangGraph graph, against a live server.

The graph is a long-term memory pattern: one node remembers a stable preference,
the next recalls preferences by text search and by key, all through
`graph.compile(store=MemoryAdminStore(...))`.
"""

from __future__ import annotations

import asyncio
import operator
import threading
from typing import Annotated, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore, GetOp, ListNamespacesOp, MatchCondition, PutOp, SearchOp

from memoryadmin.apikeys import apikey_create
from memoryadmin_client.langgraph import MemoryAdminStore, StoreForbiddenError, StoreInvalidError
from store_app.models import StoreItem

pytestmark = pytest.mark.django_db(transaction=True)


class TripState(TypedDict):
    user_id: str
    fact: str
    recalled: Annotated[list[str], operator.add]


def remember(state: TripState, *, store: BaseStore) -> dict:
    namespace = ("travel_assistant", state["user_id"], "preferences")
    store.put(namespace, "walking", {"text": state["fact"], "confidence": 0.9}, ttl=60 * 24)
    store.put(namespace, "budget", {"text": "mid-range hotels", "confidence": 0.5})
    return {}


def recall(state: TripState, *, store: BaseStore) -> dict:
    namespace = ("travel_assistant", state["user_id"], "preferences")
    # Exact words: SQLite does not stem (PostgreSQL would also match "walk").
    found = [item for item in store.search(namespace, query="walks", limit=5) if item.score]
    confident = store.search(namespace, filter={"confidence": {"$gte": 0.7}})
    direct = store.get(namespace, "walking")
    return {
        "recalled": [item.value["text"] for item in found]
        + [f"confident:{item.key}" for item in confident]
        + [f"get:{direct.value['text']}"]
    }


async def aremember(state: TripState, *, store: BaseStore) -> dict:
    namespace = ("travel_assistant", state["user_id"], "preferences")
    await store.aput(namespace, "walking", {"text": state["fact"], "confidence": 0.9})
    await store.aput(namespace, "budget", {"text": "mid-range hotels", "confidence": 0.5})
    return {}


async def arecall(state: TripState, *, store: BaseStore) -> dict:
    namespace = ("travel_assistant", state["user_id"], "preferences")
    found = [item for item in await store.asearch(namespace, query="walks", limit=5) if item.score]
    direct = await store.aget(namespace, "walking")
    return {"recalled": [item.value["text"] for item in found] + [f"get:{direct.value['text']}"]}


def build_graph(store: MemoryAdminStore, *, asynchronous: bool = False):
    builder = StateGraph(TripState)
    builder.add_node("remember", aremember if asynchronous else remember)
    builder.add_node("recall", arecall if asynchronous else recall)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", "recall")
    builder.add_edge("recall", END)
    return builder.compile(store=store)


def run_in_new_loop(coroutine_function):
    """asyncio.run in a thread of its own: the test's thread may already hold a loop
    (Playwright's sync API keeps one while a browser runs in the session)."""
    outcome: dict = {}

    def target():
        try:
            outcome["value"] = asyncio.run(coroutine_function())
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test's thread
            outcome["error"] = exc

    thread = threading.Thread(target=target)
    thread.start()
    thread.join(timeout=60)
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


@pytest.fixture
def alice_store(live_server, alice):
    store = MemoryAdminStore(live_server.url, apikey_create(owner=alice).plaintext)
    yield store
    store.close()


def test_a_graph_node_writes_and_reads_memories_through_the_store(alice_store):
    graph = build_graph(alice_store)
    result = graph.invoke({"user_id": "u_123", "fact": "avoid long walks", "recalled": []})
    assert result["recalled"] == ["avoid long walks", "confident:walking", "get:avoid long walks"]
    item = StoreItem.objects.get(namespace_path="travel_assistant.u_123.preferences", key="walking")
    assert item.owner.username == "alice"
    assert item.ttl_minutes == 60 * 24
    assert alice_store.list_namespaces(prefix=("travel_assistant",)) == [("travel_assistant", "u_123", "preferences")]


def test_a_graph_runs_the_store_asynchronously(alice_store):
    graph = build_graph(alice_store, asynchronous=True)

    async def run():
        result = await graph.ainvoke({"user_id": "u_456", "fact": "no walks after dinner", "recalled": []})
        namespaces = await alice_store.alist_namespaces(max_depth=2)
        await alice_store.adelete(("travel_assistant", "u_456", "preferences"), "budget")
        remaining = await alice_store.asearch(("travel_assistant", "u_456"))
        await alice_store.aclose()
        return result, namespaces, remaining

    result, namespaces, remaining = run_in_new_loop(run)
    assert result["recalled"] == ["no walks after dinner", "get:no walks after dinner"]
    assert namespaces == [("travel_assistant", "u_456")]
    assert [item.key for item in remaining] == ["walking"]


def test_a_batch_reads_before_its_writes_and_keeps_the_last_put_of_a_key(alice_store):
    """LangGraph's batch semantics (InMemoryStore, PostgresStore): one request, reads first, last put wins."""
    namespace = ("memories", "alice")
    alice_store.put(namespace, "old", {"text": "there before", "n": 5})
    ops = [
        PutOp(namespace, "a", {"text": "first"}),
        GetOp(namespace, "a"),
        PutOp(namespace, "a", None),
        GetOp(namespace, "old"),
        PutOp(namespace, "b", {"text": "second", "n": 2}),
        SearchOp(("memories",), filter={"n": {"$gt": 1}}),
        ListNamespacesOp(match_conditions=(MatchCondition("suffix", ("alice",)),)),
        PutOp(namespace, "old", {"text": "rewritten", "n": 6}),
    ]
    results = alice_store.batch(ops)
    assert results[0] is None and results[2] is None and results[4] is None and results[7] is None
    assert results[1] is None  # "a" did not exist before the batch
    assert results[3].value == {"text": "there before", "n": 5}
    assert [item.key for item in results[5]] == ["old"] and results[5][0].score is None
    assert results[6] == [namespace]
    # The writes: "a" was put then deleted (the delete, last, is what was applied); "b" and the rewrite landed.
    assert alice_store.get(namespace, "a") is None
    assert alice_store.get(namespace, "b").value == {"text": "second", "n": 2}
    assert alice_store.get(namespace, "old").value == {"text": "rewritten", "n": 6}


def test_items_come_back_as_langgraph_items(alice_store):
    alice_store.put(("docs",), "report", {"memory": "Will likes ai"})
    item = alice_store.get(("docs",), "report")
    assert item.namespace == ("docs",)
    assert item.created_at.tzinfo is not None
    assert item.created_at == item.updated_at
    ranked = alice_store.search(("docs",), query="ai")
    assert ranked[0].score and ranked[0].score > 0


def test_the_store_raises_the_servers_refusals(live_server, alice_store, bob):
    bobs = MemoryAdminStore(live_server.url, apikey_create(owner=bob).plaintext)
    try:
        bobs.put(("users", "bob"), "pin", {"pin": "1234"})
        with pytest.raises(StoreForbiddenError) as caught:
            alice_store.put(("users", "bob"), "pin", {"pin": "0000"})
        assert caught.value.status_code == 403
        with pytest.raises(StoreForbiddenError):
            alice_store.get(("users", "bob"), "pin")
        with pytest.raises(StoreInvalidError) as invalid:
            alice_store.batch([SearchOp(("users",), filter={"pin": {"$regex": "1"}})])
        assert "filter" in invalid.value.errors
        assert StoreItem.objects.get().value == {"pin": "1234"}
    finally:
        bobs.close()


def test_bad_namespaces_are_refused_before_anything_is_sent(alice_store):
    with pytest.raises(ValueError):
        alice_store.batch([PutOp(("ok",), "k", {"v": 1}), PutOp(("bad.label",), "k", {"v": 1})])
    assert not StoreItem.objects.exists()


def test_a_nan_in_a_batch_is_refused_naming_its_field_before_anything_is_sent(alice_store):
    # The request's body is made strict JSON once for all its operations; the one at fault is named.
    with pytest.raises(StoreInvalidError) as refused:
        alice_store.batch([PutOp(("ok",), "k1", {"v": 1}), PutOp(("ok",), "k2", {"v": float("nan")})])
    assert "value" in refused.value.errors
    with pytest.raises(StoreInvalidError) as refused:
        alice_store.batch([PutOp(("ok",), "k1", {"v": 1}), SearchOp(("ok",), filter={"v": {"$gt": float("inf")}})])
    assert "filter" in refused.value.errors
    with pytest.raises(StoreInvalidError) as refused:
        # A NaN before an operation the client cannot send is the error, in the operations' order.
        two_prefixes = (MatchCondition("prefix", ("a",)), MatchCondition("prefix", ("b",)))
        alice_store.batch([PutOp(("ok",), "k1", {"v": float("nan")}), ListNamespacesOp(match_conditions=two_prefixes)])
    assert "value" in refused.value.errors
    assert not StoreItem.objects.exists()


def test_concurrent_async_calls_with_a_nan_fail_alone(alice_store):
    async def calls():
        return await asyncio.gather(
            alice_store.aput(("ok",), "good", {"v": 1}),
            alice_store.aput(("ok",), "bad", {"v": float("-inf")}),
            alice_store.asearch(("ok",), filter={"v": float("nan")}),
            alice_store.aput(("ok",), "fine", {"v": 2}),
            return_exceptions=True,
        )

    answers = run_in_new_loop(calls)
    assert answers[0] is None and answers[3] is None
    assert isinstance(answers[1], StoreInvalidError) and "value" in answers[1].errors
    assert isinstance(answers[2], StoreInvalidError) and "filter" in answers[2].errors
    assert dict(StoreItem.objects.values_list("key", "value")) == {"good": {"v": 1}, "fine": {"v": 2}}
