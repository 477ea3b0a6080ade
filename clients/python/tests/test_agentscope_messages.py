"""AgentScope's Msg ⇄ memoryadmin message (rules M1–M5) and the session's thread ids (rule A1), on real Msg objects.

What MemoryAdminSession does against a live server is tested in the server's
suite (tests/integrations/test_agentscope_session.py).
"""

from __future__ import annotations

import json

import pytest
from agentscope.message import Msg

from memoryadmin_client.agent_state import THREAD_ID_RE
from memoryadmin_client.agentscope import message_to_msg, msg_to_message, thread_id_for
from memoryadmin_client.agentscope.messages import msg_as_state, msg_from_state


def as_stored(message: dict) -> dict:
    """What the server hands back: the message through JSON."""
    return json.loads(json.dumps(message))


def round_trip(msg: Msg, marks: list[str] | None = None) -> tuple[Msg, list[str]]:
    return message_to_msg(message=as_stored(msg_to_message(msg=msg, marks=marks or [])))


def same(a: Msg, b: Msg) -> bool:
    return msg_as_state(msg=a) == msg_as_state(msg=b)


def test_a_user_message_is_its_text():
    msg = Msg("user", "What is 6 x 7?", "user")
    message = msg_to_message(msg=msg)
    assert message == {
        "id": msg.id, "name": "user", "role": "user", "content": "What is 6 x 7?",
        "metadata": {}, "timestamp": msg.timestamp,
    }
    back, marks = round_trip(msg)
    assert same(back, msg) and marks == []


def test_a_tool_call_is_readable_and_exact():
    blocks = [
        {"type": "thinking", "thinking": "multiply them"},
        {"type": "text", "text": "Let me compute that."},
        {"type": "tool_use", "id": "call-1", "name": "multiply", "input": {"a": 6, "b": 7}, "raw_input": '{"a": 6, "b": 7}'},
    ]
    msg = Msg("Friday", blocks, "assistant", metadata={"step": 1})
    message = msg_to_message(msg=msg)
    assert message["role"] == "assistant" and message["content"] == "Let me compute that."
    assert message["tool_calls"] == [{"id": "call-1", "name": "multiply", "args": {"a": 6, "b": 7}, "type": "tool_call"}]
    assert message["agentscope"] == {"content": blocks}
    back, _ = round_trip(msg)
    assert same(back, msg) and back.content == blocks


def test_a_tool_result_is_a_tool_message():
    msg = Msg("system", [{"type": "tool_result", "id": "call-1", "name": "multiply", "output": [{"type": "text", "text": "42"}]}], "system")
    message = msg_to_message(msg=msg)
    assert (message["role"], message["content"], message["tool_call_id"]) == ("tool", "42", "call-1")
    assert message["agentscope"]["role"] == "system"
    back, _ = round_trip(msg)
    assert same(back, msg) and back.role == "system"


def test_media_marks_invocation_and_a_null_metadata_come_back():
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "data:image/png;base64,iVBORw0KGgo="}}
    msg = Msg("user", [{"type": "text", "text": "Look"}, image], "user", invocation_id="inv-9")
    msg.metadata = None
    message = msg_to_message(msg=msg, marks=["hint", "compressed"])
    assert message["content"] == "Look" and message["metadata"] is None
    back, marks = round_trip(msg, ["hint", "compressed"])
    assert same(back, msg) and back.metadata is None and back.invocation_id == "inv-9"
    assert marks == ["hint", "compressed"]


def test_a_memory_state_entry_keeps_its_metadata():
    msg = Msg("Friday", "done", "assistant")
    msg.metadata = None
    assert msg_from_state(state=msg.to_dict()).metadata is None


def test_messages_from_other_clients_become_agentscope_messages():
    call, _ = message_to_msg(message={"role": "ai", "content": "", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "multiply", "arguments": '{"a": 6, "b": 7}'}}
    ]})
    assert call.role == "assistant" and call.name == "assistant"
    assert call.content == [{"type": "tool_use", "id": "c1", "name": "multiply", "input": {"a": 6, "b": 7}}]
    result, _ = message_to_msg(message={"role": "tool", "content": "42", "tool_call_id": "c1", "name": "multiply"})
    assert (result.role, result.content) == ("system", [{"type": "tool_result", "id": "c1", "name": "multiply", "output": "42"}])
    human, _ = message_to_msg(message={"role": "human", "content": [{"type": "text", "text": "hi"}], "id": "h1"})
    assert (human.role, human.id, human.get_text_content()) == ("user", "h1", "hi")


@pytest.mark.parametrize(
    ("session_id", "user_id", "expected"),
    [("trip-42", "", "trip-42"), ("trip-42", "alice", "alice:trip-42"), ("a:b", "", "a:b")],
)
def test_valid_ids_are_kept_readable(session_id, user_id, expected):
    assert thread_id_for(session_id=session_id, user_id=user_id) == expected


@pytest.mark.parametrize(
    ("session_id", "user_id"),
    [("search", ""), ("x" * 65, ""), ("会话 1", ""), ("s", "a:b"), ("s" * 60, "alice"), ("", ""), ("a/b", "u v")],
)
def test_any_other_id_maps_to_a_valid_thread_id(session_id, user_id):
    thread_id = thread_id_for(session_id=session_id, user_id=user_id)
    assert THREAD_ID_RE.match(thread_id) and thread_id == thread_id_for(session_id=session_id, user_id=user_id)


def test_distinct_sessions_never_share_a_thread():
    pairs = [("c", "a:b"), ("b:c", "a"), ("会话", ""), ("会 话", ""), ("x" * 70, ""), ("x" * 71, "")]
    assert len({thread_id_for(session_id=s, user_id=u) for s, u in pairs}) == len(pairs)
