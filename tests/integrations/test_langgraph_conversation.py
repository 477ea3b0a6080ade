"""A LangGraph thread is a conversation: the prebuilt ReAct agent through `MemoryAdminSaver`,
its messages kept as the thread's blocks, its steps sent as deltas, forks read back exactly."""

from __future__ import annotations

import copy
import json
import io
import warnings

import pytest
from django.core.management import call_command
from django.test import Client
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage
from langchain_core.tools import tool

from memoryadmin.apikeys import apikey_create
from sessions_app.models import Block, Checkpoint, Thread

from .test_saver_graph import live_saver

pytestmark = pytest.mark.django_db(transaction=True)

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from langgraph.prebuilt import create_react_agent


class ToolCallingFake(GenericFakeChatModel):
    """langchain_core's fake chat model answering from a script; tools are accepted and ignored."""

    def bind_tools(self, tools, **kwargs):
        return self


@tool
def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


SCRIPT = [
    AIMessage("", id="ai-1", tool_calls=[{"name": "multiply", "args": {"a": 6, "b": 7}, "id": "call-1"}]),
    AIMessage("6 x 7 is 42.", id="ai-2"),
    AIMessage("Lisbon is sunny today, 24 degrees.", id="ai-3"),
    AIMessage("You are welcome.", id="ai-4"),
    AIMessage("Porto is cloudy.", id="ai-5"),
    AIMessage("Faro is windy.", id="ai-6"),
    AIMessage("Braga is rainy.", id="ai-7"),
]


class Recording:
    """Wraps a saver's put: remembers every checkpoint exactly as LangGraph handed it over,
    and which puts went as deltas."""

    def __init__(self, saver):
        self.saver, self.seen, self.bodies = saver, {}, []
        put, send = saver.put, saver.http.send

        def recording_put(config, checkpoint, metadata, new_versions):
            self.seen[checkpoint["id"]] = copy.deepcopy(checkpoint)
            return put(config, checkpoint, metadata, new_versions)

        def recording_send(call):
            if call.method == "POST" and call.path.endswith("/checkpoints"):
                self.bodies.append(json.loads(call.content) if call.content is not None else call.body)
            return send(call)

        saver.put, saver.http.send = recording_put, recording_send

    def assert_every_checkpoint_reads_back(self, thread_id: str) -> None:
        for checkpoint_id, put in self.seen.items():
            found = self.saver.get_tuple({"configurable": {"thread_id": thread_id, "checkpoint_ns": "", "checkpoint_id": checkpoint_id}})
            assert found is not None
            assert found.checkpoint == put, checkpoint_id


def agent(saver):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return create_react_agent(ToolCallingFake(messages=iter(SCRIPT)), [multiply], checkpointer=saver)


@pytest.fixture
def alice_key(alice):
    return apikey_create(owner=alice).plaintext


@pytest.fixture
def recording(live_server, alice_key):
    saver = live_saver(live_server.url, alice_key)
    yield Recording(saver)
    saver.close()


def _api(alice):
    from tests.conftest import api_client_for

    return api_client_for(alice)


