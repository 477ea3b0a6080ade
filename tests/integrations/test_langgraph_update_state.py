"""The SDK's `threads.update_state` against memoryadmin, compared with LangGraph's own `graph.update_state`.

The same graph runs through `MemoryAdminSaver` (the server makes the update) and locally
with `InMemorySaver` (LangGraph makes it); the states read back must agree, and the graph
must go on from the server's checkpoint exactly as from LangGraph's.
"""

from __future__ import annotations

import operator
from typing import Annotated, TypedDict

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command, interrupt
from langgraph_sdk import get_sync_client
from langgraph_sdk.errors import BadRequestError, NotFoundError, PermissionDeniedError

from memoryadmin.apikeys import apikey_create
from sessions_app.checkpoints import lifecycle
from sessions_app.models import Checkpoint

from .test_langgraph_state import react_agent
from .test_saver_graph import live_saver

pytestmark = pytest.mark.django_db(transaction=True)


class State(TypedDict, total=False):
    messages: Annotated[list, add_messages]
    steps: Annotated[list[str], operator.add]
    note: str


def answer(state: State) -> dict:
    return {"messages": [AIMessage("Let me check with a human.", id="ai-1")], "steps": ["answer"]}


def review(state: State) -> dict:
    verdict = interrupt({"question": "Send it?"})
    return {"messages": [AIMessage(f"Reviewed ({state.get('note', 'no note')}): {verdict}", id="ai-2")], "steps": ["review"]}


def build(saver):
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
    yield client, saver, live_server
    client.http.client.close()
    saver.close()


def both(saver, thread_id: str):
    remote, local = build(saver), build(InMemorySaver())
    config = {"configurable": {"thread_id": thread_id}}
    for graph in (remote, local):
        graph.invoke({"messages": [HumanMessage("Can I get a refund?", id="h-1")]}, config)
    return remote, local, config


def messages_of(values) -> list[tuple]:
    out = []
    for m in values["messages"]:
        m = m if isinstance(m, dict) else {"type": m.type, "content": m.content, "id": m.id}
        out.append((m["type"], m["content"], m["id"]))
    return out


@pytest.mark.parametrize("as_node", ["answer", None])
def test_update_state_makes_the_checkpoint_langgraphs_update_state_makes(sdk, as_node):
    client, saver, _ = sdk
    thread_id = f"upd-{as_node}"
    remote, local, config = both(saver, thread_id)
    edited = {"type": "ai", "content": "Let me check (edited).", "id": "ai-1"}
    added = {"role": "user", "content": "It is the blue one.", "id": "h-2"}
    answer_ = client.threads.update_state(thread_id, {"messages": [edited, added], "note": "VIP"}, as_node=as_node)
    local.update_state(
        config, {"messages": [AIMessage("Let me check (edited).", id="ai-1"), HumanMessage("It is the blue one.", id="h-2")], "note": "VIP"},
        as_node=as_node,
    )
    assert answer_["checkpoint"]["thread_id"] == thread_id

    state, mine, theirs = client.threads.get_state(thread_id), remote.get_state(config), local.get_state(config)
    assert state["checkpoint"]["checkpoint_id"] == answer_["checkpoint"]["checkpoint_id"]
    assert messages_of(state["values"]) == messages_of(theirs.values) == messages_of(mine.values)
    assert state["values"]["note"] == theirs.values["note"] == "VIP"
    assert state["next"] == list(theirs.next) == list(mine.next) == ["review"]
    assert [t["id"] for t in state["tasks"]] == [t.id for t in mine.tasks]
    assert state["interrupts"] == [] and theirs.interrupts == ()
    assert {k: state["metadata"][k] for k in ("source", "step", "parents")} == {k: theirs.metadata[k] for k in ("source", "step", "parents")}
    assert state["parent_checkpoint"]["checkpoint_id"] == list(remote.get_state_history(config))[1].config["configurable"]["checkpoint_id"]
    assert client.threads.get(thread_id)["status"] == "interrupted"

    # The graph goes on from the server's checkpoint as it does from LangGraph's.
    for graph in (remote, local):
        first = graph.invoke(None, config)
        assert first["__interrupt__"][0].value == {"question": "Send it?"}
        graph.invoke(Command(resume="yes"), config)
    done, expected = client.threads.get_state(thread_id), local.get_state(config)
    assert messages_of(done["values"]) == messages_of(expected.values)
    assert done["values"]["messages"][-1]["content"] == "Reviewed (VIP): yes"
    assert done["values"]["steps"] == expected.values["steps"] and done["next"] == []


