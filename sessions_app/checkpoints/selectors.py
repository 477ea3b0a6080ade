"""Reads of checkpoints and pending writes, and their input checks.

Every selector takes the acting user and decides visibility through
`thread_get_for_read` (owner, or an operator/admin who reads everything).
"""

from __future__ import annotations

import hashlib
import re

from dataclasses import dataclass
from typing import Any

from django.db.models import OuterRef, QuerySet

from memoryadmin import policy
from memoryadmin.errors import InvalidInput, NotFound

from ..threads.models import Thread
from .models import Checkpoint, CheckpointWrite, SavedThreadView
from ..threads.selectors import thread_get_for_read
from memoryadmin.params import LIST_LIMIT_DEFAULT
from sessions_app.checkpoints.containment import _apply_exact, json_filter
from sessions_app.checkpoints.conversation import checkpoints_hydrate
from sessions_app.checkpoints.references import writes_expand, writes_held


# \A and \Z, not ^ and $: "$" also matches before a trailing newline.
CHECKPOINT_ID_RE = re.compile(r"\A[A-Za-z0-9_.:@$+=~-]{1,128}\Z")
# `GET .../checkpoints/latest` is the latest checkpoint, so no checkpoint may be called that;
# "." and ".." are path steps that HTTP clients resolve, so no URL could name them.
RESERVED_CHECKPOINT_IDS = frozenset({"latest", ".", ".."})
CHECKPOINT_NS_MAX = 512


# --- input checks shared by the API and the pages -------------------------------------------


def checkpoint_id_validate(value: Any, field_name: str = "checkpoint_id") -> str:
    if not isinstance(value, str) or not CHECKPOINT_ID_RE.fullmatch(value):
        message = "must be 1 to 128 characters of A-Z a-z 0-9 _ . : @ $ + = ~ -"
        raise InvalidInput(f"{field_name} {message}", fields={field_name: [message]})
    if value in RESERVED_CHECKPOINT_IDS:
        message = f"{value!r} is reserved (it names an endpoint or a path step)."
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
    """A checkpoint as the API answers it (docs/checkpoints.md, "API guide"); its writes attached by `attach_writes`."""
    thread = thread or checkpoint.thread
    answer = {
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
    held = getattr(checkpoint, "messages_held", None)
    if held is not None:
        answer["messages"] = held
    tag = getattr(checkpoint, "state_tag", None)
    if tag is not None:
        answer["state_tag"] = tag  # the latest read's (latest.py)
    return answer


def attach_writes(rows: list[Checkpoint]) -> list[Checkpoint]:
    """Give each checkpoint its pending writes as `.pending`, in LangGraph's replay order: one query;
    and its messages channel back from the blocks when it holds it by reference (one more)."""
    if not rows:
        return rows
    writes = list(
        CheckpointWrite.objects.filter(
            thread_id__in={row.thread_id for row in rows}, checkpoint_id__in={row.checkpoint_id for row in rows}
        ).order_by("task_path", "task_id", "idx")
    )
    return attach_writes_read(rows, writes)


def attach_writes_read(rows: list[Checkpoint], writes: list[CheckpointWrite]) -> list[Checkpoint]:
    """`attach_writes` once the writes are read (in replay order): the checkpoints and the
    writes read back as they were put (one query for their messages held by reference)."""
    by_key: dict[tuple[int, str, str], list[CheckpointWrite]] = {}
    checkpoints_hydrate(rows, also=writes_held(writes))
    writes_expand(writes)
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


def checkpoint_steps(*, thread: Thread, limit: int) -> list[tuple[str, str, str]]:
    """(checkpoint_ns, node_id, next_node_id) of a thread's newest `limit` checkpoints, newest first.

    One query over every namespace, in insertion order (the order of the history).
    The thread was already checked for reading by the caller: a thread drawn on
    its graph (graphs_app) shows the path its checkpoints took.
    """
    return list(
        Checkpoint.objects.filter(thread_id=thread.pk)
        .order_by("-id")
        .values_list("checkpoint_ns", "node_id", "next_node_id")[:limit]
    )



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


def saved_views(*, actor) -> QuerySet[SavedThreadView]:
    """The actor's saved views of the thread list, by name: nobody else's, whatever their role."""
    return policy.restrict(SavedThreadView.objects.all(), actor, "view.delete")
