"""Thread state as LangGraph reads it: the SDK's get_state, history, status and search, against
`graph.get_state` on the same graph and inputs, for tasks started by `Send` and for interrupts.

Every case runs the graph twice: through `MemoryAdminSaver` against the live server, and
locally with LangGraph's own `InMemorySaver`. The server's answer must be what LangGraph
reads from the same stored checkpoint (task and interrupt ids included: they hash the
checkpoint id), and what LangGraph reads from its own saver (names, interrupt values,
errors, results, status: ids differ there, as the checkpoint ids do).
"""

from __future__ import annotations

import operator
import time
import warnings
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.func import entrypoint, task
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, Send, interrupt
from langgraph_sdk import get_sync_client

from memoryadmin.apikeys import apikey_create

from .test_saver_graph import live_saver

pytestmark = pytest.mark.django_db(transaction=True)

with warnings.catch_warnings():
    # Deprecated in favour of langchain's create_agent, which is not installed; it is the prebuilt agent asked for.
    warnings.simplefilter("ignore")
    from langgraph.prebuilt import create_react_agent


class ToolCallingFake(GenericFakeChatModel):
    """langchain_core's fake chat model, answering from a script; tools are accepted and ignored."""

    def bind_tools(self, tools, **kwargs):
        return self


@tool
def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


@tool
def ask_human(question: str) -> str:
    """Ask a human and wait for the answer."""
    return interrupt({"question": question})


def two_tool_calls(second: str) -> list[AIMessage]:
    second_call = {"name": second, "args": {"a": 1, "b": 2} if second == "multiply" else {"question": "Refund 49.9 EUR?"}, "id": "call-2"}
    return [
        AIMessage("", id="ai-1", tool_calls=[{"name": "multiply", "args": {"a": 6, "b": 7}, "id": "call-1"}, second_call]),
        AIMessage("All done.", id="ai-2"),
    ]