def test_update_state_refuses_what_it_cannot_make_and_writes_nothing(sdk, alice, operator, bob):
    client, saver, live_server = sdk
    build(saver).invoke({"messages": [HumanMessage("refund?", id="h-1")]}, {"configurable": {"thread_id": "t"}})
    before = Checkpoint.objects.count()
    for values, as_node, field in [
        ({"note": "x"}, "review", "as_node"),  # has not run here: its edges are unknown
        ({"note": "x"}, "nope", "as_node"),
        ({"note": "x"}, "__copy__", "as_node"),
        ({"branch:to:review": 1}, "answer", "values.branch:to:review"),
        ({"messages": [{"role": "robot", "content": "x"}]}, "answer", "values.messages[0]"),
        ({"messages": [{"role": ["user"], "content": "x"}]}, "answer", "values.messages[0]"),
        ({"messages": [{"type": "remove", "id": "not-there"}]}, "answer", "values.messages[0]"),
        ({"note": "nul \u0000 inside"}, "answer", "values.note"),
    ]:
        with pytest.raises(BadRequestError) as refused:
            client.threads.update_state("t", values, as_node=as_node)
        assert field in refused.value.body["errors"], (values, as_node)
    with pytest.raises(BadRequestError) as refused:
        client.http.post("/threads/t/state", json={"values": "x"})
    assert "values" in refused.value.body["errors"]
    with pytest.raises(NotFoundError):
        client.threads.update_state("t", {"note": "x"}, checkpoint_id="no-such-checkpoint")
    lifecycle.thread_create(actor=alice, thread_id="empty")
    with pytest.raises(NotFoundError):
        client.threads.update_state("empty", {"note": "x"})
    for user in (operator, bob):
        other = get_sync_client(url=f"{live_server.url}/api/v1", api_key=apikey_create(owner=user).plaintext)
        with pytest.raises(PermissionDeniedError):
            other.threads.update_state("t", {"note": "x"}, as_node="answer")
        other.http.client.close()
    assert Checkpoint.objects.count() == before

    # A node that routes with Send (the prebuilt agent's tool calls) only the graph can update.
    agent_config = {"configurable": {"thread_id": "agent"}}
    react_agent(saver, interrupt_before=["tools"]).invoke({"messages": [HumanMessage("6 x 7?", id="h-1")]}, agent_config)
    with pytest.raises(BadRequestError) as refused:
        client.threads.update_state("agent", {"messages": [{"type": "ai", "content": "No tools.", "id": "ai-1"}]})
    assert "Send" in refused.value.body["errors"]["as_node"][0]


def test_update_state_from_an_older_checkpoint_forks(sdk):
    client, saver, _ = sdk
    _, local, config = both(saver, "fork")
    older = client.threads.get_history("fork")[1]["checkpoint"]  # after __start__: answer is due
    assert client.threads.get_state("fork", checkpoint=older)["next"] == ["answer"]
    made = client.threads.update_state("fork", {"note": "from the start"}, as_node="__start__", checkpoint=older)
    local_older = list(local.get_state_history(config))[1].config
    local.update_state(local_older, {"note": "from the start"}, as_node="__start__")
    state, theirs = client.threads.get_state("fork"), local.get_state(config)
    assert state["checkpoint"]["checkpoint_id"] == made["checkpoint"]["checkpoint_id"]
    assert state["parent_checkpoint"]["checkpoint_id"] == older["checkpoint_id"]
    assert state["next"] == list(theirs.next) == ["answer"]
    assert messages_of(state["values"]) == messages_of(theirs.values) and state["values"]["note"] == theirs.values["note"]
