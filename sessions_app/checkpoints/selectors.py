"""Reads of checkpoints and pending writes, and the readers of their wire format.

Every selector takes the acting user and decides visibility through
`thread_get_for_read` (owner, or an operator/admin who reads everything).

The wire format (docs/checkpoints.md): a checkpoint is JSON. A channel value that
LangGraph's serializer can express as JSON is stored as that JSON, LangChain
messages as LangChain's own serialised form (`{"lc": 1, "type": "constructor",
"id": [..., "AIMessage"], "kwargs": {...}}`), a few LangGraph types in the
`{"lc": 2, ...}` constructor form; anything else is a typed blob
`{"$blob": {"type": "msgpack", "base64": "..."}}` that only the client decodes.
The server never decodes a blob: it reads envelopes as plain JSON for display.
"""

from __future__ import annotations

import hashlib
import json
import re

import orjson
from dataclasses import dataclass, field
from typing import Any

from django.db import connection
from django.db.models import Case, Count, Exists, IntegerField, JSONField, OuterRef, Q, QuerySet, Subquery, Value, When
from django.db.models.fields.json import KeyTransform
from django.db.models.functions import Coalesce

from memoryadmin.errors import InvalidInput, NotFound
from memoryadmin.jsoncheck import json_storage_problem

from .messages import ROLE_ALIASES, content_text
from .models import Checkpoint, CheckpointWrite, Thread
from .selectors import thread_get_for_read

# LangGraph's special write channels and the indexes they take (langgraph.checkpoint.base
# WRITES_IDX_MAP). Kept here so the server does not depend on LangGraph; a test checks
# they agree with the installed library.
ERROR = "__error__"
SCHEDULED = "__scheduled__"
INTERRUPT = "__interrupt__"
RESUME = "__resume__"
WRITES_IDX_MAP = {ERROR: -1, SCHEDULED: -2, INTERRUPT: -3, RESUME: -4}

BLOB_KEY = "$blob"
CHECKPOINT_ID_RE = re.compile(r"^[A-Za-z0-9_.:@$+=~-]{1,128}$")
# `GET .../checkpoints/latest` is the latest checkpoint, so no checkpoint may be called that.
RESERVED_CHECKPOINT_IDS = frozenset({"latest"})
CHECKPOINT_NS_MAX = 512
LIST_LIMIT_DEFAULT = 100
LIST_LIMIT_MAX = 1000
TIMELINE_PAGE = 50

MESSAGE_TYPES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool", "function": "tool", "chat": "assistant"}


# --- input checks shared by the API and the pages -------------------------------------------


def checkpoint_id_validate(value: Any, field_name: str = "checkpoint_id") -> str:
    if not isinstance(value, str) or not CHECKPOINT_ID_RE.match(value):
        message = "must be 1 to 128 characters of A-Z a-z 0-9 _ . : @ $ + = ~ -"
        raise InvalidInput(f"{field_name} {message}", fields={field_name: [message]})
    if value in RESERVED_CHECKPOINT_IDS:
        message = f"{value!r} is reserved (it names an endpoint)."
        raise InvalidInput(f"{field_name} {message}", fields={field_name: [message]})
    return value


def checkpoint_ns_validate(value: Any, field_name: str = "checkpoint_ns") -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InvalidInput(f"{field_name} must be a string.", fields={field_name: ["must be a string."]})
    if len(value) > CHECKPOINT_NS_MAX or any(ord(ch) < 32 for ch in value):
        message = f"at most {CHECKPOINT_NS_MAX} printable characters."
        raise InvalidInput(f"{field_name} must be {message}", fields={field_name: [message]})
    return value


def parse_limit(value: Any, *, default: int = LIST_LIMIT_DEFAULT, maximum: int = LIST_LIMIT_MAX, field_name: str = "limit") -> int:
    """An integer from 1 to `maximum`; `default` when absent (None). Anything else is a 400."""
    if value is None:
        return default
    try:
        number = int(value)
    except (TypeError, ValueError):
        number = 0
    if isinstance(value, bool) or number < 1 or number > maximum:
        message = f"must be an integer from 1 to {maximum}."
        raise InvalidInput(f"{field_name} {message}", fields={field_name: [message]})
    return number


def parse_json_object(value: Any, field_name: str) -> dict[str, Any]:
    """A JSON object given as a query-string value or already parsed; {} when absent (None)."""
    if value is None:
        return {}
    if isinstance(value, str):
        try:
            # orjson, as the API's parser: no NaN, no infinity, no lone surrogate.
            value = orjson.loads(value)
        except orjson.JSONDecodeError:
            raise InvalidInput(f"{field_name} is not valid JSON.", fields={field_name: ["is not valid JSON."]}) from None
    if not isinstance(value, dict):
        raise InvalidInput(f"{field_name} must be a JSON object.", fields={field_name: ["must be a JSON object."]})
    problem = json_storage_problem(value)
    if problem:
        raise InvalidInput(f"{field_name} {problem}.", fields={field_name: [f"{problem}."]})
    return value


