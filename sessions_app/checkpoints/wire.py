"""Reading the checkpoint wire format (docs/checkpoints.md), as plain JSON.

A checkpoint is JSON. A channel value that LangGraph's serializer can express as JSON is
stored as that JSON, LangChain messages as LangChain's own serialised form (`{"lc": 1,
"type": "constructor", "id": [..., "AIMessage"], "kwargs": {...}}`), a few LangGraph types
in the `{"lc": 2, ...}` constructor form; anything else is a typed blob `{"$blob": {"type":
"msgpack", "base64": "..."}}` that only the client decodes. The server never decodes a
blob: it reads envelopes as plain JSON for display.
"""

from __future__ import annotations


from dataclasses import dataclass, field
from typing import Any



from memoryadmin.json import DEEP_MARKER
from memoryadmin.jsoncheck import SHOWN_DEPTH_MAX

from ..threads.messages import ROLE_ALIASES, content_text


# LangGraph's special write channels and the indexes they take (langgraph.checkpoint.base
# WRITES_IDX_MAP). Kept here so the server does not depend on LangGraph; a test checks
# they agree with the installed library.
ERROR = "__error__"
SCHEDULED = "__scheduled__"
INTERRUPT = "__interrupt__"
RESUME = "__resume__"
WRITES_IDX_MAP = {ERROR: -1, SCHEDULED: -2, INTERRUPT: -3, RESUME: -4}
# The rest of what a reader of LangGraph's tasks needs (langgraph._internal._constants):
# the channel of pending `Send` packets, the two kinds of task, the task of writes that
# belong to no task, and the writes that say what happened to a task, not what it wrote.
TASKS = "__pregel_tasks"
PUSH = "__pregel_push"
PULL = "__pregel_pull"
NULL_TASK_ID = "00000000-0000-0000-0000-000000000000"
RETURN = "__return__"
ERROR_SOURCE_NODE = "__error_source_node__"
CONTROL_WRITES = frozenset({ERROR, ERROR_SOURCE_NODE, INTERRUPT, RESUME})
NS_SEP = "|"
NS_END = ":"

BLOB_KEY = "$blob"

MESSAGE_TYPES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool", "function": "tool", "chat": "assistant"}

# --- reading the wire format ----------------------------------------------------------------


def is_blob(value: Any) -> bool:
    return isinstance(value, dict) and len(value) == 1 and isinstance(value.get(BLOB_KEY), dict)


def blob_label(value: dict[str, Any]) -> str:
    """A blob as the dashboard names it: its serializer type and size, never its bytes."""
    inner = value[BLOB_KEY]
    data = inner.get("base64") if isinstance(inner.get("base64"), str) else ""
    size = len(data) * 3 // 4 - data[-2:].count("=") if data else 0
    return f"binary value ({inner.get('type', '?')}, {size} bytes)"


def lc_envelope(value: Any) -> tuple[str, dict[str, Any]] | None:
    """(class name, kwargs) of a LangChain/LangGraph constructor envelope, else None."""
    if not isinstance(value, dict) or value.get("lc") not in (1, 2) or value.get("type") != "constructor":
        return None
    ident = value.get("id")
    if not isinstance(ident, list) or not ident or not all(isinstance(part, str) for part in ident):
        return None
    kwargs = value.get("kwargs")
    if not isinstance(kwargs, dict):
        args = value.get("args")
        kwargs = {"args": args} if isinstance(args, list) else {}
    return ident[-1], kwargs


@dataclass(frozen=True)
class MessageView:
    role: str
    content: str
    type: str = ""
    name: str = ""
    id: str = ""
    tool_call_id: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)

    @property
    def key(self) -> str:
        """Identity of a message across checkpoints: its id, else its role and text."""
        return self.id or f"{self.role}:{self.content}"


def _role_of(kind: str) -> str:
    base = kind[: -len("MessageChunk")].lower() if kind.endswith("MessageChunk") else kind.lower()
    return ROLE_ALIASES.get(base) or MESSAGE_TYPES.get(base) or base


