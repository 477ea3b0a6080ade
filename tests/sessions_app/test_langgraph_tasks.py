"""The server's readers of LangGraph's tasks and messages agree with the installed LangGraph."""

from __future__ import annotations

import binascii
import json

import pytest
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage, ToolMessage
from langgraph._internal import _constants as lg_constants
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.graph.message import add_messages as lg_add_messages
from langgraph.pregel._algo import _uuid5_str, _xxhash_str
from langgraph.pregel._task_status import CONTROL_WRITES as LG_CONTROL_WRITES

from memoryadmin.errors import InvalidInput
from sessions_app.checkpoints import reducers, tasks, wire

SERDE = JsonPlusSerializer()


def test_the_task_constants_are_langgraphs():
    for name in ("TASKS", "PUSH", "PULL", "NULL_TASK_ID", "RETURN", "ERROR_SOURCE_NODE", "NS_SEP", "NS_END"):
        assert getattr(wire, name) == getattr(lg_constants, name), name
    assert wire.CONTROL_WRITES == LG_CONTROL_WRITES
    assert reducers.REMOVE_ALL == REMOVE_ALL_MESSAGES


@pytest.mark.parametrize("form, langgraphs", [(4, _xxhash_str), (2, _xxhash_str), (1, _uuid5_str)])
def test_task_ids_are_langgraphs_hash_of_the_checkpoint_id(form, langgraphs):
    checkpoint = {"v": form, "id": "1f1ed6c8-ca43-6bb4-8001-5b4c74ada2e9"}
    parts = ("child:1|tools", "2", "tools", "__pregel_push", "0")
    expected = langgraphs(binascii.unhexlify(checkpoint["id"].replace("-", "")), *parts)
    assert tasks.task_id(checkpoint, *parts) == expected
    # A checkpoint whose id is not a uuid has no task ids (and no error).
    assert tasks.task_id({"v": form, "id": "cp-1"}, *parts) == ""


def revive(envelopes):
    return [SERDE.loads_typed(("json", json.dumps(item).encode())) for item in envelopes]


def envelope(message):
    from langchain_core.load import dumpd

    return dumpd(message)


LEFT = [HumanMessage("hi", id="h-1"), AIMessage("Let me check.", id="ai-1")]


@pytest.mark.parametrize(
    "right, ours",
    [
        # Same id replaces in place, a new one is appended.
        ([AIMessage("Checked.", id="ai-1"), HumanMessage("thanks", id="h-2")],
         [{"type": "ai", "content": "Checked.", "id": "ai-1"}, {"role": "user", "content": "thanks", "id": "h-2"}]),
        # A single message, not in a list.
        (HumanMessage("one more", id="h-3"), {"role": "human", "content": "one more", "id": "h-3"}),
        # Removal by id, and removal of everything before.
        ([RemoveMessage(id="h-1")], [{"type": "remove", "id": "h-1"}]),
        ([RemoveMessage(id=REMOVE_ALL_MESSAGES), HumanMessage("fresh", id="h-9")],
         [{"type": "remove", "id": REMOVE_ALL_MESSAGES}, {"role": "user", "content": "fresh", "id": "h-9"}]),
        # Tool calls, in OpenAI's shape too, and a tool answer.
        ([AIMessage("", id="ai-2", tool_calls=[{"name": "lookup", "args": {"q": "x"}, "id": "c-1"}]),
          ToolMessage("found", tool_call_id="c-1", id="t-1")],
         [{"role": "assistant", "content": "", "id": "ai-2",
           "tool_calls": [{"id": "c-1", "type": "function", "function": {"name": "lookup", "arguments": "{\"q\": \"x\"}"}}]},
          {"role": "tool", "content": "found", "tool_call_id": "c-1", "id": "t-1"}]),
        # A message in LangChain's serialised form is read as that message.
        ([AIMessage("Edited.", id="ai-1")], [envelope(AIMessage("Edited.", id="ai-1"))]),
    ],
)
def test_add_messages_merges_as_langgraphs(right, ours):
    expected = lg_add_messages(list(LEFT), right)
    got = revive(reducers.add_messages([envelope(m) for m in LEFT], ours, where="values.messages"))
    assert got == expected


def test_add_messages_gives_ids_and_refuses_what_langgraph_refuses():
    got = reducers.add_messages([], [{"role": "user", "content": "no id"}, "a string"], where="values.messages")
    assert [item["kwargs"]["type"] for item in got] == ["human", "human"]
    assert all(len(item["kwargs"]["id"]) == 36 for item in got)
    for bad, field in [
        ([{"type": "remove", "id": "missing"}], "values.messages[0]"),
        ([{"role": "robot", "content": "x"}], "values.messages[0]"),
        ([{"role": "tool", "content": "x"}], "values.messages[0].tool_call_id"),
        ([{"role": "user", "content": 5}], "values.messages[0].content"),
        ([42], "values.messages[0]"),
    ]:
        with pytest.raises(InvalidInput) as refused:
            reducers.add_messages([envelope(m) for m in LEFT], bad, where="values.messages")
        assert field in refused.value.fields, bad
