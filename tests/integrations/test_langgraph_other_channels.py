"""A LangGraph thread whose messages are not in a channel named `messages` — a state's own
`chat_history`, the functional API's saved value — through `MemoryAdminSaver` against the live
server: the graph runs as with LangGraph's own saver, its messages are the thread's
conversation, and later steps go as deltas of that channel (docs/checkpoints.md, "Conversation")."""

from __future__ import annotations

import io
from typing import Annotated, TypedDict

import pytest
from django.core.management import call_command
from django.test import Client
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.func import entrypoint, task
from langgraph.graph import add_messages

from sessions_app.checkpoints.models import Checkpoint

from .test_langgraph_conversation import _api
from . import test_langgraph_odd_messages as odd
from .test_langgraph_odd_messages import build, history

pytestmark = pytest.mark.django_db(transaction=True)

recording = odd.recording  # the fixture: the saver against the live server, recording what it puts


class Chat(TypedDict, total=False):
    chat_history: Annotated[list, add_messages]
    turns: int


def answer(state: Chat) -> dict:
    last = state["chat_history"][-1]
    if last.content == "forget":
        return {"chat_history": [RemoveMessage(id=m.id) for m in state["chat_history"][:-1]], "turns": 0}
    return {"chat_history": [AIMessage(f"you said {last.content}", id=f"a-{last.id}")], "turns": state.get("turns", 0) + 1}


def listed(alice, thread_id: str) -> list[tuple[str, str]]:
    rows = _api(alice).get(f"/api/v1/threads/{thread_id}/messages").json()["results"]
    return [(m["role"], m["content"]) for m in rows]


def test_a_state_s_own_message_channel_is_the_conversation(recording, alice):
    ours, theirs = build(recording.saver, Chat, answer), build(InMemorySaver(), Chat, answer)
    config = {"configurable": {"thread_id": "chat-history-1"}}
    for graph in (ours, theirs):
        for i, text in enumerate(("hello", "a heat pump question", "thanks")):
            graph.invoke({"chat_history": [HumanMessage(text, id=f"h-{i}")]}, config, durability="sync")
    assert ours.get_state(config).values == theirs.get_state(config).values
    assert history(ours, config) == history(theirs, config)
    recording.assert_every_checkpoint_reads_back("chat-history-1")

    # The later steps went as deltas of that channel, and the thread is its conversation.
    assert recording.bodies[-1]["messages"]["channel"] == "chat_history"
    assert "chat_history" not in recording.bodies[-1]["checkpoint"]["channel_values"]
    assert listed(alice, "chat-history-1") == [
        ("user", "hello"), ("assistant", "you said hello"),
        ("user", "a heat pump question"), ("assistant", "you said a heat pump question"),
        ("user", "thanks"), ("assistant", "you said thanks"),
    ]
    detail = _api(alice).get("/api/v1/threads/chat-history-1").json()
    assert (detail["title"], detail["agent_code"]) == ("hello", "langgraph")
    page = Client()
    page.force_login(alice)
    assert "you said a heat pump question" in page.get("/threads/chat-history-1/").content.decode()

    # Removing messages archives them, as for a `messages` channel.
    for graph in (ours, theirs):
        graph.invoke({"chat_history": [HumanMessage("forget", id="h-forget")]}, config, durability="sync")
    assert ours.get_state(config).values == theirs.get_state(config).values
    assert listed(alice, "chat-history-1") == [("user", "forget")]
    archived = _api(alice).get("/api/v1/threads/chat-history-1/messages?archived=true").json()["results"]
    assert ("assistant", "you said thanks") in [(m["role"], m["content"]) for m in archived]
    recording.assert_every_checkpoint_reads_back("chat-history-1")
    out = io.StringIO()
    call_command("verify", stdout=out)
    assert "0 problem(s)" in out.getvalue()


def functional_chat(saver):
    @task
    def reply(messages: list) -> AIMessage:
        return AIMessage(f"echo {messages[-1].content}", id=f"echo-{len(messages)}")

    @entrypoint(checkpointer=saver)
    def chat(message: HumanMessage, *, previous: list | None = None):
        messages = add_messages(previous or [], [message])
        said = reply(messages).result()
        return entrypoint.final(value=said.content, save=add_messages(messages, [said]))

    return chat


def test_the_functional_api_s_saved_messages_are_the_conversation(recording, alice):
    ours, theirs = functional_chat(recording.saver), functional_chat(InMemorySaver())
    config = {"configurable": {"thread_id": "functional-1"}}
    for chat in (ours, theirs):
        assert chat.invoke(HumanMessage("first", id="f-1"), config) == "echo first"
        assert chat.invoke(HumanMessage("second", id="f-2"), config) == "echo second"
    assert ours.get_state(config).values == theirs.get_state(config).values
    assert [s.values for s in ours.get_state_history(config)] == [s.values for s in theirs.get_state_history(config)]
    recording.assert_every_checkpoint_reads_back("functional-1")
    assert listed(alice, "functional-1") == [
        ("user", "first"), ("assistant", "echo first"), ("user", "second"), ("assistant", "echo second"),
    ]
    refs = Checkpoint.objects.filter(thread__thread_id="functional-1", messages_ref__isnull=False)
    assert {ref["channel"] for ref in refs.values_list("messages_ref", flat=True)} == {"__previous__"}


def test_a_server_configured_for_another_channel_still_reads_back_every_checkpoint(recording, alice, settings):
    """The saver guesses `messages`; the server keeps `chat_history` as configured: puts go whole
    until a read tells the saver which channel the server holds, then as deltas of it."""
    settings.MEMORYADMIN_LANGGRAPH_MESSAGES_CHANNEL = "chat_history"

    class Both(TypedDict, total=False):
        messages: Annotated[list, add_messages]
        chat_history: Annotated[list, add_messages]

    def both(state: Both) -> dict:
        n = len(state["chat_history"])
        return {"messages": [AIMessage(f"side {n}", id=f"s-{n}")], "chat_history": [AIMessage(f"main {n}", id=f"m-{n}")]}

    ours, theirs = build(recording.saver, Both, both), build(InMemorySaver(), Both, both)
    config = {"configurable": {"thread_id": "configured-1"}}
    for graph in (ours, theirs):
        for i in range(3):
            graph.invoke({"chat_history": [HumanMessage(f"q{i}", id=f"q-{i}")]}, config, durability="sync")
    assert ours.get_state(config).values == theirs.get_state(config).values
    recording.assert_every_checkpoint_reads_back("configured-1")
    assert listed(alice, "configured-1")[:2] == [("user", "q0"), ("assistant", "main 1")]
    assert recording.bodies[-1]["messages"]["channel"] == "chat_history"


def test_a_delta_s_channel_must_be_a_name(alice):
    api = _api(alice)
    body = {
        "checkpoint": {"v": 4, "id": "c-1", "ts": "2026-01-01T00:00:00+00:00", "channel_values": {},
                       "channel_versions": {}, "versions_seen": {}},
        "messages": {"head": "", "append": [], "channel": ["chat"]},
    }
    for channel in (["chat"], "", "x" * 256, 7):
        body["messages"]["channel"] = channel
        response = api.post("/api/v1/threads/bad-channel/checkpoints", body, format="json")
        assert response.status_code == 400, channel
        assert "messages.channel" in response.json()["errors"]
    assert not Checkpoint.objects.filter(thread__thread_id="bad-channel").exists()