def parse_choice(value: Any, field_name: str, choices, default: str) -> str:
    """One of `choices`; `default` when absent (None)."""
    if value is None:
        return default
    if not isinstance(value, str) or value not in choices:
        message = f"must be one of {', '.join(sorted(choices))}."
        raise InvalidInput(f"{field_name} {message}", fields={field_name: [message]})
    return value


def parse_offset(value: Any, maximum: int = 1_000_000) -> int:
    if value is None:
        return 0
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= maximum:
        message = f"must be an integer from 0 to {maximum}."
        raise InvalidInput(f"offset {message}", fields={"offset": [message]})
    return value


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


def readable(value: Any) -> Any:
    """The value for display: envelopes shown as `{ClassName: fields}`, blobs by type and size."""
    if is_blob(value):
        return f"<{blob_label(value)}>"
    envelope = lc_envelope(value)
    if envelope is not None:
        name, kwargs = envelope
        return {name: readable(kwargs)}
    if isinstance(value, dict):
        return {key: readable(item) for key, item in value.items()}
    if isinstance(value, list):
        return [readable(item) for item in value]
    return value


def plain(value: Any) -> Any:
    """The value in the LangGraph server's JSON shape: envelopes become their fields.

    A LangChain message comes out as `{"content", "type", "id", ...}`, as
    `langgraph-sdk` clients expect it; blobs stay blobs (only a client can open them).
    """
    if is_blob(value):
        return value
    envelope = lc_envelope(value)
    if envelope is not None:
        return plain(envelope[1])
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [plain(item) for item in value]
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


# --- graph position: which node wrote a checkpoint, which runs next ------------------------------


def _version_key(version: Any) -> tuple[float, str]:
    if isinstance(version, bool):
        return (float(version), "")
    if isinstance(version, int | float):
        return (float(version), "")
    text = str(version)
    try:
        return (float(text.split(".")[0]), text)
    except ValueError:
        return (0.0, text)


def _trigger_node(channel: str) -> str | None:
    if channel == "__start__":
        return "__start__"
    if channel.startswith("branch:to:"):
        return channel[len("branch:to:"):]
    return None


def next_nodes(checkpoint: Any) -> list[str]:
    """Nodes a LangGraph checkpoint will run next: those whose trigger channel moved past what they saw.

    LangGraph triggers a node by writing its `branch:to:<node>` channel (and the
    entry node by `__start__`); a node is due when that channel holds a value
    whose version is newer than the one recorded in `versions_seen[node]`.
    """
    if not isinstance(checkpoint, dict):
        return []
    versions, seen = checkpoint.get("channel_versions"), checkpoint.get("versions_seen")
    values = checkpoint.get("channel_values")
    if not isinstance(versions, dict) or not isinstance(seen, dict) or not isinstance(values, dict):
        return []
    due = []
    for channel, version in versions.items():
        node = _trigger_node(channel)
        # A consumed trigger is cleared from the values (its version still moves on).
        if node is None or channel not in values:
            continue
        node_seen = seen.get(node) if isinstance(seen.get(node), dict) else {}
        if channel not in node_seen or _version_key(node_seen[channel]) < _version_key(version):
            due.append(node)
    return sorted(set(due))


def nodes_run(versions_seen: Any, parent_versions_seen: Any) -> list[str]:
    """Nodes that ran between the parent and this checkpoint: their `versions_seen` changed."""
    if not isinstance(versions_seen, dict):
        return []
    before = parent_versions_seen if isinstance(parent_versions_seen, dict) else {}
    # versions_seen also tracks interrupts already raised, under a key that is not a node.
    return sorted(node for node, seen in versions_seen.items() if node != INTERRUPT and before.get(node) != seen)


def is_langgraph_checkpoint(checkpoint: Any) -> bool:
    return (
        isinstance(checkpoint, dict)
        and isinstance(checkpoint.get("channel_versions"), dict)
        and isinstance(checkpoint.get("versions_seen"), dict)
    )


# --- JSON containment: PostgreSQL's @>, and the same rule on SQLite -----------------------------


def json_contains(document: Any, pattern: Any) -> bool:
    """PostgreSQL's `jsonb @>` rule: objects by key, arrays by element (any order), scalars by value and type."""
    if isinstance(pattern, dict):
        return isinstance(document, dict) and all(
            key in document and json_contains(document[key], item) for key, item in pattern.items()
        )
    if isinstance(pattern, list):
        return isinstance(document, list) and all(any(json_contains(d, p) for d in document) for p in pattern)
    if isinstance(pattern, bool) or isinstance(document, bool):
        return type(pattern) is type(document) and pattern == document
    if isinstance(pattern, int | float) and isinstance(document, int | float):
        return pattern == document
    return type(pattern) is type(document) and pattern == document


