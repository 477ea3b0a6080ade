"""LangGraph's thread API: the official `langgraph-sdk` client reads and writes memoryadmin's threads."""

from __future__ import annotations

import operator
from typing import Annotated, TypedDict

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command, interrupt
from langgraph_sdk import get_sync_client
from langgraph_sdk.errors import ConflictError, NotFoundError, PermissionDeniedError

from memoryadmin.apikeys import apikey_create
from sessions_app.checkpoints import services as svc
from sessions_app.models import Thread

from ..integrations.test_saver_graph import live_saver
from sessions_app.checkpoints import lifecycle


class State(TypedDict, total=False):
    messages: Annotated[list, add_messages]
    steps: Annotated[list[str], operator.add]


def answer(state: State) -> dict:
    return {"messages": [AIMessage("Let me check with a human.", id="ai-1")], "steps": ["answer"]}


def review(state: State) -> dict:
    verdict = interrupt({"question": "Send it?"})
    return {"messages": [AIMessage(f"Reviewed: {verdict}", id="ai-2")], "steps": ["review"]}


def graph_with(saver):
    builder = StateGraph(State)
    builder.add_node("answer", answer)
    builder.add_node("review", review)
    builder.add_edge(START, "answer")
    builder.add_edge("answer", "review")
    builder.add_edge("review", END)
    return builder.compile(checkpointer=saver)


@pytest.fixture
def sdk(live_server, alice):
    key = apikey_create(owner=alice).plaintext
    client = get_sync_client(url=f"{live_server.url}/api/v1", api_key=key)
    saver = live_saver(live_server.url, key)
    yield client, saver
    client.http.client.close()
    saver.close()


@pytest.mark.django_db(transaction=True)
def test_the_sdk_creates_gets_updates_searches_and_deletes_threads(sdk, live_server, bob):
    client, _ = sdk
    made = client.threads.create(metadata={"graph_id": "support"})
    thread_id = made["thread_id"]
    assert len(thread_id) == 36 and made["metadata"] == {"graph_id": "support"} and made["status"] == "idle"
    assert Thread.objects.get(thread_id=thread_id).owner.username == "alice"

    named = client.threads.create(thread_id="named-thread", metadata={"graph_id": "other"})
    assert named["thread_id"] == "named-thread"
    with pytest.raises(ConflictError):
        client.threads.create(thread_id="named-thread")
    assert client.threads.create(thread_id="named-thread", if_exists="do_nothing")["metadata"] == {"graph_id": "other"}

    got = client.threads.get(thread_id)
    assert got["thread_id"] == thread_id and got["values"] == {} and got["checkpoints"] == 0

    updated = client.threads.update(thread_id, metadata={"customer": "c-7"})
    assert updated["metadata"] == {"graph_id": "support", "customer": "c-7"}
    assert client.threads.update(thread_id, metadata={"tier": 2}, return_minimal=True) is None

    found = client.threads.search(metadata={"graph_id": "support"})
    assert [t["thread_id"] for t in found] == [thread_id]
    assert {t["thread_id"] for t in client.threads.search(limit=10)} == {thread_id, "named-thread"}
    assert len(client.threads.search(limit=1, offset=1)) == 1
    assert [t["thread_id"] for t in client.threads.search(ids=["named-thread"])] == ["named-thread"]
    ordered = client.threads.search(sort_by="thread_id", sort_order="asc")
    assert [t["thread_id"] for t in ordered] == sorted([thread_id, "named-thread"])

    bobs = get_sync_client(url=f"{live_server.url}/api/v1", api_key=apikey_create(owner=bob).plaintext)
    with pytest.raises(PermissionDeniedError):
        bobs.threads.get(thread_id)
    with pytest.raises(PermissionDeniedError):
        bobs.threads.update(thread_id, metadata={"stolen": True})
    assert bobs.threads.search() == []

    client.threads.delete(thread_id)
    with pytest.raises(NotFoundError):
        client.threads.get(thread_id)
    bobs.http.client.close()


