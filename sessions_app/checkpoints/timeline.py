"""The dashboard's checkpoint timeline and the diff of a checkpoint against another."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db.models import Count, Subquery, Value
from django.db.models.fields.json import KeyTransform
from django.db.models.functions import Coalesce


from memoryadmin.json import pretty

from ..threads.models import Thread
from .models import Checkpoint
from ..threads.selectors import thread_get_for_read
from sessions_app.checkpoints.conversation import checkpoints_hydrate
from sessions_app.checkpoints.branches import is_fork, latest_branch_ids, previous_in_time
from sessions_app.checkpoints.selectors import _before_pk, checkpoint_get_in, writes_of
from sessions_app.checkpoints.wire import MessageView, is_blob, is_internal_channel, message_list, message_view, readable


TIMELINE_PAGE = 50


# --- the dashboard timeline and diff ---------------------------------------------------------


@dataclass
class TimelineRow:
    checkpoint: Checkpoint
    step: Any
    source: str
    writes: list[str]
    write_count: int
    fork: bool = False  # goes on from another checkpoint than the one made just before it
    on_latest_branch: bool = False


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

    @property
    def branched(self) -> bool:
        """Some shown checkpoint starts a branch or lies off the latest one: the page marks branches."""
        return any(row.fork or not row.on_latest_branch for row in self.rows)


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
            previous_id=previous_in_time(),
        )
        .order_by("-id")[: limit + 1]
    )
    more = len(rows) > limit
    rows = rows[:limit]
    on_branch = latest_branch_ids(thread, [row.pk for row in rows], checkpoint_ns)
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
                fork=is_fork(row.parent_checkpoint_id, row.previous_id),
                on_latest_branch=row.pk in on_branch,
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
    value: Any = None  # readable: blobs described, never their bytes


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
    return pretty(readable(value))


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


def _channel_values(document: Any) -> dict[str, Any]:
    """Every channel value of a stored checkpoint document, internal channels included; {} for junk."""
    values = document.get("channel_values") if isinstance(document, dict) else None
    return values if isinstance(values, dict) else {}


def checkpoint_detail_in(*, thread: Thread, checkpoint_id: str, checkpoint_ns: str = "") -> CheckpointDetail:
    """`checkpoint_detail` for a thread already checked for reading (three queries)."""
    checkpoint = checkpoint_get_in(thread=thread, checkpoint_id=checkpoint_id, checkpoint_ns=checkpoint_ns)
    values = _channel_values(checkpoint.checkpoint)
    channels = [
        ChannelShown(
            name=name, messages=message_list(value), text=_pretty(value), internal=is_internal_channel(name), value=readable(value)
        )
        for name, value in sorted(values.items(), key=lambda item: (is_internal_channel(item[0]), item[0]))
    ]
    parent_values: dict[str, Any] = {}
    parent_found = False
    if checkpoint.parent_checkpoint_id:
        parent = (
            Checkpoint.objects.filter(
                thread=checkpoint.thread, checkpoint_ns=checkpoint.checkpoint_ns, checkpoint_id=checkpoint.parent_checkpoint_id
            )
            .only("thread_id", "checkpoint_ns", "checkpoint", "messages_ref", "refs", "values_ref")
            .first()
        )
        if parent is not None:
            parent_found = True
            parent_values = _channel_values(checkpoints_hydrate([parent])[0].checkpoint)
    changes, unchanged = checkpoint_diff(values, parent_values)
    writes = [
        {
            "task_id": write.task_id,
            "task_path": write.task_path,
            "idx": write.idx,
            "channel": write.channel,
            "messages": message_list(write.value) or ([m] if (m := message_view(write.value)) else None),
            "text": _pretty(write.value),
            "value": readable(write.value),
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


@dataclass
class CheckpointComparison:
    """Two checkpoints of a thread side by side: what changed from `older` to `newer`."""

    older: Checkpoint
    newer: Checkpoint
    diff: CheckpointDiff


def checkpoint_compare_in(*, thread: Thread, first: tuple[str, str], second: tuple[str, str]) -> CheckpointComparison:
    """The diff between any two checkpoints of a thread (each `(checkpoint_id, checkpoint_ns)`),
    not only a checkpoint and its parent: the older one (by history position) is the base."""
    a = checkpoint_get_in(thread=thread, checkpoint_id=first[0], checkpoint_ns=first[1])
    b = checkpoint_get_in(thread=thread, checkpoint_id=second[0], checkpoint_ns=second[1])
    older, newer = (a, b) if a.pk <= b.pk else (b, a)
    changes, unchanged = checkpoint_diff(_channel_values(newer.checkpoint), _channel_values(older.checkpoint))
    return CheckpointComparison(
        older=older,
        newer=newer,
        diff=CheckpointDiff(parent_id=older.checkpoint_id, parent_found=True, changes=changes, unchanged=unchanged),
    )