def _scalar_paths(pattern: dict[str, Any], prefix: tuple[str, ...] = ()):
    """(path, value) for the string and number leaves of a pattern.

    Only these narrow rows in SQL on SQLite: its `json_extract` compares them
    faithfully, while booleans and null are read back differently and arrays not
    at all, so those are left to the exact check in Python (which can only drop
    rows, never find ones SQL left out).
    """
    for key, item in pattern.items():
        if not SAFE_JSON_KEY.match(key):
            continue  # not worth quoting into a JSON path: left to the exact check
        path = (*prefix, key)
        if isinstance(item, dict):
            yield from _scalar_paths(item, path)
        elif isinstance(item, str) or (isinstance(item, int | float) and not isinstance(item, bool) and abs(item) < 2**63):
            yield path, item


SAFE_JSON_KEY = re.compile(r"^[A-Za-z0-9_-]{1,100}$")


def json_filter(qs: QuerySet, field_name: str, pattern: dict[str, Any]) -> tuple[QuerySet, bool]:
    """Filter `qs` to rows whose JSON field contains `pattern`.

    PostgreSQL answers with JSONB containment (`@>`) in one clause. SQLite has no
    containment operator: there the scalar leaves of the pattern narrow the rows
    in SQL (`json_extract` equality) and the caller must finish with
    `json_contains` in Python (the second value says so), which also settles
    what SQLite blurs (`true` equals `1` there, arrays are not compared).
    """
    if not pattern:
        return qs, False
    if connection.vendor == "postgresql":
        return qs.filter(**{f"{field_name}__contains": pattern}), False
    for path, item in _scalar_paths(pattern):
        expression: Any = field_name
        for key in path:
            expression = KeyTransform(key, expression)
        qs = qs.filter(expression.get_lookup("exact")(expression, Value(item, output_field=JSONField())))
    return qs, True


def _apply_exact(qs: QuerySet, attr: str, pattern: dict[str, Any], limit: int | None):
    """The rows of `qs` whose `attr` contains `pattern`, up to `limit`, read in chunks (SQLite's path)."""
    kept = []
    for row in qs.iterator(chunk_size=200):
        if json_contains(getattr(row, attr), pattern):
            kept.append(row)
            if limit is not None and len(kept) >= limit:
                break
    return kept


# --- the API shape of a checkpoint ---------------------------------------------------------------


def write_as_dict(write: CheckpointWrite) -> dict[str, Any]:
    return {
        "task_id": write.task_id,
        "task_path": write.task_path,
        "idx": write.idx,
        "channel": write.channel,
        "value": write.value,
    }


def checkpoint_as_dict(checkpoint: Checkpoint, *, thread: Thread | None = None) -> dict[str, Any]:
    """A checkpoint as the API answers it (DESIGN §9); its writes attached by `attach_writes`."""
    thread = thread or checkpoint.thread
    return {
        "thread_id": thread.thread_id,
        "checkpoint_ns": checkpoint.checkpoint_ns,
        "checkpoint_id": checkpoint.checkpoint_id,
        "parent_checkpoint_id": checkpoint.parent_checkpoint_id or None,
        "checkpoint": checkpoint.checkpoint,
        "metadata": checkpoint.metadata,
        "node_id": checkpoint.node_id,
        "next_node_id": checkpoint.next_node_id,
        "pending_writes": [write_as_dict(write) for write in checkpoint.pending],
        "created_at": checkpoint.created_at,
        "updated_at": checkpoint.updated_at,
    }


def attach_writes(rows: list[Checkpoint]) -> list[Checkpoint]:
    """Give each checkpoint its pending writes as `.pending`, in LangGraph's replay order: one query."""
    if not rows:
        return rows
    by_key: dict[tuple[int, str, str], list[CheckpointWrite]] = {}
    writes = CheckpointWrite.objects.filter(
        thread_id__in={row.thread_id for row in rows}, checkpoint_id__in={row.checkpoint_id for row in rows}
    ).order_by("task_path", "task_id", "idx")
    for write in writes:
        by_key.setdefault((write.thread_id, write.checkpoint_ns, write.checkpoint_id), []).append(write)
    for row in rows:
        row.pending = by_key.get((row.thread_id, row.checkpoint_ns, row.checkpoint_id), [])
    return rows


def writes_of(outer: str = "") -> QuerySet[CheckpointWrite]:
    """Pending writes of the checkpoint an outer query names (`outer` prefixes its field names)."""
    return CheckpointWrite.objects.filter(
        thread=OuterRef(f"{outer}thread"),
        checkpoint_ns=OuterRef(f"{outer}checkpoint_ns"),
        checkpoint_id=OuterRef(f"{outer}checkpoint_id"),
    )