@pytest.mark.django_db(transaction=True)
def test_the_sdk_reads_the_state_and_history_a_graph_left(sdk):
    client, saver = sdk
    thread_id = client.threads.create(metadata={"graph_id": "review-bot"})["thread_id"]
    graph = graph_with(saver)
    config = {"configurable": {"thread_id": thread_id}}
    graph.invoke({"messages": [HumanMessage("Can I get a refund?", id="h-1")]}, config)

    state = client.threads.get_state(thread_id)
    assert state["next"] == ["review"]
    assert [(m["type"], m["content"]) for m in state["values"]["messages"]] == [("human", "Can I get a refund?"), ("ai", "Let me check with a human.")]
    assert state["values"]["steps"] == ["answer"]
    assert state["interrupts"][0]["value"] == {"question": "Send it?"}
    assert state["tasks"][0]["name"] == "review" and state["tasks"][0]["interrupts"] == state["interrupts"]
    assert state["metadata"]["step"] == 1 and state["checkpoint"]["thread_id"] == thread_id

    thread = client.threads.get(thread_id)
    assert thread["status"] == "interrupted" and thread["values"]["steps"] == ["answer"]
    assert [t["thread_id"] for t in client.threads.search(status="interrupted")] == [thread_id]

    history = client.threads.get_history(thread_id, limit=10)
    assert [h["metadata"]["step"] for h in history] == [1, 0, -1]
    assert [h["next"] for h in history] == [["review"], ["answer"], ["__start__"]]
    older = client.threads.get_history(thread_id, limit=1, before=history[0]["checkpoint"])
    assert [h["metadata"]["step"] for h in older] == [0]
    assert [h["metadata"]["source"] for h in client.threads.get_history(thread_id, metadata={"source": "input"})] == ["input"]

    at = client.threads.get_state(thread_id, checkpoint_id=history[1]["checkpoint"]["checkpoint_id"])
    assert at["next"] == ["answer"]
    at = client.threads.get_state(thread_id, checkpoint=history[2]["checkpoint"])
    assert at["metadata"]["source"] == "input"

    graph.invoke(Command(resume="yes"), config)
    done = client.threads.get_state(thread_id)
    assert done["next"] == [] and done["values"]["messages"][-1]["content"] == "Reviewed: yes"
    assert client.threads.get(thread_id)["status"] == "idle"
    assert client.threads.search(status="interrupted") == []


@pytest.mark.django_db
def test_a_thread_without_checkpoints_has_an_empty_state(alice_api, alice):
    lifecycle.thread_create(actor=alice, thread_id="empty")
    state = alice_api.get("/api/v1/threads/empty/state").json()
    assert state["values"] == {} and state["next"] == [] and state["checkpoint"]["checkpoint_id"] is None
    assert alice_api.post("/api/v1/threads/empty/history", {}, format="json").json() == []
    assert alice_api.get("/api/v1/threads/empty/state/nope").status_code == 404


@pytest.mark.django_db
def test_errors_come_back_as_the_langgraph_server_would(alice_api, alice):
    assert alice_api.get("/api/v1/threads/nope/state").status_code == 404
    bad = alice_api.post("/api/v1/threads", {"thread_id": "bad id"}, format="json")
    assert bad.status_code == 400 and "thread_id" in bad.json()["errors"]
    for body, field in [
        ({"if_exists": "overwrite"}, "if_exists"),
        ({"metadata": "x"}, "metadata"),
        ({"ttl": {"ttl": 5}}, "ttl"),
        ({"supersteps": [{"updates": []}]}, "supersteps"),
    ]:
        response = alice_api.post("/api/v1/threads", body, format="json")
        assert response.status_code == 400 and field in response.json()["errors"]
    for body, field in [
        ({"status": "sleeping"}, "status"),
        ({"sort_by": "owner"}, "sort_by"),
        ({"sort_order": "up"}, "sort_order"),
        ({"limit": 0}, "limit"),
        ({"offset": -1}, "offset"),
        ({"values": {"a": 1}}, "values"),
        ({"metadata": [1]}, "metadata"),
        ({"ids": "x"}, "ids"),
    ]:
        response = alice_api.post("/api/v1/threads/search", body, format="json")
        assert response.status_code == 400 and field in response.json()["errors"], body
    assert Thread.objects.count() == 0
    lifecycle.thread_create(actor=alice, thread_id="t1")
    patch = alice_api.patch("/api/v1/threads/t1", {"metadata": None}, format="json")
    assert patch.status_code == 400 and "metadata" in patch.json()["errors"]
    history = alice_api.post("/api/v1/threads/t1/history", {"before": 5}, format="json")
    assert history.status_code == 400 and "before" in history.json()["errors"]


