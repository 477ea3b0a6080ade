"""LangChain's `add_messages` over the checkpoint wire format, for the server's own state writes.

A checkpoint records channel values, not the reducers the graph merges writes with.
The one reducer the server can tell from the data is LangGraph's `add_messages`, on a
channel that holds LangChain messages; every other channel is taken to be a plain value
that a write replaces (docs/checkpoints.md, "update_state"). Messages are kept in
LangChain's serialised form (`{"lc": 1, "type": "constructor", ...}`), which
`MemoryAdminSaver` revives as message objects.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from memoryadmin.errors import InvalidInput

from sessions_app.checkpoints.wire import lc_envelope, message_list

# LangGraph's `REMOVE_ALL_MESSAGES`: a RemoveMessage with this id drops every earlier message.
REMOVE_ALL = "__remove_all__"
MESSAGES_KEY = "messages"

# Message type (as LangChain's `_create_message_from_message_type` reads a role or type)
# → the class LangChain serialises it as.
CLASSES = {
    "human": "HumanMessage",
    "user": "HumanMessage",
    "ai": "AIMessage",
    "assistant": "AIMessage",
    "system": "SystemMessage",
    "developer": "SystemMessage",
    "tool": "ToolMessage",
    "function": "FunctionMessage",
    "remove": "RemoveMessage",
}
TYPES = {"HumanMessage": "human", "AIMessage": "ai", "SystemMessage": "system", "ToolMessage": "tool",
         "FunctionMessage": "function", "ChatMessage": "chat", "RemoveMessage": "remove"}
# The fields LangChain gives a message of each type; anything else a dict carries goes
# into `additional_kwargs`, as LangChain's own conversion puts it.
COMMON_FIELDS = ("name", "id", "additional_kwargs", "response_metadata")
TYPE_FIELDS = {
    "human": ("example",),
    "ai": ("example", "tool_calls", "invalid_tool_calls", "usage_metadata"),
    "tool": ("tool_call_id", "status", "artifact"),
    "chat": ("role",),
}


def is_message_channel(key: str, current: Any) -> bool:
    """Whether writes to the channel merge by `add_messages`: it holds LangChain messages.

    A channel that has no messages yet counts only under MessagesState's key, `messages`.
    """
    if current in (None, []):
        return key == MESSAGES_KEY
    return message_list(current) is not None and all(lc_envelope(item) for item in current)


def _bad(where: str, message: str) -> InvalidInput:
    return InvalidInput(f"{where} {message}", fields={where: [message]})


def _tool_calls(calls: Any, where: str) -> list[dict[str, Any]]:
    """Tool calls in LangChain's shape; OpenAI's `{"function": {...}}` shape is converted, as LangChain does."""
    if not isinstance(calls, list):
        raise _bad(f"{where}.tool_calls", "must be a list.")
    out = []
    for index, call in enumerate(calls):
        at = f"{where}.tool_calls[{index}]"
        if not isinstance(call, dict):
            raise _bad(at, "must be an object.")
        if isinstance(call.get("function"), dict):
            args = call["function"].get("arguments")
            if isinstance(args, str):
                try:
                    args = json.loads(args)
                except ValueError:
                    raise _bad(f"{at}.function.arguments", "must be JSON.") from None
            call = {"name": call["function"].get("name"), "args": args, "id": call.get("id"), "type": "tool_call"}
        if not isinstance(call.get("name"), str) or not isinstance(call.get("args"), dict):
            raise _bad(at, "needs a name (a string) and args (an object).")
        out.append({"name": call["name"], "args": call["args"], "id": call.get("id"), "type": "tool_call"})
    return out


def to_envelope(value: Any, where: str) -> dict[str, Any]:
    """One message as LangChain serialises it, from what `add_messages` accepts.

    A LangChain envelope, a dict with `role` or `type` and `content` (what the
    LangGraph SDK sends and answers), a `[role, content]` pair or a string (a human
    message). Anything else is a 400 naming `where`.
    """
    envelope = lc_envelope(value)
    if envelope is not None:
        name, kwargs = envelope
        if name not in TYPES:
            raise _bad(where, f"is a {name}, not a message.")
        value = {**kwargs, "type": TYPES[name]}
    if isinstance(value, str):
        value = {"type": "human", "content": value}
    elif isinstance(value, list) and len(value) == 2 and isinstance(value[0], str):
        value = {"type": value[0], "content": value[1]}
    if not isinstance(value, dict):
        raise _bad(where, "must be a message: an object with role (or type) and content.")
    fields = dict(value)
    kind = fields.pop("role", None) or fields.pop("type", None)
    fields.pop("type", None)
    if not isinstance(kind, str) or kind not in CLASSES and kind != "chat":
        raise _bad(where, f"has role {str(kind)[:40]!r}; expected one of {', '.join(sorted(CLASSES))}.")
    kind_type = "chat" if kind == "chat" else TYPES[CLASSES[kind]]
    content = fields.pop("content", "") if kind != "remove" else ""
    if content is None:
        content = ""
    if not isinstance(content, str | list):
        raise _bad(f"{where}.content", "must be a string or a list of content blocks.")
    kwargs: dict[str, Any] = {"content": content, "type": kind_type}
    for key in (*COMMON_FIELDS, *TYPE_FIELDS.get(kind_type, ())):
        if fields.get(key) is not None:
            kwargs[key] = fields.pop(key)
        else:
            fields.pop(key, None)
    if "tool_calls" in kwargs:
        kwargs["tool_calls"] = _tool_calls(kwargs["tool_calls"], where)
    if kind_type == "tool" and not isinstance(kwargs.get("tool_call_id"), str):
        raise _bad(f"{where}.tool_call_id", "is required for a tool message.")
    if kind_type == "chat" and not isinstance(kwargs.get("role"), str):
        raise _bad(f"{where}.role", "is required for a chat message.")
    if kind == "developer":
        fields["__openai_role__"] = "developer"
    if fields:
        kwargs["additional_kwargs"] = {**kwargs.get("additional_kwargs", {}), **fields}
    if kind_type == "remove" and not isinstance(kwargs.get("id"), str):
        raise _bad(f"{where}.id", "is required to remove a message.")
    if "id" in kwargs and not isinstance(kwargs["id"], str):
        raise _bad(f"{where}.id", "must be a string.")
    name = CLASSES.get(kind, "ChatMessage")
    return {"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", name], "kwargs": kwargs}


def _id(envelope: dict[str, Any]) -> str | None:
    value = envelope["kwargs"].get("id")
    return value if isinstance(value, str) and value else None


def add_messages(left: Any, right: Any, *, where: str, new_id=None) -> list[dict[str, Any]]:
    """LangGraph's `add_messages(left, right)` on envelopes: same id replaces, new appends, remove deletes.

    A message without an id gets one from `new_id()` (a uuid4 unless given),
    `RemoveMessage` of `__remove_all__` keeps only what follows it; removing an id
    that is not there is a 400, as LangGraph raises.
    """
    make_id = new_id or (lambda: str(uuid.uuid4()))
    items = right if isinstance(right, list) else [right]
    updates = [to_envelope(item, f"{where}[{index}]") for index, item in enumerate(items)]
    merged = [dict(item, kwargs=dict(item["kwargs"])) for item in (left if isinstance(left, list) else [])]
    for item in merged + updates:
        if _id(item) is None:
            item["kwargs"]["id"] = make_id()
    for index in range(len(updates) - 1, -1, -1):
        if updates[index]["id"][-1] == "RemoveMessage" and _id(updates[index]) == REMOVE_ALL:
            return updates[index + 1 :]
    position = {_id(item): index for index, item in enumerate(merged)}
    removed: set[str] = set()
    for index, item in enumerate(updates):
        key = _id(item)
        if item["id"][-1] == "RemoveMessage":
            if key not in position:
                raise _bad(f"{where}[{index}]", f"removes message {key!r}, which is not in the state.")
            removed.add(key)
        elif key in position:
            removed.discard(key)
            merged[position[key]] = item
        else:
            position[key] = len(merged)
            merged.append(item)
    return [item for item in merged if _id(item) not in removed]