def checkpoints_of(thread: Thread) -> list[Checkpoint]:
    """Every checkpoint of a thread (all namespaces) with its writes, newest first."""
    rows = list(Checkpoint.objects.filter(thread=thread).order_by("-id"))
    for row in rows:
        row.thread = thread
    return attach_writes(rows)


# --- reads ---------------------------------------------------------------------------------------


@dataclass
class CheckpointPage:
    thread: Thread
    checkpoints: list[Checkpoint]
    has_more: bool

    @property
    def next_before(self) -> str | None:
        return self.checkpoints[-1].checkpoint_id if self.has_more and self.checkpoints else None


def _before_pk(thread: Thread, before: str, checkpoint_ns: str | None) -> int:
    checkpoint_id_validate(before, "before")
    qs = Checkpoint.objects.filter(thread=thread, checkpoint_id=before)
    if checkpoint_ns is not None:
        qs = qs.filter(checkpoint_ns=checkpoint_ns)
    pk = qs.order_by("checkpoint_ns").values_list("pk", flat=True).first()
    if pk is None:
        raise NotFound(f"Checkpoint {before!r} (given as before) does not exist in this thread.")
    return pk


def checkpoint_list(
    *,
    actor,
    thread_id: str,
    checkpoint_ns: str | None = None,
    limit: int = LIST_LIMIT_DEFAULT,
    before: str | None = None,
    metadata: dict[str, Any] | None = None,
) -> CheckpointPage:
    """A thread's checkpoints, newest first, with their pending writes.

    `checkpoint_ns` None lists every namespace (LangGraph's list without a
    namespace); `before` is a checkpoint id: only older checkpoints are listed;
    `metadata` keeps the checkpoints whose metadata contains it.
    """
    thread = thread_get_for_read(actor=actor, thread_id=thread_id)
    qs = Checkpoint.objects.filter(thread=thread)
    if checkpoint_ns is not None:
        qs = qs.filter(checkpoint_ns=checkpoint_ns)
    if before:
        qs = qs.filter(pk__lt=_before_pk(thread, before, checkpoint_ns))
    qs, exact_in_python = json_filter(qs, "metadata", metadata or {})
    qs = qs.order_by("-id")
    if exact_in_python:
        rows = _apply_exact(qs, "metadata", metadata or {}, limit + 1)
    else:
        rows = list(qs[: limit + 1])
    more = len(rows) > limit
    rows = rows[:limit]
    for row in rows:
        row.thread = thread
    return CheckpointPage(thread=thread, checkpoints=attach_writes(rows), has_more=more)


def checkpoint_get(*, actor, thread_id: str, checkpoint_id: str | None = None, checkpoint_ns: str = "") -> Checkpoint:
    """One checkpoint with its pending writes: by id, or the latest of the namespace; 404 if none."""
    thread = thread_get_for_read(actor=actor, thread_id=thread_id)
    return checkpoint_get_in(thread=thread, checkpoint_id=checkpoint_id, checkpoint_ns=checkpoint_ns)


def checkpoint_etag(checkpoint: Checkpoint) -> str:
    """A strong entity tag of one checkpoint, for If-Match on its replacement.

    It changes whenever the checkpoint is replaced in place (PUT, or a POST with
    its id), since that saves the row and so moves updated_at; pending writes
    stored against it leave it as it is (a replacement does not touch them).
    """
    version = f"checkpoint:{checkpoint.pk}:{checkpoint.updated_at.isoformat()}"
    return '"' + hashlib.sha256(version.encode()).hexdigest()[:24] + '"'


def checkpoint_get_in(*, thread: Thread, checkpoint_id: str | None = None, checkpoint_ns: str = "") -> Checkpoint:
    qs = Checkpoint.objects.filter(thread=thread, checkpoint_ns=checkpoint_ns)
    if checkpoint_id is not None:
        checkpoint_id_validate(checkpoint_id)
        found = qs.filter(checkpoint_id=checkpoint_id).first()
        if found is None:
            raise NotFound(f"Checkpoint {checkpoint_id!r} does not exist in thread {thread.thread_id!r}.")
    else:
        found = qs.order_by("-id").first()
        if found is None:
            raise NotFound(f"Thread {thread.thread_id!r} has no checkpoint yet.")
    found.thread = thread
    return attach_writes([found])[0]


# --- LangGraph's thread shapes -------------------------------------------------------------------


def _config(thread_id: str, checkpoint_ns: str, checkpoint_id: str | None) -> dict[str, Any] | None:
    if not checkpoint_id:
        return None
    return {"thread_id": thread_id, "checkpoint_ns": checkpoint_ns, "checkpoint_id": checkpoint_id, "checkpoint_map": None}


