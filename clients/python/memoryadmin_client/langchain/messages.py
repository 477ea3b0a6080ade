"""LangChain's messages ⇄ memoryadmin's messages: the function pair `message_to_memoryadmin` / `message_from_memoryadmin`.

    HumanMessage   → {"role": "user", "content"}
    AIMessage      → {"role": "assistant", "content", "tool_calls": [{"id", "name", "args", "type": "tool_call"}]}
    ToolMessage    → {"role": "tool", "content", "tool_call_id"}
    SystemMessage  → {"role": "system", "content"}

The rules:

L1. `role` is the message's kind as memoryadmin names it (above); a
    `ChatMessage` takes its own role when it is one of those (or `human`/`ai`),
    else `user`; a legacy `FunctionMessage` is `tool`.
L2. `content` is LangChain's content as it is: a string, or a list of content
    parts (whose text parts the dashboard shows). `id`, `name`, `tool_calls` and
    `tool_call_id` are top-level fields when the message has them.
L3. Every other field that differs from its default (`additional_kwargs`,
    `response_metadata`, `usage_metadata`, `invalid_tool_calls`, a tool
    message's `artifact` and `status`, a chat message's `role`) is kept under
    `langchain`, with the message's `type` when it is not the role's usual one,
    so that the message comes back equal. A chunk (`AIMessageChunk`, …) is saved
    as the whole message it stands for.
L4. Back, a message written by another client (no `langchain` key) becomes the
    message of its role: `user`/`human` a HumanMessage, `assistant`/`ai` an
    AIMessage (tool calls in LangChain's shape or OpenAI's `function.arguments`),
    `tool` a ToolMessage, `system` a SystemMessage. Fields LangChain has no place
    for (an AgentScope message's `metadata`, `timestamp`, …) are left out.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from langchain_core.messages import (
    BaseMessage,
    BaseMessageChunk,
    message_chunk_to_message,
    message_to_dict,
    messages_from_dict,
)

NATIVE_KEY = "langchain"
ROLE_OF_TYPE = {"human": "user", "ai": "assistant", "tool": "tool", "system": "system", "function": "tool", "chat": "user"}
TYPE_OF_ROLE = {"user": "human", "assistant": "ai", "tool": "tool", "system": "system"}
ROLE_ALIASES = {"human": "user", "ai": "assistant", "user": "user", "assistant": "assistant", "tool": "tool", "system": "system"}
TOP_LEVEL = ("id", "name", "tool_calls", "tool_call_id")


def _json(value: Any) -> Any:
    """What JSON makes of a value (tuples become lists), so that a saved message is exactly what loads back."""
    return json.loads(json.dumps(value, ensure_ascii=False, allow_nan=False))


def message_to_memoryadmin(*, message: BaseMessage) -> dict[str, Any]:
    """The memoryadmin message for a LangChain message (rules L1–L3)."""
    if isinstance(message, BaseMessageChunk):
        message = message_chunk_to_message(message)
    data = message_to_dict(message)["data"]
    kind = data.pop("type", message.type)
    role = ROLE_OF_TYPE.get(kind, "user")
    if kind == "chat":
        role = ROLE_ALIASES.get(str(data.get("role")), "user")
    saved: dict[str, Any] = {"role": role, "content": data.pop("content")}
    for key in TOP_LEVEL:
        value = data.pop(key, None)
        if value not in (None, []):
            saved[key] = value
    fields = type(message).model_fields
    native: dict[str, Any] = {}
    for key, value in data.items():
        field = fields.get(key)
        default = None if field is None or field.is_required() else field.get_default(call_default_factory=True)
        if field is None or field.is_required() or value != default:
            native[key] = value
    if kind != TYPE_OF_ROLE[role] or native:
        saved[NATIVE_KEY] = {"type": kind, **native}
    return _json(saved)


def _tool_call(call: Mapping[str, Any]) -> dict[str, Any]:
    """A tool call in LangChain's shape, from LangChain's own or OpenAI's (`function.arguments` as JSON text)."""
    function = call.get("function") if isinstance(call.get("function"), Mapping) else {}
    args = call.get("args", function.get("arguments", {}))
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            args = {"arguments": args}
    return {
        "name": str(call.get("name") or function.get("name") or ""),
        "args": dict(args) if isinstance(args, Mapping) else {},
        "id": call.get("id"),
        "type": "tool_call",
    }


def message_from_memoryadmin(*, message: Mapping[str, Any]) -> BaseMessage:
    """The LangChain message for a memoryadmin message (rule L4): the inverse of `message_to_memoryadmin`."""
    native = dict(message[NATIVE_KEY]) if isinstance(message.get(NATIVE_KEY), Mapping) else {}
    role = ROLE_ALIASES.get(str(message.get("role")), "user")
    kind = native.pop("type", TYPE_OF_ROLE[role])
    content = message.get("content")
    data: dict[str, Any] = {**native, "content": "" if content is None else content}
    for key in ("id", "name"):
        if message.get(key) is not None:
            data[key] = message[key]
    calls = message.get("tool_calls")
    if kind == "ai" and isinstance(calls, list):
        data["tool_calls"] = [_tool_call(call) for call in calls if isinstance(call, Mapping)]
    if kind == "tool":
        data["tool_call_id"] = str(message.get("tool_call_id") or "")
    if kind == "function" and "name" not in data:
        data["name"] = ""
    if kind == "chat" and "role" not in data:
        data["role"] = role
    return messages_from_dict([{"type": kind, "data": data}])[0]


__all__ = ["NATIVE_KEY", "message_from_memoryadmin", "message_to_memoryadmin"]
