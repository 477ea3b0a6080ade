"""Removing checkpoints: the one implementation behind every path that deletes them.

Release, LangGraph's delete_thread, prune and delete_for_runs
(sessions_app/checkpoints/lifecycle.py), the bulk release (through release),
retention and erasing a user (memoryadmin/operations) all remove checkpoints
here, by these rules (docs/checkpoints.md, "Removing checkpoints"):

- A checkpoint goes with its pending writes (the writes stored against its
  thread, namespace and id).
- A thread left without any checkpoint keeps no pending writes either: writes
  stored ahead of a checkpoint that never came go with the rest. While the
  thread keeps checkpoints, such writes stay (their checkpoint's put may be on
  its way: LangGraph sends a task's writes alongside the put).
- Keeping the newest N: in each (thread, namespace), the N checkpoints with the
  highest history position stay and the older ones go, oldest first.
- The channel values stored by version (versions.py) that no remaining checkpoint of
  the thread holds go too (read before anything is deleted, so a preview and a measure
  count them as they go); a checkpoint replaced in place drops those its old row alone
  held (`values_replaced`).
- The parent chain is repaired in the same transaction: a checkpoint that stays
  and whose parent id names a checkpoint that no longer exists gets an empty
  parent id, so it is the root of what is left (LangGraph reads it as a
  checkpoint without a parent, and `get_state_history` ends there).

Nothing here decides who may remove what: the callers ask memoryadmin.policy
first, and must call these inside a transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from typing import Any

from django.db.models import Exists, F, OuterRef, Q, QuerySet, Window
from django.db.models.functions import RowNumber

from .models import Checkpoint, CheckpointValue, CheckpointWrite
from .status import status_refresh
from .versions import value_ref_valid
from .wire import ERROR, INTERRUPT

# Given the checkpoints, the pending writes and the values about to go, their size (retention reports bytes).
Measure = Callable[[QuerySet[Checkpoint], QuerySet[CheckpointWrite], QuerySet[CheckpointValue]], int]
THREAD_CHUNK = 200


@dataclass
class Removed:
    checkpoints: int = 0
    writes: int = 0
    values: int = 0  # channel values stored by version that no checkpoint left holds
    bytes: int = 0
    threads: set[int] = field(default_factory=set)  # primary keys of the threads touched


def _same_thread(model) -> QuerySet:
    return model.objects.filter(thread=OuterRef("thread"))


def checkpoint_writes_of(checkpoints: QuerySet[Checkpoint], threads) -> QuerySet[CheckpointWrite]:
    """Pending writes stored against one of `checkpoints` (by thread, namespace and id), in `threads`."""
    return CheckpointWrite.objects.filter(thread__in=threads).filter(
        Exists(
            checkpoints.filter(
                thread=OuterRef("thread"), checkpoint_ns=OuterRef("checkpoint_ns"), checkpoint_id=OuterRef("checkpoint_id")
            )
        )
    )


def writes_going(checkpoints: QuerySet[Checkpoint], thread_ids: set[int]) -> QuerySet[CheckpointWrite]:
    """The writes of `checkpoints`, and every write of a thread that none of its checkpoints outlives."""
    staying = _same_thread(Checkpoint).exclude(pk__in=checkpoints.values("pk"))
    attached = checkpoints.filter(
        thread=OuterRef("thread"), checkpoint_ns=OuterRef("checkpoint_ns"), checkpoint_id=OuterRef("checkpoint_id")
    )
    return CheckpointWrite.objects.filter(thread__in=thread_ids).filter(Q(Exists(attached)) | ~Exists(staying))


def checkpoint_parents_repair(thread_ids: Iterable[int]) -> int:
    """Clear the parent id of every checkpoint of these threads whose parent is gone; how many changed."""
    ids = list(thread_ids)
    if not ids:
        return 0
    parent = Checkpoint.objects.filter(
        thread=OuterRef("thread"), checkpoint_ns=OuterRef("checkpoint_ns"), checkpoint_id=OuterRef("parent_checkpoint_id")
    )
    return (
        Checkpoint.objects.filter(thread__in=ids)
        .exclude(parent_checkpoint_id="")
        .exclude(Exists(parent))
        .update(parent_checkpoint_id="")
    )


def checkpoints_remove(
    checkpoints: QuerySet[Checkpoint], *, threads: Iterable[int] | None = None, measure: Measure | None = None
) -> Removed:
    """Remove these checkpoints with their pending writes, and repair the parent chain of what stays.

    `checkpoints` must select the same rows each time it is evaluated (filter by
    primary keys or by a rule, never a slice). `threads`: the threads whose
    checkpoints these are, when the caller knows them (a whole thread's removal
    then also finds writes of a thread without checkpoints).
    """
    if threads is None:
        thread_ids = set(checkpoints.order_by().values_list("thread_id", flat=True).distinct())
    else:
        thread_ids = set(threads)
    if not thread_ids:
        return Removed()
    writes = writes_going(checkpoints, thread_ids)
    # Read before anything goes, like the writes: the values no checkpoint but these holds.
    values = values_unheld(thread_ids, going=checkpoints)
    size = measure(checkpoints, writes, CheckpointValue.objects.filter(pk__in=values)) if measure is not None else 0
    # The writes first: which ones go is read from the checkpoints about to go.
    written, _ = writes.delete()
    removed, _ = checkpoints.delete()
    checkpoint_parents_repair(thread_ids)
    status_refresh(thread_ids)
    dropped = values_delete(values)
    return Removed(checkpoints=removed, writes=written, values=dropped, bytes=size, threads=thread_ids)


def thread_checkpoints_remove(thread_ids: Iterable[int], *, measure: Measure | None = None) -> Removed:
    """Every checkpoint (all namespaces) and every pending write of these threads; the threads stay."""
    ids = set(thread_ids)
    return checkpoints_remove(Checkpoint.objects.filter(thread__in=ids), threads=ids, measure=measure)


def checkpoints_beyond_newest(*, threads, keep: int) -> QuerySet[Checkpoint]:
    """Checkpoints of `threads` older than the newest `keep` of their (thread, namespace): one window query."""
    ranked = Checkpoint.objects.filter(thread__in=threads).annotate(
        rank=Window(RowNumber(), partition_by=[F("thread_id"), F("checkpoint_ns")], order_by=F("id").desc())
    )
    # The window must be computed before any other filter: select by primary key around it.
    return Checkpoint.objects.filter(pk__in=ranked.filter(rank__gt=keep).values("pk"))


def checkpoints_keep_newest(
    *, threads, keep: int, limit: int | None = None, measure: Measure | None = None
) -> Removed:
    """Keep the newest `keep` checkpoints of each (thread, namespace) of `threads`; remove the rest.

    With `limit`, at most that many go, oldest first (a batch: call again until
    nothing is removed). Used by LangGraph's prune (keep 1) and by retention.
    """
    if keep < 1:
        raise ValueError("keep at least one checkpoint; remove a thread's checkpoints with thread_checkpoints_remove")
    excess = checkpoints_beyond_newest(threads=threads, keep=keep)
    if limit is not None:
        pks = list(excess.order_by("pk").values_list("pk", flat=True)[:limit])
        if not pks:
            return Removed()
        excess = Checkpoint.objects.filter(pk__in=pks)
    return checkpoints_remove(excess, measure=measure)


def values_unheld(thread_ids: Iterable[int], *, going: QuerySet[Checkpoint] | None = None) -> list[int]:
    """Primary keys of the values of these threads that no checkpoint holds, leaving out of the
    holders the checkpoints `going` (about to be removed). Reads the threads a chunk at a time:
    the keys held by one chunk's checkpoints, then its values."""
    ids = sorted(set(thread_ids))
    unheld: list[int] = []
    for start in range(0, len(ids), THREAD_CHUNK):
        chunk = ids[start : start + THREAD_CHUNK]
        holders = Checkpoint.objects.filter(thread__in=chunk, values_ref__isnull=False)
        if going is not None:
            holders = holders.exclude(pk__in=going.values("pk"))
        held = set()
        for thread_id, ns, refs in holders.values_list("thread_id", "checkpoint_ns", "values_ref").iterator(chunk_size=2000):
            if isinstance(refs, dict):
                held.update((thread_id, ns, channel, *ref) for channel, ref in refs.items() if value_ref_valid(ref))
        unheld += [
            pk
            for pk, *key in CheckpointValue.objects.filter(thread__in=chunk)
            .values_list("pk", "thread_id", "checkpoint_ns", "channel", "version", "digest")
            .iterator(chunk_size=2000)
            if tuple(key) not in held
        ]
    return unheld