def interrupts_of(writes) -> list[dict[str, Any]]:
    """Interrupts raised against a checkpoint, as `{"value", "id"}` (LangGraph's Interrupt shape)."""
    found = []
    for write in writes:
        if write.channel != INTERRUPT:
            continue
        items = write.value if isinstance(write.value, list) else [write.value]
        for item in items:
            envelope = lc_envelope(item)
            fields = envelope[1] if envelope else {"value": item}
            found.append({"value": plain(fields.get("value")), "id": str(fields.get("id") or write.task_id)})
    return found


def status_of(*, next_node_id: str, has_error: bool, has_interrupt: bool) -> str:
    """LangGraph's thread status, read from the latest checkpoint.

    memoryadmin runs no graph, so it cannot say "busy": a pending error write
    means "error", a pending interrupt or nodes still due mean "interrupted"
    (the graph stopped before finishing), anything else "idle".
    """
    if has_error:
        return "error"
    if has_interrupt or next_node_id:
        return "interrupted"
    return "idle"


def checkpoint_state(checkpoint: Checkpoint, *, thread: Thread) -> dict[str, Any]:
    """A checkpoint as LangGraph's ThreadState (`GET /threads/{id}/state`, history entries)."""
    writes = checkpoint.pending
    interrupts = interrupts_of(writes)
    errors = [write for write in writes if write.channel == ERROR]
    nexts = [node for node in checkpoint.next_node_id.split(",") if node]
    task_ids = sorted({write.task_id for write in writes if write.channel in (INTERRUPT, ERROR)})
    tasks = []
    for node in nexts:
        # Task ids live in the graph runtime; one is known only when a single task is due.
        task_id = task_ids[0] if len(nexts) == 1 and len(task_ids) == 1 else ""
        error = errors[0].value if len(nexts) == 1 and errors else None
        tasks.append(
            {
                "id": task_id,
                "name": node,
                "path": [],
                "error": readable(error) if error is not None else None,
                "interrupts": interrupts if len(nexts) == 1 else [],
                "checkpoint": None,
                "state": None,
                "result": None,
            }
        )
    return {
        "values": state_values(checkpoint.checkpoint),
        "next": nexts,
        "tasks": tasks,
        "checkpoint": _config(thread.thread_id, checkpoint.checkpoint_ns, checkpoint.checkpoint_id),
        "metadata": checkpoint.metadata,
        "created_at": checkpoint.created_at.isoformat(),
        "parent_checkpoint": _config(thread.thread_id, checkpoint.checkpoint_ns, checkpoint.parent_checkpoint_id),
        "interrupts": interrupts,
    }


def _empty_state(thread: Thread) -> dict[str, Any]:
    return {
        "values": {},
        "next": [],
        "tasks": [],
        "checkpoint": {"thread_id": thread.thread_id, "checkpoint_ns": "", "checkpoint_id": None, "checkpoint_map": None},
        "metadata": {},
        "created_at": None,
        "parent_checkpoint": None,
        "interrupts": [],
    }


def thread_state(*, actor, thread_id: str, checkpoint_id: str | None = None, checkpoint_ns: str = "") -> dict[str, Any]:
    """LangGraph's `GET /threads/{id}/state[/{checkpoint_id}]`: an empty state before the first checkpoint."""
    thread = thread_get_for_read(actor=actor, thread_id=thread_id)
    try:
        checkpoint = checkpoint_get_in(thread=thread, checkpoint_id=checkpoint_id, checkpoint_ns=checkpoint_ns)
    except NotFound:
        if checkpoint_id is not None:
            raise
        return _empty_state(thread)
    return checkpoint_state(checkpoint, thread=thread)


def thread_history(
    *, actor, thread_id: str, limit: int = 10, before: str | None = None, metadata: dict | None = None, checkpoint_ns: str = ""
) -> list[dict[str, Any]]:
    """LangGraph's `POST /threads/{id}/history`: states newest first (one namespace, root by default)."""
    page = checkpoint_list(
        actor=actor, thread_id=thread_id, checkpoint_ns=checkpoint_ns, limit=limit, before=before, metadata=metadata
    )
    return [checkpoint_state(checkpoint, thread=page.thread) for checkpoint in page.checkpoints]


def _latest_root(thread_ref) -> QuerySet:
    return Checkpoint.objects.filter(thread=thread_ref, checkpoint_ns="").order_by("-id")


