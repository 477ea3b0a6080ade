"""AgentScope's `Msg` ⇄ memoryadmin's message: the one function pair, `msg_to_message` / `message_to_msg`.

A memoryadmin message is what a person reads in the dashboard and what any
other client understands; what only AgentScope needs rides along under the
`agentscope` key, so that a Msg comes back exactly:

    Msg(id, name, role, content, metadata, timestamp) + its memory marks
      →  {"id", "name", "role", "content": <text>, "tool_calls"?, "tool_call_id"?,
          "metadata", "timestamp", "agentscope"?: {"role"?, "content"?, "marks"?, "invocation_id"?}}

The rules:

M1. `role`: a Msg holding a `tool_result` block (and no `tool_use`) is a `tool`
    message, as AgentScope's formatters send it to a model; every other Msg keeps
    its role (`user`, `assistant`, `system`). When the two differ, the Msg's own
    role is kept as `agentscope.role`.
M2. `content` is the readable text: the text blocks, and the output of tool
    results, joined by newlines. Tool calls (`tool_use` blocks) become
    `tool_calls` ({"id", "name", "args", "type": "tool_call"}, LangChain's and the
    dashboard's shape); a tool message's `tool_call_id` is its first result's id.
    Thinking, image, audio and video blocks add no text.
M3. A Msg whose content is a list of blocks keeps that list, exactly, as
    `agentscope.content`; a string content is `content` itself.
M4. `id`, `name`, `metadata` and `timestamp` are the Msg's, as they are; the
    memory's marks of the Msg are `agentscope.marks`, and an `invocation_id`, if
    the Msg has one, is `agentscope.invocation_id`.
M5. Back, `agentscope` wins where it is present. A message written by another
    client (no `agentscope` key) becomes the Msg AgentScope would have made: a
    `tool` message a `system` Msg with a `tool_result` block, an assistant
    message with `tool_calls` a text block and `tool_use` blocks, `human`/`ai`
    roles `user`/`assistant`, a missing name the role.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from agentscope.message import Msg

NATIVE_KEY = "agentscope"
ROLE_ALIASES = {"human": "user", "ai": "assistant"}
MSG_ROLES = ("user", "assistant", "system")


def output_text(output: Any) -> str:
    """A tool result's output as text: a string as is, the text blocks of a list joined by newlines."""
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        return "\n".join(
            block["text"] for block in output if isinstance(block, Mapping) and isinstance(block.get("text"), str)
        )
    return ""


def readable_text(blocks: Sequence[Mapping[str, Any]]) -> str:
    """The text a person reads in a Msg's blocks (rule M2)."""
    parts = []
    for block in blocks:
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif kind == "tool_result":
            parts.append(output_text(block.get("output")))
    return "\n".join(part for part in parts if part)


def msg_to_message(*, msg: Msg, marks: Sequence[str] = ()) -> dict[str, Any]:
    """The memoryadmin message for `msg` (rules M1–M4); `marks` are the memory's marks of it."""
    blocks = list(msg.get_content_blocks())
    uses = [block for block in blocks if block.get("type") == "tool_use"]
    results = [block for block in blocks if block.get("type") == "tool_result"]
    role = "tool" if results and not uses else msg.role
    message: dict[str, Any] = {
        "id": msg.id,
        "name": msg.name,
        "role": role,
        "content": msg.content if isinstance(msg.content, str) else readable_text(blocks),
    }
    if uses:
        message["tool_calls"] = [
            {"id": use.get("id"), "name": use.get("name"), "args": use.get("input") or {}, "type": "tool_call"}
            for use in uses
        ]
    if role == "tool":
        message["tool_call_id"] = results[0].get("id")
    message["metadata"] = msg.metadata
    message["timestamp"] = msg.timestamp
    native: dict[str, Any] = {}
    if role != msg.role:
        native["role"] = msg.role
    if not isinstance(msg.content, str):
        native["content"] = msg.content
    if marks:
        native["marks"] = list(marks)
    if getattr(msg, "invocation_id", None) is not None:
        native["invocation_id"] = msg.invocation_id
    if native:
        message[NATIVE_KEY] = native
    return message