def test_a_react_agent_thread_is_its_conversation(recording, alice):
    graph = agent(recording.saver)
    config = {"configurable": {"thread_id": "react-1"}}
    graph.invoke({"messages": [HumanMessage("What is 6 x 7?", id="h-1")]}, config)
    graph.invoke({"messages": [HumanMessage("And the weather in Lisbon?", id="h-2")]}, config)
    graph.invoke({"messages": [HumanMessage("Thanks!", id="h-3")]}, config)

    api = _api(alice)
    detail = api.get("/api/v1/threads/react-1").json()
    assert detail["title"] == "What is 6 x 7?"
    assert detail["agent_code"] == "langgraph"
    assert detail["active_blocks"] == 8 and detail["archived_blocks"] == 0
    listed = api.get("/api/v1/threads/react-1/messages").json()["results"]
    assert [(m["role"], m["content"]) for m in listed] == [
        ("user", "What is 6 x 7?"),
        ("assistant", ""),
        ("assistant", "6 x 7 is 42."),
        ("user", "And the weather in Lisbon?"),
        ("assistant", "Lisbon is sunny today, 24 degrees."),
        ("user", "Thanks!"),
        ("assistant", "You are welcome."),
    ]
    context = api.get("/api/v1/threads/react-1/agent-state").json()["context"]
    assert [m["role"] for m in context] == ["user", "assistant", "tool", "assistant", "user", "assistant", "user", "assistant"]
    assert context[2]["content"] == "42" and context[1]["kwargs"]["tool_calls"][0]["name"] == "multiply"
    found = api.get("/api/v1/search/messages", {"q": "Lisbon"}).json()
    assert any(hit["thread_id"] == "react-1" for hit in found["results"])

    page = Client()
    page.force_login(alice)
    html = page.get("/threads/react-1/").content.decode()
    assert "What is 6 x 7?" in html and "Lisbon is sunny today" in html and "You are welcome." in html

    # After the first step of a thread, steps travel as deltas: the messages the server holds are not sent again.
    deltas = [body for body in recording.bodies if "messages" in body]
    assert len(deltas) == len(recording.bodies) - 2  # the thread's first two steps go whole
    assert all(len(body["messages"]["append"]) <= 2 for body in deltas)
    assert all("messages" not in body["checkpoint"]["channel_values"] for body in deltas)

    # A summarisation step removes all but the last two messages: they are archived, not lost.
    state = graph.get_state(config)
    removed = [RemoveMessage(id=m.id) for m in state.values["messages"][:-2]]
    graph.update_state(config, {"messages": removed})
    detail = api.get("/api/v1/threads/react-1").json()
    assert detail["active_blocks"] == 2 and detail["archived_blocks"] == 8
    assert [m["content"] for m in api.get("/api/v1/threads/react-1/agent-state").json()["context"]] == [
        "Thanks!",
        "You are welcome.",
    ]
    archived = api.get("/api/v1/threads/react-1/messages", {"archived": "true"}).json()["results"]
    assert "Lisbon is sunny today, 24 degrees." in [m["content"] for m in archived]
    assert [m.content for m in graph.get_state(config).values["messages"]] == ["Thanks!", "You are welcome."]
    recording.assert_every_checkpoint_reads_back("react-1")
    out = io.StringIO()
    call_command("verify", stdout=out)
    assert "0 problem(s)" in out.getvalue()


def test_a_fork_reads_back_exactly_and_the_page_follows_the_latest_branch(recording, alice):
    graph = agent(recording.saver)
    config = {"configurable": {"thread_id": "fork-1"}}
    graph.invoke({"messages": [HumanMessage("What is 6 x 7?", id="h-1")]}, config)
    after_first_turn = graph.get_state(config).config
    graph.invoke({"messages": [HumanMessage("And Lisbon?", id="h-2")]}, config)
    branch_a = graph.get_state(config).config

    # Time travel: a new turn from the checkpoint after the first turn (branch B) ...
    graph.invoke({"messages": [HumanMessage("And Porto?", id="h-3")]}, after_first_turn)
    # ... then more steps on branch A, then on B again.
    graph.invoke({"messages": [HumanMessage("And Faro?", id="h-4")]}, branch_a)
    latest_b = [s for s in graph.get_state_history(config) if any(m.id == "h-3" for m in s.values.get("messages", []))][0]
    graph.invoke({"messages": [HumanMessage("And Braga?", id="h-5")]}, latest_b.config)

    recording.assert_every_checkpoint_reads_back("fork-1")
    latest = graph.get_state(config).values["messages"]
    assert [m.id for m in latest if isinstance(m, HumanMessage)] == ["h-1", "h-3", "h-5"]
    api = _api(alice)
    context = api.get("/api/v1/threads/fork-1/agent-state").json()["context"]
    assert [m["kwargs"]["id"] for m in context] == [m.id for m in latest]
    page = Client()
    page.force_login(alice)
    html = page.get("/threads/fork-1/").content.decode()
    assert "And Braga?" in html and "And Porto?" in html and latest[-1].content in html
    assert "And Faro?" not in html  # the other branch is archived, on the archived tab
    archived = page.get("/threads/fork-1/", {"tab": "archived"}).content.decode()
    assert "And Faro?" in archived
    history = list(graph.get_state_history(config))
    assert len(history) == len(recording.seen)
    out = io.StringIO()
    call_command("verify", stdout=out)
    assert "0 problem(s)" in out.getvalue()


def test_a_graph_cannot_send_a_delta_into_another_members_thread(live_server, recording, alice, bob):
    graph = agent(recording.saver)
    graph.invoke({"messages": [HumanMessage("What is 6 x 7?", id="h-1")]}, {"configurable": {"thread_id": "mine"}})
    thief = live_saver(live_server.url, apikey_create(owner=bob).plaintext)
    try:
        from memoryadmin_client.langgraph import MemoryAdminForbidden

        with pytest.raises(MemoryAdminForbidden):
            agent(thief).invoke({"messages": [HumanMessage("hi", id="x")]}, {"configurable": {"thread_id": "mine"}})
    finally:
        thief.close()
    thread = Thread.objects.get(thread_id="mine")
    assert thread.active_count == Block.objects.filter(thread=thread, archived=False).count() == 4
    assert Checkpoint.objects.filter(thread=thread).count() == len(recording.seen)