def thread_latest(thread: Thread) -> dict[str, Any]:
    """Checkpoint count, state values and status of a thread in ONE query.

    The latest root-namespace checkpoint comes first (any namespace when the
    thread has no root checkpoint), annotated with the thread's total count and
    whether an error or an interrupt is pending against it.
    """
    count = (
        Checkpoint.objects.filter(thread=thread).order_by().values("thread").annotate(n=Count("id")).values("n")
    )
    writes = writes_of()
    row = (
        Checkpoint.objects.filter(thread=thread)
        .annotate(
            total=Coalesce(Subquery(count[:1]), Value(0)),
            has_error=Exists(writes.filter(channel=ERROR)),
            has_interrupt=Exists(writes.filter(channel=INTERRUPT)),
            root_first=Case(When(checkpoint_ns="", then=Value(0)), default=Value(1), output_field=IntegerField()),
        )
        .order_by("root_first", "-id")
        .first()
    )
    if row is None:
        return {"checkpoints": 0, "values": {}, "status": "idle", "latest": None}
    root = row.checkpoint_ns == ""
    return {
        "checkpoints": row.total,
        "values": state_values(row.checkpoint) if root else {},
        "status": status_of(next_node_id=row.next_node_id, has_error=row.has_error, has_interrupt=row.has_interrupt)
        if root
        else "idle",
        "latest": row,
    }


SEARCH_SORT_FIELDS = {"thread_id", "status", "created_at", "updated_at"}
THREAD_STATUSES = ("idle", "busy", "interrupted", "error")


def threads_with_status(qs: QuerySet[Thread]) -> QuerySet[Thread]:
    """Threads annotated with their latest root checkpoint, its status and their checkpoint count."""
    latest = _latest_root(OuterRef("pk"))
    writes = CheckpointWrite.objects.filter(
        thread=OuterRef("pk"), checkpoint_ns="", checkpoint_id=OuterRef("latest_checkpoint_id")
    )
    count = (
        Checkpoint.objects.filter(thread=OuterRef("pk")).order_by().values("thread").annotate(n=Count("id")).values("n")
    )
    return qs.annotate(
        latest_checkpoint=Subquery(latest.values("pk")[:1]),
        latest_checkpoint_id=Subquery(latest.values("checkpoint_id")[:1]),
        latest_next=Subquery(latest.values("next_node_id")[:1]),
        checkpoint_count=Coalesce(Subquery(count[:1]), Value(0)),
    ).annotate(
        latest_error=Exists(writes.filter(channel=ERROR)),
        latest_interrupt=Exists(writes.filter(channel=INTERRUPT)),
    ).annotate(
        lg_status=Case(
            When(latest_error=True, then=Value("error")),
            When(Q(latest_interrupt=True) | Q(latest_next__gt=""), then=Value("interrupted")),
            default=Value("idle"),
        )
    )


def thread_search(
    *,
    actor,
    metadata: dict[str, Any] | None = None,
    ids: list[str] | None = None,
    status: str | None = None,
    limit: int = 10,
    offset: int = 0,
    sort_by: str = "created_at",
    sort_order: str = "desc",
) -> list[dict[str, Any]]:
    """LangGraph's `POST /threads/search` over the threads the actor may see (constant queries)."""
    qs = threads_with_status(Thread.objects.visible_to(actor).select_related("owner"))
    if ids:
        qs = qs.filter(thread_id__in=ids)
    if status:
        qs = qs.filter(lg_status=status)
    qs, exact_in_python = json_filter(qs, "metadata", metadata or {})
    order = "lg_status" if sort_by == "status" else sort_by
    prefix = "-" if sort_order == "desc" else ""
    qs = qs.order_by(f"{prefix}{order}", f"{prefix}id")
    if exact_in_python:
        threads = _apply_exact(qs, "metadata", metadata or {}, offset + limit)[offset:]
    else:
        threads = list(qs[offset : offset + limit])
    return threads_as_langgraph(threads)


def threads_as_langgraph(threads: list[Thread]) -> list[dict[str, Any]]:
    """Threads (annotated by `threads_with_status`) in LangGraph's Thread shape, two more queries at most."""
    latest_ids = [thread.latest_checkpoint for thread in threads if thread.latest_checkpoint]
    latest = {}
    if latest_ids:
        # By thread as well as by id: each row is looked up in its own thread's partition.
        in_threads = [thread.pk for thread in threads if thread.latest_checkpoint]
        rows = attach_writes(list(Checkpoint.objects.filter(thread_id__in=in_threads, pk__in=latest_ids).defer("metadata")))
        latest = {row.pk: row for row in rows}
    out = []
    for thread in threads:
        row = latest.get(thread.latest_checkpoint)
        out.append(
            thread_as_langgraph(
                thread,
                values=state_values(row.checkpoint) if row else {},
                status=thread.lg_status,
                interrupts=_interrupts_by_task(row.pending) if row else {},
                checkpoints=thread.checkpoint_count,
            )
        )
    return out


def _interrupts_by_task(writes) -> dict[str, list[dict[str, Any]]]:
    by_task: dict[str, list[dict[str, Any]]] = {}
    for write in writes:
        if write.channel == INTERRUPT:
            by_task.setdefault(write.task_id, []).extend(interrupts_of([write]))
    return by_task