def writes_remove(writes: QuerySet[CheckpointWrite], *, measure: Measure | None = None) -> Removed:
    """Remove these pending writes alone, their checkpoints staying (retention's purge: the writes
    referring to purged blocks, with their tasks', holding.py)."""
    size = measure(Checkpoint.objects.none(), writes, CheckpointValue.objects.none()) if measure is not None else 0
    # Their threads, read before they go: an error or interrupt removed changes a status.
    thread_ids = set(writes.filter(checkpoint_ns="", channel__in=(ERROR, INTERRUPT)).values_list("thread_id", flat=True))
    removed = writes.delete()[0]
    status_refresh(thread_ids)
    return Removed(writes=removed, bytes=size)


def values_delete(pks: list[int]) -> int:
    removed = 0
    for start in range(0, len(pks), 1000):
        removed += CheckpointValue.objects.filter(pk__in=pks[start : start + 1000]).delete()[0]
    return removed


def values_replaced(thread_pk: int, checkpoint_ns: str, before: Any, after: Any) -> int:
    """After a checkpoint was replaced in place: the values its old row held and its new one does
    not go, unless another checkpoint of the namespace holds them. No query when it held none
    (or the same ones: a retried put); how many went."""
    after = after if isinstance(after, dict) else {}
    held = before.items() if isinstance(before, dict) else ()
    candidates = {(channel, *ref) for channel, ref in held if value_ref_valid(ref) and after.get(channel) != ref}
    if not candidates:
        return 0
    channels = sorted({channel for channel, *_ in candidates})
    for refs in (
        Checkpoint.objects.filter(thread_id=thread_pk, checkpoint_ns=checkpoint_ns, values_ref__isnull=False)
        .values_list("values_ref", flat=True)
        .iterator(chunk_size=2000)
    ):
        if isinstance(refs, dict):
            candidates -= {(channel, *refs[channel]) for channel in channels if value_ref_valid(refs.get(channel))}
        if not candidates:
            return 0
    where = Q()
    for channel, version, digest in candidates:
        where |= Q(channel=channel, version=version, digest=digest)
    return CheckpointValue.objects.filter(where, thread_id=thread_pk, checkpoint_ns=checkpoint_ns).delete()[0]