@pytest.mark.django_db
def test_search_costs_the_same_queries_for_few_and_many_threads(alice, alice_api, django_assert_num_queries):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def make(count, start):
        for n in range(start, start + count):
            data = svc.checkpoint_input(checkpoint={"channel_values": {"n": n}}, metadata={})
            svc.checkpoint_put(actor=alice, thread_id=f"t{n}", checkpoint_id="c", data=data)

    make(3, 0)
    alice_api.post("/api/v1/threads/search", {"limit": 100}, format="json")
    with CaptureQueriesContext(connection) as few:
        assert len(alice_api.post("/api/v1/threads/search", {"limit": 100}, format="json").json()) == 3
    make(30, 3)
    with django_assert_num_queries(len(few)):
        assert len(alice_api.post("/api/v1/threads/search", {"limit": 100}, format="json").json()) == 33


@pytest.mark.django_db(transaction=True)
def test_the_sdk_counts_threads_with_search_filters(sdk, bob):
    client, saver = sdk
    assert client.threads.count() == 0
    client.threads.create(thread_id="a", metadata={"graph_id": "support", "tier": 1})
    client.threads.create(thread_id="b", metadata={"graph_id": "support", "tier": 2})
    client.threads.create(thread_id="count", metadata={"graph_id": "other"})
    graph_with(saver).invoke({"messages": [HumanMessage("refund?", id="h-1")]}, {"configurable": {"thread_id": "b"}})
    lifecycle.thread_create(actor=bob, thread_id="bobs", metadata={"graph_id": "support"})

    assert client.threads.count() == 3
    assert client.threads.count(metadata={"graph_id": "support"}) == 2
    assert client.threads.count(metadata={"graph_id": "support", "tier": 2}) == 1
    assert client.threads.count(status="interrupted") == 1 and client.threads.count(status="idle") == 2
    assert client.threads.count(metadata={"graph_id": "support"}, status="idle") == 1
    assert client.threads.count(status="interrupted") == len(client.threads.search(status="interrupted"))
    # The count route does not take the thread named "count" away.
    assert client.threads.get("count")["metadata"] == {"graph_id": "other"}
    assert client.threads.update("count", metadata={"x": 1})["metadata"] == {"graph_id": "other", "x": 1}
    client.threads.delete("count")
    assert client.threads.count() == 2


@pytest.mark.django_db
def test_count_refuses_what_it_cannot_filter(alice_api):
    for body, field in [({"values": {"a": 1}}, "values"), ({"status": "sleeping"}, "status"), ({"metadata": [1]}, "metadata")]:
        response = alice_api.post("/api/v1/threads/count", body, format="json")
        assert response.status_code == 400 and field in response.json()["errors"], body
    assert alice_api.post("/api/v1/threads/count", {}, format="json").json() == 0


@pytest.mark.django_db(transaction=True)
def test_history_takes_before_as_a_runnable_config_and_states_carry_the_checkpoint_ts(sdk):
    client, saver = sdk
    graph = graph_with(saver)
    config = {"configurable": {"thread_id": "hist"}}
    graph.invoke({"messages": [HumanMessage("refund?", id="h-1")]}, config)
    history = client.threads.get_history("hist")
    newest = history[0]["checkpoint"]
    as_runnable = {"configurable": {"thread_id": "hist", "checkpoint_ns": "", "checkpoint_id": newest["checkpoint_id"]}}
    assert [h["metadata"]["step"] for h in client.threads.get_history("hist", before=as_runnable)] == [0, -1]
    assert [h["metadata"]["step"] for h in client.threads.get_history("hist", before=newest["checkpoint_id"])] == [0, -1]
    local = list(graph.get_state_history(config))
    assert [h["created_at"] for h in history] == [snapshot.created_at for snapshot in local]
    assert client.threads.get_state("hist")["created_at"] == graph.get_state(config).created_at
