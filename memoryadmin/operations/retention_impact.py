"""What retention's rules select at one instant, and the dry run's count of it (docs/operations.md,
"Retention"): the very querysets `retention.retention_apply` removes, counted and measured without
writing anything.

A policy's counts are of everything its rules remove together: the checkpoints released, pruned
and held by purged blocks (each counted once: the purge leaves out what the release and keep rules
remove first), the pending writes going with them or referring to purged blocks (with the other
writes of their task, sessions_app/checkpoints/holding.py), the channel values stored by version
that no checkpoint left holds (sessions_app/checkpoints/removal.py), blocks, store items and bytes.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from functools import reduce
from operator import or_
from typing import Any, Iterable

from django.db.models import Count, Exists, OuterRef, Q, QuerySet

from memoryadmin.operations.models import RetentionPolicy
from memoryadmin.operations.sizes import payload_bytes
from sessions_app.checkpoints.holding import blocks_holders, tasks_writes
from sessions_app.checkpoints.models import Checkpoint, CheckpointValue, CheckpointWrite
from sessions_app.checkpoints.removal import checkpoint_writes_of, checkpoints_beyond_newest, values_unheld, writes_going
from sessions_app.threads.models import Block, Thread


@dataclass
class Impact:
    """What a dry run would remove, or what an apply removed."""

    threads_released: int = 0
    threads_pruned: int = 0
    threads_purged: int = 0
    checkpoints: int = 0
    pending_writes: int = 0
    checkpoint_values: int = 0
    blocks: int = 0
    items: int = 0
    bytes: int = 0

    def add(self, other: "Impact") -> None:
        for name, value in asdict(other).items():
            setattr(self, name, getattr(self, name) + value)

    def as_dict(self) -> dict[str, int]:
        return asdict(self)

    @property
    def threads(self) -> int:
        return self.threads_released + self.threads_pruned + self.threads_purged

    @property
    def is_empty(self) -> bool:
        return not any(asdict(self).values())


@dataclass
class Selection:
    """The querysets one policy selects at one instant; preview counts them, apply deletes them."""

    policy: RetentionPolicy
    scope: QuerySet[Thread]
    idle_threads: QuerySet[Thread] | None = None
    pruned_threads: QuerySet[Thread] | None = None
    blocks: QuerySet[Block] | None = None
    items: Any = None  # QuerySet[StoreItem] for the default policy with a store TTL

    def released_checkpoints(self) -> QuerySet[Checkpoint]:
        return Checkpoint.objects.filter(thread__in=self.idle_threads)

    def excess_checkpoints(self, threads: QuerySet[Thread] | Iterable[int] | None = None) -> QuerySet[Checkpoint]:
        """Checkpoints beyond the newest N of their (thread, namespace), one window query."""
        return checkpoints_beyond_newest(
            threads=self.pruned_threads if threads is None else threads, keep=self.policy.keep_checkpoints
        )


def _scope(policy: RetentionPolicy, policies: list[RetentionPolicy]) -> QuerySet[Thread]:
    if policy.is_default:
        return Thread.objects.exclude(agent_code__in=[p.agent_code for p in policies if not p.is_default])
    return Thread.objects.filter(agent_code=policy.agent_code)


def _selection(policy: RetentionPolicy, policies: list[RetentionPolicy], now: datetime) -> Selection:
    scope = _scope(policy, policies)
    selection = Selection(policy=policy, scope=scope)
    if policy.release_idle_days is not None:
        cutoff = now - timedelta(days=policy.release_idle_days)
        selection.idle_threads = scope.filter(updated_at__lt=cutoff).filter(
            Exists(Checkpoint.objects.filter(thread=OuterRef("pk")))
        )
    if policy.keep_checkpoints is not None:
        pruned = scope
        if policy.release_idle_days is not None:
            # Idle threads lose every checkpoint to the release rule: never count them twice.
            pruned = scope.filter(updated_at__gte=now - timedelta(days=policy.release_idle_days))
        selection.pruned_threads = pruned
    if policy.purge_archived_days is not None:
        selection.blocks = Block.objects.filter(
            thread__in=scope, archived=True, archived_at__lt=now - timedelta(days=policy.purge_archived_days)
        )
    if policy.is_default and policy.store_ttl_days is not None:
        selection.items = _expired_items(now, policy.store_ttl_days)
    return selection


def _expired_items(now: datetime, days: int):
    from store_app.models import StoreItem

    return StoreItem.objects.filter(
        Q(expires_at__lte=now) | Q(expires_at__isnull=True, updated_at__lt=now - timedelta(days=days))
    )


def _measure(checkpoints: QuerySet[Checkpoint], writes: QuerySet[CheckpointWrite], values: QuerySet[CheckpointValue]) -> int:
    """Bytes of what a removal is about to delete (removal.py calls it before deleting)."""
    size = checkpoints.aggregate(size=payload_bytes("checkpoint", "metadata"))["size"]
    size += writes.aggregate(size=payload_bytes("value"))["size"]
    return size + values.aggregate(size=payload_bytes("value"))["size"]


def _values_impact(pks: list[int]) -> tuple[int, int]:
    size = 0
    for start in range(0, len(pks), 1000):
        size += CheckpointValue.objects.filter(pk__in=pks[start : start + 1000]).aggregate(size=payload_bytes("value"))["size"]
    return len(pks), size


def _preview_selection(selection: Selection) -> Impact:
    impact = Impact()
    going: list[QuerySet[Checkpoint]] = []
    writes: list[QuerySet[CheckpointWrite]] = []
    if selection.idle_threads is not None:
        released = selection.released_checkpoints()
        row = released.aggregate(n=Count("id"), threads=Count("thread_id", distinct=True), size=payload_bytes("checkpoint", "metadata"))
        impact.threads_released, impact.checkpoints, impact.bytes = row["threads"], row["n"], row["size"]
        going.append(released)
        # A released thread loses every checkpoint, so every pending write of it goes (removal.py).
        writes.append(CheckpointWrite.objects.filter(thread__in=selection.idle_threads))
    if selection.pruned_threads is not None:
        excess = selection.excess_checkpoints()
        row = excess.aggregate(n=Count("id"), threads=Count("thread_id", distinct=True), size=payload_bytes("checkpoint", "metadata"))
        impact.threads_pruned = row["threads"]
        impact.checkpoints += row["n"]
        impact.bytes += row["size"]
        going.append(excess)
        writes.append(checkpoint_writes_of(excess, selection.pruned_threads))
    if selection.blocks is not None:
        holders = blocks_holders(selection.blocks)
        holding = _purged_checkpoints(selection, holders.checkpoints)
        if holding is not None:
            row = holding.aggregate(n=Count("id"), size=payload_bytes("checkpoint", "metadata"))
            impact.checkpoints += row["n"]
            impact.bytes += row["size"]
            going.append(holding)
            writes.append(writes_going(holding, set(holding.order_by().values_list("thread_id", flat=True).distinct())))
        if holders.writes:
            writes.append(tasks_writes(holders.writes))
        row = selection.blocks.aggregate(
            n=Count("id"), threads=Count("thread_id", distinct=True), size=payload_bytes("message", "content")
        )
        impact.blocks, impact.threads_purged = row["n"], row["threads"]
        impact.bytes += row["size"]
    if writes:
        # One count of every write going, whichever rule takes it.
        row = CheckpointWrite.objects.filter(reduce(or_, (Q(pk__in=w.values("pk")) for w in writes))).aggregate(
            n=Count("id"), size=payload_bytes("value")
        )
        impact.pending_writes = row["n"]
        impact.bytes += row["size"]
    if going:
        every = Checkpoint.objects.filter(reduce(or_, (Q(pk__in=g.values("pk")) for g in going)))
        # Only the threads holding values by version are read further (most threads hold none).
        threads = set(
            CheckpointValue.objects.filter(thread_id__in=every.values("thread_id"))
            .order_by()
            .values_list("thread_id", flat=True)
            .distinct()
        )
        impact.checkpoint_values, size = _values_impact(values_unheld(threads, going=every))
        impact.bytes += size
    if selection.items is not None:
        row = selection.items.aggregate(n=Count("id"), size=payload_bytes("value"))
        impact.items = row["n"]
        impact.bytes += row["size"]
    return impact


def _purged_checkpoints(selection: Selection, pks: list[int]) -> QuerySet[Checkpoint] | None:
    """The dry run's count of the checkpoints the purge removes with its blocks: those holding a
    purged block and not already removed by this policy's release or keep rule (applied first)."""
    if not pks:
        return None
    holding = Checkpoint.objects.filter(pk__in=pks)
    if selection.idle_threads is not None:
        holding = holding.exclude(thread__in=selection.idle_threads)
    if selection.pruned_threads is not None:
        holding = holding.exclude(pk__in=selection.excess_checkpoints().values("pk"))
    return holding
