"""LangChain's messages ⇄ memoryadmin messages (rules L1–L4), on real langchain-core messages.

MemoryAdminChatMessageHistory against a live server (RunnableWithMessageHistory,
clear, concurrent writers, ownership) is tested in the server's suite
(tests/integrations/test_langchain_history.py).
"""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from memoryadmin_client.langchain import message_from_memoryadmin, message_to_memoryadmin

MESSAGES = [
    HumanMessage("What is 6 x 7?", id="h-1", name="alice"),
    HumanMessage([{"type": "text", "text": "Look"}, {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBO"}}]),
    AIMessage(
        "",
        id="ai-1",
        tool_calls=[{"name": "multiply", "args": {"a": 6, "b": 7}, "id": "call-1"}],
        invalid_tool_calls=[{"name": "broken", "args": "{", "id": "call-2", "error": "bad JSON", "type": "invalid_tool_call"}],
        usage_metadata={"input_tokens": 12, "output_tokens": 3, "total_tokens": 15},
        response_metadata={"model_name": "scripted", "finish_reason": "tool_calls"},
        additional_kwargs={"refusal": None},
    ),
    ToolMessage("42", tool_call_id="call-1", name="multiply", artifact={"raw": [42]}),
    ToolMessage("boom", tool_call_id="call-2", status="error"),
    SystemMessage("Be brief."),
    ChatMessage("Looks right.", role="critic"),
    ChatMessage("Noted.", role="assistant"),
    FunctionMessage("42", name="multiply"),
]


def stored(message) -> dict:
    """The memoryadmin message as the server hands it back (through JSON)."""
    return json.loads(json.dumps(message_to_memoryadmin(message=message)))


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: type(m).__name__)
def test_every_kind_comes_back_equal(message):
    assert message_from_memoryadmin(message=stored(message)) == message


def test_the_stored_form_is_what_people_and_other_clients_read():
    assert stored(MESSAGES[0]) == {"role": "user", "content": "What is 6 x 7?", "id": "h-1", "name": "alice"}
    call = stored(MESSAGES[2])
    assert (call["role"], call["content"]) == ("assistant", "")
    assert call["tool_calls"] == [{"name": "multiply", "args": {"a": 6, "b": 7}, "id": "call-1", "type": "tool_call"}]
    assert set(call["langchain"]) == {"type", "invalid_tool_calls", "usage_metadata", "response_metadata", "additional_kwargs"}
    assert stored(MESSAGES[3]) == {
        "role": "tool", "content": "42", "name": "multiply", "tool_call_id": "call-1", "langchain": {"type": "tool", "artifact": {"raw": [42]}}
    }
    assert stored(MESSAGES[5]) == {"role": "system", "content": "Be brief."}
    assert stored(MESSAGES[6])["role"] == "user" and stored(MESSAGES[7])["role"] == "assistant"


def test_a_chunk_is_saved_as_its_message():
    chunk = AIMessageChunk("Kyoto has", id="run-1") + AIMessageChunk(" temples.", id="run-1")
    assert message_from_memoryadmin(message=stored(chunk)) == AIMessage("Kyoto has temples.", id="run-1")


def test_messages_from_other_clients_become_langchain_messages():
    call = message_from_memoryadmin(message={
        "role": "assistant", "content": "Let me compute that.", "name": "Friday", "metadata": {}, "timestamp": "2026-01-01 10:00:00.000",
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "multiply", "arguments": '{"a": 6, "b": 7}'}}],
    })
    assert call == AIMessage(
        "Let me compute that.", name="Friday", tool_calls=[{"name": "multiply", "args": {"a": 6, "b": 7}, "id": "c1"}]
    )
    assert message_from_memoryadmin(message={"role": "tool", "content": "42", "tool_call_id": "c1"}) == ToolMessage("42", tool_call_id="c1")
    assert message_from_memoryadmin(message={"role": "human", "content": "hi"}) == HumanMessage("hi")
    assert message_from_memoryadmin(message={"role": "assistant", "content": None, "tool_calls": []}) == AIMessage("")