def thread_as_langgraph(thread: Thread, *, values, status, interrupts, checkpoints: int) -> dict[str, Any]:
    """LangGraph's Thread fields, plus memoryadmin's own (owner, agent, counts)."""
    return {
        "thread_id": thread.thread_id,
        "created_at": thread.created_at,
        "updated_at": thread.updated_at,
        "metadata": thread.metadata,
        "status": status,
        "values": values,
        "interrupts": interrupts,
        "owner": thread.owner.get_username(),
        "agent_code": thread.agent_code,
        "title": thread.title,
        "active_blocks": thread.active_count,
        "archived_blocks": thread.archived_count,
        "checkpoints": checkpoints,
    }


def thread_langgraph(*, actor, thread_id: str) -> dict[str, Any]:
    """One thread in LangGraph's Thread shape (for POST/PATCH answers)."""
    thread = thread_get_for_read(actor=actor, thread_id=thread_id)
    return thread_langgraph_of(thread)


def thread_langgraph_of(thread: Thread) -> dict[str, Any]:
    rows = threads_as_langgraph(list(threads_with_status(Thread.objects.filter(pk=thread.pk).select_related("owner"))))
    return rows[0]


# --- the dashboard timeline and diff ---------------------------------------------------------


@dataclass
class TimelineRow:
    checkpoint: Checkpoint
    step: Any
    source: str
    writes: list[str]
    write_count: int


def _written_channels(metadata: dict[str, Any], updated: Any) -> list[str]:
    writes = metadata.get("writes") if isinstance(metadata, dict) else None
    if isinstance(writes, dict) and writes:
        return [str(node) for node in writes]
    if isinstance(updated, list):
        return [str(name) for name in updated if isinstance(name, str) and not is_internal_channel(name)]
    return []


@dataclass
class Timeline:
    thread: Thread
    rows: list[TimelineRow]
    namespaces: list[str]
    checkpoint_ns: str | None
    total: int
    next_before: str | None


def checkpoint_timeline(
    *, actor, thread_id: str, checkpoint_ns: str | None = None, before: str | None = None, limit: int = TIMELINE_PAGE
) -> Timeline:
    """The dashboard's checkpoint timeline: newest first, without loading any state (constant queries)."""
    thread = thread_get_for_read(actor=actor, thread_id=thread_id)
    qs = Checkpoint.objects.filter(thread=thread)
    namespaces = list(qs.order_by("checkpoint_ns").values_list("checkpoint_ns", flat=True).distinct())
    if checkpoint_ns is not None:
        qs = qs.filter(checkpoint_ns=checkpoint_ns)
    total = qs.count()
    if before:
        qs = qs.filter(pk__lt=_before_pk(thread, before, checkpoint_ns))
    write_count = writes_of().order_by().values("thread").annotate(n=Count("id")).values("n")
    rows = list(
        qs.defer("checkpoint")
        .annotate(
            updated_channels=KeyTransform("updated_channels", "checkpoint"),
            write_count=Coalesce(Subquery(write_count[:1]), Value(0)),
        )
        .order_by("-id")[: limit + 1]
    )
    more = len(rows) > limit
    rows = rows[:limit]
    timeline_rows = []
    for row in rows:
        row.thread = thread
        meta = row.metadata if isinstance(row.metadata, dict) else {}
        timeline_rows.append(
            TimelineRow(
                checkpoint=row,
                step=meta.get("step", ""),
                source=str(meta.get("source", "")),
                writes=_written_channels(meta, row.updated_channels),
                write_count=row.write_count,
            )
        )
    return Timeline(
        thread=thread,
        rows=timeline_rows,
        namespaces=namespaces,
        checkpoint_ns=checkpoint_ns,
        total=total,
        next_before=rows[-1].checkpoint_id if more and rows else None,
    )


@dataclass
class ChannelShown:
    name: str
    messages: list[MessageView] | None
    text: str
    internal: bool


@dataclass
class ChannelChange:
    name: str
    kind: str  # added | removed | changed
    added_messages: list[MessageView] = field(default_factory=list)
    removed_messages: list[MessageView] = field(default_factory=list)
    changed_messages: list[MessageView] = field(default_factory=list)
    added_keys: list[str] = field(default_factory=list)
    removed_keys: list[str] = field(default_factory=list)
    changed_keys: list[str] = field(default_factory=list)
    before: str = ""
    after: str = ""
    appended: str = ""

    @property
    def internal(self) -> bool:
        return is_internal_channel(self.name)


@dataclass
class CheckpointDiff:
    parent_id: str
    parent_found: bool
    changes: list[ChannelChange]
    unchanged: int


