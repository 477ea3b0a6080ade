"""Messages that JSON text in PostgreSQL cannot hold as they are, through `MemoryAdminSaver`
against the live server: the graph runs as it does with LangGraph's own saver, the thread's
conversation keeps them, and every checkpoint reads back as put."""

from __future__ import annotations

import io
import operator
from typing import Annotated, Any, TypedDict

import pytest
from django.core.management import call_command
from django.test import Client
from langchain_core.documents import Document
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph, add_messages

from memoryadmin.apikeys import apikey_create

from .test_langgraph_conversation import Recording, _api
from .test_saver_graph import live_saver

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def recording(live_server, alice):
    saver = live_saver(live_server.url, apikey_create(owner=alice).plaintext)
    yield Recording(saver)
    saver.close()


class State(TypedDict, total=False):
    messages: Annotated[list, add_messages]


def replies(state: State) -> dict:
    turn = len(state["messages"])
    return {
        "messages": [
            AIMessage(f"read {turn}: a nul \x00 from the file", id=f"nul-{turn}", additional_kwargs={"raw": b"\x00\x01"}),
            AIMessage(f"cut {turn}: a broken emoji \ud83d", id=f"cut-{turn}"),
        ]
    }


def build(saver, state=State, node=replies):
    """A one-node graph: `node` runs once per invoke."""
    graph = StateGraph(state)
    graph.add_node("node", node)
    graph.add_edge(START, "node")
    graph.add_edge("node", END)
    return graph.compile(checkpointer=saver)


def history(graph, config) -> list[Any]:
    return [(snapshot.values, snapshot.next, snapshot.metadata["step"]) for snapshot in graph.get_state_history(config)]


def test_a_nul_and_a_lone_surrogate_in_messages_run_as_with_langgraph_s_own_saver(recording, alice):
    ours, theirs = build(recording.saver), build(InMemorySaver())
    config = {"configurable": {"thread_id": "odd-1"}}
    for graph in (ours, theirs):
        for text in ("Read the file", "Again"):
            graph.invoke({"messages": [HumanMessage(text, id=f"h-{text}")]}, config, durability="sync")
    # The surrogate reads back as "?" from both (LangGraph's serializer writes it so); the rest exactly.
    assert ours.get_state(config).values == theirs.get_state(config).values
    assert history(ours, config) == history(theirs, config)
    assert ours.get_state(config).values["messages"][1].content == "read 1: a nul \x00 from the file"
    assert ours.get_state(config).values["messages"][1].additional_kwargs == {"raw": b"\x00\x01"}

    # The second turn went as a delta: the odd messages are the conversation's, not a channel apart.
    assert "messages" in recording.bodies[-1]
    api = _api(alice)
    listed = api.get("/api/v1/threads/odd-1/messages").json()["results"]
    assert [(m["role"], m["content"]) for m in listed] == [
        ("user", "Read the file"),
        ("assistant", "read 1: a nul \ufffd from the file"),
        ("assistant", "cut 1: a broken emoji ?"),
        ("user", "Again"),
        ("assistant", "read 4: a nul \ufffd from the file"),
        ("assistant", "cut 4: a broken emoji ?"),
    ]
    page = Client()
    page.force_login(alice)
    assert "read 4: a nul \ufffd from the file" in page.get("/threads/odd-1/").content.decode()
    out = io.StringIO()
    call_command("verify", stdout=out)
    assert "0 problem(s)" in out.getvalue()


class Listed(TypedDict, total=False):
    messages: Annotated[list, operator.add]


def test_a_channel_that_stops_holding_only_messages_goes_whole(recording, alice):
    """A reducer of its own puts something other than a message in the messages channel: the
    step is sent whole, the channel then a plain value, and the graph runs on."""

    def step(state: Listed) -> dict:
        if len(state["messages"]) == 1:
            return {"messages": [AIMessage("first answer", id="a-1")]}
        if len(state["messages"]) == 3:
            return {"messages": [Document(page_content="a LangChain object, not a message")]}
        return {"messages": [{"note": "a dict"}, ["a", "list"]]}

    ours, theirs = build(recording.saver, Listed, step), build(InMemorySaver(), Listed, step)
    config = {"configurable": {"thread_id": "odd-2"}}
    for graph in (ours, theirs):
        graph.invoke({"messages": [HumanMessage("hi", id="h-1")]}, config, durability="sync")
        graph.invoke({"messages": [HumanMessage("more", id="h-2")]}, config, durability="sync")
        graph.invoke({"messages": [HumanMessage("again", id="h-3")]}, config, durability="sync")
    assert ours.get_state(config).values == theirs.get_state(config).values
    assert history(ours, config) == history(theirs, config)
    recording.assert_every_checkpoint_reads_back("odd-2")