def message_view(value: Any) -> MessageView | None:
    """A LangChain message envelope or a role/content dict as role and text, else None."""
    envelope = lc_envelope(value)
    if envelope is not None:
        name, message = envelope
        if not name.endswith(("Message", "MessageChunk")):
            return None
        kind = message.get("type") if isinstance(message.get("type"), str) else name
    elif isinstance(value, dict) and "content" in value:
        kind = value.get("role") or value.get("type")
        if not isinstance(kind, str) or kind.lower() not in ROLE_ALIASES.keys() | MESSAGE_TYPES.keys():
            return None
        message = value
    else:
        return None
    role = _role_of(kind)
    if role == "assistant" and kind.lower() == "chat" and isinstance(message.get("role"), str):
        role = message["role"]
    content = message.get("content")
    calls = message.get("tool_calls")
    return MessageView(
        role=role,
        content=content_text(content) if isinstance(content, str | list) else "",
        type=kind,
        name=message.get("name") if isinstance(message.get("name"), str) else "",
        id=message.get("id") if isinstance(message.get("id"), str) else "",
        tool_call_id=message.get("tool_call_id") if isinstance(message.get("tool_call_id"), str) else "",
        tool_calls=[call for call in calls if isinstance(call, dict)] if isinstance(calls, list) else [],
    )


def message_list(value: Any) -> list[MessageView] | None:
    """The value as a list of messages when it is one (a non-empty list of messages only)."""
    if not isinstance(value, list) or not value:
        return None
    views = [message_view(item) for item in value]
    if any(view is None for view in views):
        return None
    return views  # type: ignore[return-value]


def readable(value: Any, _depth: int = 0) -> Any:
    """The value for display: envelopes shown as `{ClassName: fields}`, blobs by type and size.

    Depth-bounded: past SHOWN_DEPTH_MAX levels the rest is DEEP_MARKER, so the recursion
    stays within the stack whatever the value (stored ones are already cut there).
    """
    if _depth >= SHOWN_DEPTH_MAX and isinstance(value, dict | list):
        return DEEP_MARKER
    if is_blob(value):
        return f"<{blob_label(value)}>"
    envelope = lc_envelope(value)
    if envelope is not None:
        name, kwargs = envelope
        return {name: readable(kwargs, _depth + 1)}
    if isinstance(value, dict):
        return {key: readable(item, _depth + 1) for key, item in value.items()}
    if isinstance(value, list):
        return [readable(item, _depth + 1) for item in value]
    return value


def plain(value: Any, _depth: int = 0) -> Any:
    """The value in the LangGraph server's JSON shape: envelopes become their fields.

    A LangChain message comes out as `{"content", "type", "id", ...}`, as
    `langgraph-sdk` clients expect it; blobs stay blobs (only a client can open them).
    Depth-bounded as `readable` is.
    """
    if _depth >= SHOWN_DEPTH_MAX and isinstance(value, dict | list):
        return DEEP_MARKER
    if is_blob(value):
        return value
    envelope = lc_envelope(value)
    if envelope is not None:
        return plain(envelope[1], _depth + 1)
    if isinstance(value, dict):
        return {key: plain(item, _depth + 1) for key, item in value.items()}
    if isinstance(value, list):
        return [plain(item, _depth + 1) for item in value]
    return value


def is_internal_channel(name: str) -> bool:
    """LangGraph's bookkeeping channels (entry, branch triggers, task queues), not state keys."""
    return name.startswith("__") or name.startswith(("branch:", "start:", "join:", "split:"))


def state_channels(checkpoint: Any) -> dict[str, Any]:
    values = checkpoint.get("channel_values") if isinstance(checkpoint, dict) else None
    if not isinstance(values, dict):
        return {}
    return {name: value for name, value in values.items() if not is_internal_channel(name)}


def state_values(checkpoint: Any) -> dict[str, Any]:
    """A checkpoint's state in LangGraph's `values` shape (state keys only)."""
    return {name: plain(value) for name, value in state_channels(checkpoint).items()}