def react_agent(saver, *, second: str = "multiply", **compile_kwargs):
    model = ToolCallingFake(messages=iter(two_tool_calls(second)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return create_react_agent(model, [multiply, ask_human], checkpointer=saver, **compile_kwargs)


class FanOut(TypedDict, total=False):
    items: list[str]
    results: Annotated[list[str], operator.add]


def plan(state: FanOut) -> dict:
    return {}


def route(state: FanOut) -> list[Send]:
    return [Send("work", {"item": item}) for item in state["items"]] + [Send("audit", {"item": "all"})]


def audit(packet: dict) -> dict:
    return {"results": ["audited"]}


def _once_the_others_are_saved(saver, thread_id: str, others: int) -> None:
    """Wait until the step's other tasks have their writes saved.

    LangGraph stops waiting for the running tasks when one fails, so which of
    them get saved first would be a race; the failing task waits for them.
    """
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        saved = saver.get_tuple({"configurable": {"thread_id": thread_id}})
        if saved and len({task_id for task_id, _, _ in saved.pending_writes}) >= others:
            return
        time.sleep(0.02)
    raise AssertionError("the other tasks' writes were never saved")


def fan_out(saver, **compile_kwargs):
    def work(packet: dict, config: RunnableConfig) -> dict:
        if packet["item"] == "bad":
            _once_the_others_are_saved(saver, config["configurable"]["thread_id"], others=3)
            raise ValueError("cannot work on bad")
        return {"results": [packet["item"]]}

    builder = StateGraph(FanOut)
    builder.add_node("plan", plan)
    builder.add_node("work", work)
    builder.add_node("audit", audit)
    builder.add_edge(START, "plan")
    builder.add_conditional_edges("plan", route, ["work", "audit"])
    builder.add_edge("work", END)
    builder.add_edge("audit", END)
    return builder.compile(checkpointer=saver, **compile_kwargs)


@pytest.fixture
def sdk(live_server, alice):
    key = apikey_create(owner=alice).plaintext
    client = get_sync_client(url=f"{live_server.url}/api/v1", api_key=key)
    saver = live_saver(live_server.url, key)
    yield client, saver
    client.http.client.close()
    saver.close()


def run_both(build, inputs: Any, thread_id: str, saver, **kwargs):
    """The graph run through memoryadmin and, alike, through LangGraph's InMemorySaver."""
    remote, local = build(saver, **kwargs), build(InMemorySaver(), **kwargs)
    config = {"configurable": {"thread_id": thread_id}}
    for graph in (remote, local):
        try:
            graph.invoke(inputs, config)
        except ValueError:
            pass  # a failing task stops the run; its error is in the state
    return remote, local, config


def expected_status(snapshot) -> str:
    """docs/checkpoints.md's status rules, applied to LangGraph's own reading."""
    if any(task.error for task in snapshot.tasks):
        return "error"
    return "interrupted" if snapshot.next or snapshot.interrupts else "idle"


def _plain(value: Any) -> Any:
    if isinstance(value, BaseMessage):
        return {"type": value.type, "content": value.content}
    if isinstance(value, dict):
        if "type" in value and "content" in value:
            return {"type": value["type"], "content": value["content"]}
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value


def tasks_of_sdk(state: dict, *, ids: bool) -> list[tuple]:
    return [
        (
            task["id"] if ids else "",
            task["name"],
            [(item["id"] if ids else "", item["value"]) for item in task["interrupts"]],
            task["error"],
            _plain(task["result"]),
        )
        for task in state["tasks"]
    ]


def tasks_of_langgraph(snapshot, *, ids: bool) -> list[tuple]:
    return [
        (
            task.id if ids else "",
            task.name,
            [(item.id if ids else "", item.value) for item in task.interrupts],
            task.error,
            _plain(task.result),
        )
        for task in snapshot.tasks
    ]


def assert_reads_as_langgraph(state: dict, remote_snapshot, local_snapshot) -> None:
    # Exactly LangGraph's reading of the same stored checkpoint, ids included.
    assert state["next"] == list(remote_snapshot.next)
    assert tasks_of_sdk(state, ids=True) == tasks_of_langgraph(remote_snapshot, ids=True)
    assert [item["id"] for item in state["interrupts"]] == [item.id for item in remote_snapshot.interrupts]
    # And what LangGraph's own saver gives for the same graph and inputs.
    assert state["next"] == list(local_snapshot.next)
    assert tasks_of_sdk(state, ids=False) == tasks_of_langgraph(local_snapshot, ids=False)
    assert [item["value"] for item in state["interrupts"]] == [item.value for item in local_snapshot.interrupts]
    assert state["created_at"] == remote_snapshot.created_at


def assert_history_reads_as_langgraph(history: list[dict], remote, local, config) -> None:
    remote_history = list(remote.get_state_history(config))
    local_history = list(local.get_state_history(config))
    assert len(history) == len(remote_history) == len(local_history)
    for state, remote_snapshot, local_snapshot in zip(history, remote_history, local_history, strict=True):
        assert state["checkpoint"]["checkpoint_id"] == remote_snapshot.config["configurable"]["checkpoint_id"]
        assert_reads_as_langgraph(state, remote_snapshot, local_snapshot)


def test_a_react_agent_stopped_before_its_tools_reads_as_interrupted_with_its_tool_tasks(sdk):
    client, saver = sdk
    remote, local, config = run_both(
        react_agent, {"messages": [HumanMessage("What is 6 x 7 and 1 + 2?", id="h-1")]}, "react-before-tools", saver,
        interrupt_before=["tools"],
    )
    remote_state, local_state = remote.get_state(config), local.get_state(config)
    assert local_state.next == ("tools", "tools")  # two Send packets, one per tool call

    state = client.threads.get_state("react-before-tools")
    assert_reads_as_langgraph(state, remote_state, local_state)
    assert [task["path"] for task in state["tasks"]] == [["__pregel_push", 0, False], ["__pregel_push", 1, False]]
    assert client.threads.get("react-before-tools")["status"] == expected_status(local_state) == "interrupted"
    assert [thread["thread_id"] for thread in client.threads.search(status="interrupted")] == ["react-before-tools"]
    assert_history_reads_as_langgraph(client.threads.get_history("react-before-tools", limit=20), remote, local, config)

    # The graph goes on from the server's checkpoint and finishes.
    remote.invoke(None, config)
    assert client.threads.get_state("react-before-tools")["next"] == []
    assert client.threads.get("react-before-tools")["status"] == "idle"
    assert client.threads.search(status="interrupted") == []


def test_an_interrupt_inside_a_tool_reads_as_langgraph_with_the_finished_tool_call(sdk):
    client, saver = sdk
    remote, local, config = run_both(
        react_agent, {"messages": [HumanMessage("Multiply, then ask.", id="h-1")]}, "react-ask", saver, second="ask_human"
    )
    remote_state, local_state = remote.get_state(config), local.get_state(config)
    assert local_state.next == ("tools",) and local_state.interrupts[0].value == {"question": "Refund 49.9 EUR?"}

    state = client.threads.get_state("react-ask")
    assert_reads_as_langgraph(state, remote_state, local_state)
    # The finished call's ToolMessage is in the live values, as LangGraph folds it in.
    assert _plain(state["values"]["messages"]) == _plain(local_state.values["messages"])
    assert all(message["id"] for message in state["values"]["messages"])
    assert state["values"]["messages"] == client.threads.get_state("react-ask")["values"]["messages"]  # stable ids

    thread = client.threads.get("react-ask")
    assert thread["status"] == expected_status(local_state) == "interrupted"
    found = client.threads.search(status="interrupted")
    assert [item["thread_id"] for item in found] == ["react-ask"]
    waiting = {task.id: [item.id for item in task.interrupts] for task in remote_state.tasks if task.interrupts}
    assert {task_id: [item["id"] for item in items] for task_id, items in found[0]["interrupts"].items()} == waiting
    assert_history_reads_as_langgraph(client.threads.get_history("react-ask"), remote, local, config)

    remote.invoke(Command(resume="yes"), config)
    done = client.threads.get_state("react-ask")
    assert done["next"] == [] and done["values"]["messages"][-1]["content"] == "All done."
    assert client.threads.get("react-ask")["status"] == "idle"


def test_a_pending_fan_out_reads_as_its_send_tasks(sdk):
    client, saver = sdk
    for name, kwargs in [("fan-before", {"interrupt_before": ["work"]}), ("fan-after", {"interrupt_after": ["plan"]})]:
        remote, local, config = run_both(fan_out, {"items": ["a", "c"]}, name, saver, **kwargs)
        remote_state, local_state = remote.get_state(config), local.get_state(config)
        assert local_state.next == ("work", "work", "audit")
        state = client.threads.get_state(name)
        assert_reads_as_langgraph(state, remote_state, local_state)
        assert state["values"]["items"] == ["a", "c"]
        assert client.threads.get(name)["status"] == expected_status(local_state) == "interrupted"
        assert_history_reads_as_langgraph(client.threads.get_history(name), remote, local, config)
    assert {thread["thread_id"] for thread in client.threads.search(status="interrupted")} == {"fan-before", "fan-after"}


def test_a_failed_fan_out_reads_as_an_error_with_the_finished_tasks_results(sdk):
    client, saver = sdk
    remote, local, config = run_both(fan_out, {"items": ["a", "bad", "c"]}, "fan-failed", saver)
    remote_state, local_state = remote.get_state(config), local.get_state(config)
    assert local_state.next == ("work",)  # the failed task; the three others finished

    state = client.threads.get_state("fan-failed")
    assert_reads_as_langgraph(state, remote_state, local_state)
    assert [task["error"] for task in state["tasks"]] == [None, "ValueError('cannot work on bad')", None, None]
    assert client.threads.get("fan-failed")["status"] == expected_status(local_state) == "error"
    assert [thread["thread_id"] for thread in client.threads.search(status="error")] == ["fan-failed"]
    assert client.threads.search(status="interrupted") == []
    assert_history_reads_as_langgraph(client.threads.get_history("fan-failed"), remote, local, config)

    # At the checkpoint by id it is the record of the step: every task is listed in next.
    at = client.threads.get_state("fan-failed", checkpoint_id=state["checkpoint"]["checkpoint_id"])
    by_id = remote.get_state({"configurable": {**config["configurable"], "checkpoint_id": state["checkpoint"]["checkpoint_id"]}})
    assert at["next"] == list(by_id.next) == ["work", "work", "work", "audit"]
    assert tasks_of_sdk(at, ids=True) == tasks_of_langgraph(by_id, ids=True)


def reviewed_writer(saver):
    """The functional API: an entrypoint whose task waits for a reviewer (`interrupt`)."""

    @task
    def draft(topic: str) -> str:
        return f"a draft on {topic}"

    @task
    def review(text: str) -> str:
        return interrupt({"draft": text, "question": "Publish?"})

    @entrypoint(checkpointer=saver)
    def writer(topic: str, *, previous: list | None = None):
        text = draft(topic).result()
        verdict = review(text).result()
        return entrypoint.final(value=verdict, save=[*(previous or []), (topic, verdict)])

    return writer


def test_a_functional_api_entrypoint_waiting_for_a_reviewer_reads_as_langgraph(sdk):
    """The entrypoint is a node triggered by `__start__` itself (no `__start__` node): on the
    thread's first run, and on a later one."""
    client, saver = sdk
    remote, local, config = run_both(reviewed_writer, "heat pumps", "functional-review", saver)
    for turn in range(2):
        remote_state, local_state = remote.get_state(config), local.get_state(config)
        assert local_state.next == ("writer",) and local_state.interrupts[0].value["question"] == "Publish?"
        state = client.threads.get_state("functional-review")
        assert_reads_as_langgraph(state, remote_state, local_state)
        assert state["values"] == local_state.values == (None if turn == 0 else "yes")  # the last output
        assert [s["values"] for s in client.threads.get_history("functional-review")] == [
            s.values for s in local.get_state_history(config)
        ]
        assert client.threads.get("functional-review")["status"] == expected_status(local_state) == "interrupted"
        assert [thread["thread_id"] for thread in client.threads.search(status="interrupted")] == ["functional-review"]
        assert_history_reads_as_langgraph(client.threads.get_history("functional-review"), remote, local, config)
        for graph in (remote, local):
            graph.invoke(Command(resume="yes"), config)
            if turn == 0:
                graph.invoke("grid emissions", config)
    assert client.threads.get_state("functional-review")["next"] == []
    thread = client.threads.get("functional-review")
    assert thread["status"] == "idle" and thread["values"] == "yes" == local.get_state(config).values