def _arguments(call: Mapping[str, Any]) -> dict[str, Any]:
    """A tool call's arguments, in LangChain's shape (`args`) or OpenAI's (`function.arguments`, JSON text)."""
    if isinstance(call.get("args"), Mapping):
        return dict(call["args"])
    function = call.get("function") if isinstance(call.get("function"), Mapping) else {}
    arguments = function.get("arguments")
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return {"arguments": arguments}
    return dict(arguments) if isinstance(arguments, Mapping) else {}


def _blocks_of_foreign(*, role: str, message: Mapping[str, Any]) -> tuple[str, str | list[dict[str, Any]]]:
    """The Msg role and content AgentScope would have made for a message another client wrote (rule M5)."""
    content = message.get("content")
    text = content if isinstance(content, str) else None
    if role == "tool":
        output = text if text is not None else output_text(content)
        result = {"type": "tool_result", "id": str(message.get("tool_call_id") or ""), "name": str(message.get("name") or ""), "output": output}
        return "system", [result]
    calls = message.get("tool_calls") if isinstance(message.get("tool_calls"), list) else []
    if calls:
        blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
        if isinstance(content, list):
            blocks = [dict(part) for part in content if isinstance(part, Mapping)]
        for call in calls:
            if isinstance(call, Mapping):
                function = call.get("function") if isinstance(call.get("function"), Mapping) else {}
                blocks.append(
                    {"type": "tool_use", "id": str(call.get("id") or ""), "name": str(call.get("name") or function.get("name") or ""), "input": _arguments(call)}
                )
        return role, blocks
    if isinstance(content, list):
        return role, [part if isinstance(part, dict) else {"type": "text", "text": str(part)} for part in content]
    return role, text or ""


def message_to_msg(*, message: Mapping[str, Any]) -> tuple[Msg, list[str]]:
    """The Msg, and its memory marks, for a memoryadmin message (rule M5): the inverse of `msg_to_message`."""
    native = message.get(NATIVE_KEY) if isinstance(message.get(NATIVE_KEY), Mapping) else {}
    role = ROLE_ALIASES.get(str(message.get("role")), str(message.get("role")))
    if native:
        msg_role = native.get("role", role)
        content = native["content"] if "content" in native else message.get("content") or ""
    else:
        msg_role, content = _blocks_of_foreign(role=role, message=message)
    if msg_role not in MSG_ROLES:
        msg_role = "system" if msg_role == "tool" else "user"
    msg = Msg(
        name=str(message.get("name") or msg_role),
        content=content,
        role=msg_role,
        timestamp=message.get("timestamp"),
        invocation_id=native.get("invocation_id"),
    )
    # Set after construction: Msg() turns a None metadata into {}, and the id is the message's own.
    msg.metadata = message.get("metadata") if "metadata" in message else {}
    if message.get("id") is not None:
        msg.id = message["id"]
    marks = native.get("marks") or []
    return msg, [str(mark) for mark in marks]


def msg_from_state(*, state: Mapping[str, Any]) -> Msg:
    """The Msg a memory's state holds (`Msg.to_dict()`), its metadata as it is (`from_dict` makes None {})."""
    msg = Msg.from_dict(dict(state))
    msg.metadata = state.get("metadata", {})
    return msg


def msg_as_state(*, msg: Msg) -> dict[str, Any]:
    """`msg` as a memory's state holds it (`Msg.to_dict()`), with its `invocation_id`, which `Msg.from_dict` reads."""
    state = msg.to_dict()
    if getattr(msg, "invocation_id", None) is not None:
        state["invocation_id"] = msg.invocation_id
    return state


__all__ = ["NATIVE_KEY", "message_to_msg", "msg_as_state", "msg_from_state", "msg_to_message", "readable_text"]