def _pretty(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(readable(value), indent=2, ensure_ascii=False, sort_keys=True, default=str)


def _short(value: Any, limit: int = 400) -> str:
    text = _pretty(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def checkpoint_diff(values: dict[str, Any], parent_values: dict[str, Any]) -> tuple[list[ChannelChange], int]:
    """What changed from the parent's channel values to these: channels, messages, keys.

    Messages are matched by id (else by role and text); object values by key;
    anything else is shown before and after.
    """
    changes: list[ChannelChange] = []
    unchanged = 0
    for name in sorted(set(values) | set(parent_values), key=lambda n: (is_internal_channel(n), n)):
        if name not in parent_values:
            change = ChannelChange(name=name, kind="added", after=_short(values[name]))
            change.added_messages = message_list(values[name]) or []
            changes.append(change)
            continue
        if name not in values:
            change = ChannelChange(name=name, kind="removed", before=_short(parent_values[name]))
            change.removed_messages = message_list(parent_values[name]) or []
            changes.append(change)
            continue
        new, old = values[name], parent_values[name]
        if new == old:
            unchanged += 1
            continue
        change = ChannelChange(name=name, kind="changed")
        new_messages, old_messages = message_list(new), message_list(old)
        if new_messages is not None or old_messages is not None:
            new_messages, old_messages = new_messages or [], old_messages or []
            old_by_key = {m.key: m for m in old_messages}
            new_keys = {m.key for m in new_messages}
            change.added_messages = [m for m in new_messages if m.key not in old_by_key]
            change.removed_messages = [m for m in old_messages if m.key not in new_keys]
            change.changed_messages = [m for m in new_messages if m.key in old_by_key and old_by_key[m.key] != m]
        elif isinstance(new, dict) and isinstance(old, dict) and not is_blob(new) and not is_blob(old):
            change.added_keys = sorted(str(k) for k in new.keys() - old.keys())
            change.removed_keys = sorted(str(k) for k in old.keys() - new.keys())
            change.changed_keys = sorted(str(k) for k in new.keys() & old.keys() if new[k] != old[k])
        elif isinstance(new, list) and isinstance(old, list) and len(new) > len(old) and new[: len(old)] == old:
            change.appended = _short(new[len(old) :])
        else:
            change.before, change.after = _short(old), _short(new)
        changes.append(change)
    return changes, unchanged


@dataclass
class CheckpointDetail:
    checkpoint: Checkpoint
    channels: list[ChannelShown]
    writes: list[dict[str, Any]]
    diff: CheckpointDiff
    metadata_text: str


def checkpoint_detail(*, actor, thread_id: str, checkpoint_id: str, checkpoint_ns: str = "") -> CheckpointDetail:
    """One checkpoint for the dashboard: channel values readable, pending writes, diff to its parent."""
    thread = thread_get_for_read(actor=actor, thread_id=thread_id)
    return checkpoint_detail_in(thread=thread, checkpoint_id=checkpoint_id, checkpoint_ns=checkpoint_ns)


def checkpoint_detail_in(*, thread: Thread, checkpoint_id: str, checkpoint_ns: str = "") -> CheckpointDetail:
    """`checkpoint_detail` for a thread already checked for reading (three queries)."""
    checkpoint = checkpoint_get_in(thread=thread, checkpoint_id=checkpoint_id, checkpoint_ns=checkpoint_ns)
    values = checkpoint.checkpoint.get("channel_values") if isinstance(checkpoint.checkpoint, dict) else None
    values = values if isinstance(values, dict) else {}
    channels = [
        ChannelShown(name=name, messages=message_list(value), text=_pretty(value), internal=is_internal_channel(name))
        for name, value in sorted(values.items(), key=lambda item: (is_internal_channel(item[0]), item[0]))
    ]
    parent_values: dict[str, Any] = {}
    parent_found = False
    if checkpoint.parent_checkpoint_id:
        parent = (
            Checkpoint.objects.filter(
                thread=checkpoint.thread, checkpoint_ns=checkpoint.checkpoint_ns, checkpoint_id=checkpoint.parent_checkpoint_id
            )
            .values_list("checkpoint", flat=True)
            .first()
        )
        if parent is not None:
            parent_found = True
            found = parent.get("channel_values") if isinstance(parent, dict) else None
            parent_values = found if isinstance(found, dict) else {}
    changes, unchanged = checkpoint_diff(values, parent_values)
    writes = [
        {
            "task_id": write.task_id,
            "task_path": write.task_path,
            "idx": write.idx,
            "channel": write.channel,
            "messages": message_list(write.value) or ([m] if (m := message_view(write.value)) else None),
            "text": _pretty(write.value),
        }
        for write in checkpoint.pending
    ]
    return CheckpointDetail(
        checkpoint=checkpoint,
        channels=channels,
        writes=writes,
        diff=CheckpointDiff(
            parent_id=checkpoint.parent_checkpoint_id, parent_found=parent_found, changes=changes, unchanged=unchanged
        ),
        metadata_text=_pretty(checkpoint.metadata),
    )

