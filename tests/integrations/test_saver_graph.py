"""A real LangGraph graph checkpointed in memoryadmin: it runs, is interrupted, and resumes."""

from __future__ import annotations

import asyncio
import operator
from typing import Annotated, TypedDict

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command, interrupt

from memoryadmin.apikeys import apikey_create
from memoryadmin_client.langgraph import MemoryAdminForbidden, MemoryAdminSaver
from sessions_app.checkpoints.conversation import checkpoints_hydrate
from sessions_app.checkpoints.wire import BLOB_KEY, message_list
from sessions_app.models import Checkpoint, CheckpointWrite

pytestmark = pytest.mark.django_db(transaction=True)


def live_saver(url: str, key: str) -> MemoryAdminSaver:
    """A MemoryAdminSaver for the live test server."""
    return MemoryAdminSaver(url, key)


class State(TypedDict, total=False):
    messages: Annotated[list, add_messages]
    raw: bytes
    visited: Annotated[list[str], operator.add]
    approved: bool


def agent(state: State) -> dict:
    return {
        "messages": [AIMessage("Let me compute that.", id="ai-1", tool_calls=[{"name": "multiply", "args": {"a": 6, "b": 7}, "id": "call-1"}])],
        "visited": ["agent"],
    }


def tools(state: State) -> dict:
    # Bytes cannot be JSON: this channel must travel as a typed blob and come back exactly.
    return {"messages": [ToolMessage("42", tool_call_id="call-1", id="tool-1")], "raw": b"\x00\x01\xffbinary", "visited": ["tools"]}


def review(state: State) -> dict:
    answer = interrupt({"question": "Send 42 to the user?"})
    return {"approved": answer == "yes", "messages": [AIMessage("6 x 7 = 42", id="ai-2")], "visited": ["review"]}


def build():
    builder = StateGraph(State)
    builder.add_node("agent", agent)
    builder.add_node("tools", tools)
    builder.add_node("review", review)
    builder.add_edge(START, "agent")
    builder.add_edge("agent", "tools")
    builder.add_edge("tools", "review")
    builder.add_edge("review", END)
    return builder


@pytest.fixture
def alice_key(alice):
    return apikey_create(owner=alice).plaintext


@pytest.fixture
def saver_for(live_server):
    """MemoryAdminSaver factory; the savers are closed after the test, so the server's
    keep-alive threads let go of their database connections."""
    made = []

    def make(key: str) -> MemoryAdminSaver:
        made.append(live_saver(live_server.url, key))
        return made[-1]

    yield make
    for saver in made:
        saver.close()


def test_a_graph_is_interrupted_then_resumed_from_memoryadmin(saver_for, alice_key):
    graph = build().compile(checkpointer=saver_for(alice_key))
    config = {"configurable": {"thread_id": "graph-run-1"}}

    first = graph.invoke({"messages": [HumanMessage("What is 6 x 7?", id="h-1")]}, config)
    assert first["__interrupt__"][0].value == {"question": "Send 42 to the user?"}

    # A fresh saver (nothing cached in memory) reads the paused state back from the server.
    graph = build().compile(checkpointer=saver_for(alice_key))
    paused = graph.get_state(config)
    assert paused.next == ("review",)
    assert paused.tasks[0].interrupts[0].value == {"question": "Send 42 to the user?"}
    assert paused.values["raw"] == b"\x00\x01\xffbinary"
    assert [m.id for m in paused.values["messages"]] == ["h-1", "ai-1", "tool-1"]
    assert paused.values["messages"][1].tool_calls[0]["args"] == {"a": 6, "b": 7}

    final = graph.invoke(Command(resume="yes"), config)
    assert final["approved"] is True
    assert [m.content for m in final["messages"]] == ["What is 6 x 7?", "Let me compute that.", "42", "6 x 7 = 42"]
    assert final["visited"] == ["agent", "tools", "review"]
    assert graph.get_state(config).next == ()

    history = list(graph.get_state_history(config))
    assert [h.metadata["step"] for h in history] == [3, 2, 1, 0, -1]
    assert [h.next for h in history] == [(), ("review",), ("tools",), ("agent",), ("__start__",)]


def test_checkpoints_are_stored_readable_and_know_their_nodes(saver_for, alice_key):
    graph = build().compile(checkpointer=saver_for(alice_key))
    config = {"configurable": {"thread_id": "graph-run-2"}}
    graph.invoke({"messages": [HumanMessage("What is 6 x 7?", id="h-1")]}, config)

    rows = list(Checkpoint.objects.filter(thread__thread_id="graph-run-2").order_by("id"))
    assert [(row.node_id, row.next_node_id) for row in rows] == [
        ("__input__", "__start__"),
        ("__start__", "agent"),
        ("agent", "tools"),
        ("tools", "review"),
    ]
    paused = rows[-1]
    # The messages channel is the thread's blocks, held by reference, not copied into the row.
    assert "messages" not in paused.checkpoint["channel_values"]
    assert paused.messages_ref["count"] == 3
    values = checkpoints_hydrate([paused])[0].checkpoint["channel_values"]
    # Messages are LangChain's JSON, readable without the client; bytes are a typed blob.
    assert [(m.role, m.content) for m in message_list(values["messages"])] == [
        ("user", "What is 6 x 7?"),
        ("assistant", "Let me compute that."),
        ("tool", "42"),
    ]
    assert set(values["raw"]) == {BLOB_KEY} and values["raw"][BLOB_KEY]["type"] == "bytes"
    assert values["visited"] == ["agent", "tools"]
    interrupt_write = CheckpointWrite.objects.get(
        thread=paused.thread, checkpoint_id=paused.checkpoint_id, channel="__interrupt__"
    )
    assert interrupt_write.idx == -3
    assert interrupt_write.value[0]["id"][-1] == "Interrupt"
    assert interrupt_write.value[0]["kwargs"]["value"] == {"question": "Send 42 to the user?"}


def test_the_async_api_runs_the_same_graph(saver_for, alice_key):
    async def run():
        saver = saver_for(alice_key)
        graph = build().compile(checkpointer=saver)
        config = {"configurable": {"thread_id": "graph-run-async"}}
        await graph.ainvoke({"messages": [HumanMessage("What is 6 x 7?")]}, config)
        assert (await graph.aget_state(config)).next == ("review",)
        final = await graph.ainvoke(Command(resume="no"), config)
        await saver.aclose()
        return final

    final = asyncio.run(run())
    assert final["approved"] is False and final["messages"][-1].content == "6 x 7 = 42"


def test_a_graph_cannot_write_into_another_users_thread(saver_for, alice_key, bob):
    graph = build().compile(checkpointer=saver_for(alice_key))
    graph.invoke({"messages": [HumanMessage("hi")]}, {"configurable": {"thread_id": "alices-run"}})
    before = Checkpoint.objects.filter(thread__thread_id="alices-run").count()

    bobs_graph = build().compile(checkpointer=saver_for(apikey_create(owner=bob).plaintext))
    with pytest.raises(MemoryAdminForbidden):
        bobs_graph.invoke({"messages": [HumanMessage("hijack")]}, {"configurable": {"thread_id": "alices-run"}})
    assert Checkpoint.objects.filter(thread__thread_id="alices-run").count() == before
