"""Retention: policies per agent, a dry run that writes nothing, and an apply in batches.

The rules (docs/operations.md, "Retention"):

- A thread follows the policy of its agent_code; the policy with the empty
  agent_code is the default for every agent without a policy of its own. An
  empty rule keeps data forever.
- `release_idle_days` D: threads with no activity (`updated_at`) for D days lose
  every checkpoint, as an admin's release does; the thread and its blocks stay.
- `keep_checkpoints` N: in every other thread, each checkpoint namespace keeps
  its newest N checkpoints. A checkpoint goes with its pending writes.
- Both remove checkpoints through sessions_app/checkpoints/removal.py, the one
  implementation that release, prune, delete_thread and erase use too: keep-N
  is LangGraph's prune with N for 1, and a released thread loses its pending
  writes as a release does. The parent chain is never left broken: within the
  same transaction as a deletion, every remaining checkpoint of the touched
  threads whose parent no longer exists gets an empty parent id (the oldest
  kept checkpoint becomes the root of what is left). LangGraph reads such a
  checkpoint as one without a parent, so `get_state_history` simply ends there.
- `purge_archived_days` D: archived blocks archived more than D days ago are
  deleted (active blocks never are; seq numbers are not reused, as the thread
  remembers its highest seq). A LangGraph checkpoint that still holds one of
  them (its messages kept as the thread's blocks, sessions_app/checkpoints/
  holding.py) goes with it, as a removal: it could no longer be read back whole,
  and the purged messages must not stay readable in it.
- `store_ttl_days` D (default policy only; store items belong to no agent):
  store items past their own TTL, and items without a TTL not updated for D
  days, are deleted.

A dry run (`retention_preview`) counts exactly what an apply at the same instant
removes, with the same querysets, and writes nothing (not even a history row).
`retention_apply` removes it in batches, each its own short transaction, and
records a `RetentionRun` and an audit event; `retention_enqueue` records a queued
run for the job queue's worker, which the queue's schedule also runs
(memoryadmin/operations/tasks.py).

Bytes are an estimate of the payload: `pg_column_size` of the JSON and text
columns on PostgreSQL, their length in bytes on SQLite; row headers and index
entries are not counted.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable

from django.db import transaction
from django.db.models import Case, Count, F, Value, When
from django.utils import timezone

from memoryadmin import policy as access  # "policy" names a retention policy here
from memoryadmin import queue
from memoryadmin.audit import audit_record
from memoryadmin.errors import Forbidden, InvalidInput, NotFound
from memoryadmin.jsoncheck import text_input_check
from memoryadmin.params import parse_int

from memoryadmin.operations.models import RetentionPolicy, RetentionRun
from sessions_app.checkpoints.models import Checkpoint
from sessions_app.checkpoints.holding import blocks_holders, tasks_writes
from sessions_app.checkpoints.removal import Removed, checkpoints_keep_newest, checkpoints_remove, writes_remove
from sessions_app.threads.models import Block, Thread

from memoryadmin.operations.batching import Clock, Stats
# What each rule selects and the dry run's counts (re-exported: retention_draft and the tests use them).
from memoryadmin.operations.retention_impact import Impact, Selection, _measure, _preview_selection, _selection  # noqa: F401
from memoryadmin.operations.sizes import payload_bytes

DEFAULT_BATCH = 500
THREAD_CHUNK = 200
DAYS_MAX = 36500
KEEP_MAX = 1_000_000
RULES = ("keep_checkpoints", "release_idle_days", "purge_archived_days", "store_ttl_days")


def ensure_admin(actor, action: str, target: str = "retention") -> None:
    """A person must be an admin; `actor=None` is the trusted command line (cron). memoryadmin.policy decides."""
    access.ensure_admin(actor, target=target, action=action, system=True)


# --- policies ------------------------------------------------------------------------------------


def _rule(value: Any, name: str, maximum: int = DAYS_MAX, minimum: int = 1) -> int | None:
    """One rule of a policy: a whole number in its range, or None (blank) to keep forever."""
    return parse_int(value, name=name, default=None, minimum=minimum, maximum=maximum)


def policy_snapshot(policy: RetentionPolicy) -> dict[str, Any]:
    return {"agent_code": policy.agent_code, **{rule: getattr(policy, rule) for rule in RULES}}


def _agent_code(value: Any) -> str:
    value = "" if value is None else value
    if not isinstance(value, str) or len(value) > 64:
        raise InvalidInput("agent_code must be at most 64 characters.", fields={"agent_code": ["at most 64 characters."]})
    return text_input_check(value, "agent_code").strip()


def _policy_values(agent_code: str, keep: Any, release: Any, purge: Any, store_ttl: Any) -> dict[str, int | None]:
    """A policy's rules checked, each error naming its field (saved or tried in a dry run alike)."""
    values = {
        "keep_checkpoints": _rule(keep, "keep_checkpoints", KEEP_MAX),
        "release_idle_days": _rule(release, "release_idle_days"),
        "purge_archived_days": _rule(purge, "purge_archived_days"),
        "store_ttl_days": _rule(store_ttl, "store_ttl_days"),
    }
    if agent_code and values["store_ttl_days"] is not None:
        message = "store items belong to no agent: set the store TTL on the default policy."
        raise InvalidInput(f"store_ttl_days: {message}", fields={"store_ttl_days": [message]})
    return values


@transaction.atomic
def retention_policy_save(
    *,
    actor,
    agent_code: Any,
    keep_checkpoints: Any = None,
    release_idle_days: Any = None,
    purge_archived_days: Any = None,
    store_ttl_days: Any = None,
    request=None,
) -> RetentionPolicy:
    """Create or replace the policy of one agent_code (admin); audited with before and after."""
    agent_code = _agent_code(agent_code)
    ensure_admin(actor, "retention.policy_save", f"retention:{agent_code or '(default)'}")
    values = _policy_values(agent_code, keep_checkpoints, release_idle_days, purge_archived_days, store_ttl_days)
    policy = RetentionPolicy.objects.select_for_update().filter(agent_code=agent_code).first()
    before = policy_snapshot(policy) if policy else None
    if policy is None:
        policy = RetentionPolicy(agent_code=agent_code)
    for name, value in values.items():
        setattr(policy, name, value)
    policy.updated_by = actor
    policy.save()
    audit_record(
        actor=actor,
        action="retention.policy_save",
        target=f"retention:{agent_code or '(default)'}",
        detail={"before": before, "after": policy_snapshot(policy)},
        request=request,
    )
    return policy


@transaction.atomic
def retention_policy_delete(*, actor, agent_code: str, request=None) -> None:
    """Remove one policy (admin): its agent then follows the default policy. Audited."""
    text_input_check(agent_code, "agent_code")
    ensure_admin(actor, "retention.policy_delete", f"retention:{agent_code or '(default)'}")
    policy = RetentionPolicy.objects.select_for_update().filter(agent_code=agent_code).first()
    if policy is None:
        raise NotFound(f"No retention policy for {agent_code or 'the default'}.")
    before = policy_snapshot(policy)
    policy.delete()
    audit_record(
        actor=actor,
        action="retention.policy_delete",
        target=f"retention:{agent_code or '(default)'}",
        detail={"before": before},
        request=request,
    )



@dataclass
class PolicyImpact:
    policy: dict[str, Any]
    impact: Impact

    def as_dict(self) -> dict[str, Any]:
        return {"policy": self.policy, "impact": self.impact.as_dict()}


@dataclass
class RetentionReport:
    now: datetime
    policies: list[PolicyImpact] = field(default_factory=list)
    total: Impact = field(default_factory=Impact)


def _policies() -> list[RetentionPolicy]:
    return list(RetentionPolicy.objects.order_by("agent_code"))


def retention_preview(*, actor=None, now: datetime | None = None) -> RetentionReport:
    """The dry run: what `retention_apply` at `now` would remove. Reads only; writes nothing."""
    ensure_admin(actor, "retention.preview")
    now = now or timezone.now()
    policies = _policies()
    report = RetentionReport(now=now)
    for policy in policies:
        impact = _preview_selection(_selection(policy, policies, now))
        report.policies.append(PolicyImpact(policy=policy_snapshot(policy), impact=impact))
        report.total.add(impact)
    return report


# --- apply, in batches ---------------------------------------------------------------------------


def _count(impact: Impact, removed: Removed) -> None:
    impact.checkpoints += removed.checkpoints
    impact.pending_writes += removed.writes
    impact.checkpoint_values += removed.values
    impact.bytes += removed.bytes


def _apply_release(selection: Selection, impact: Impact, batch: int, clock: Clock, stats: Stats) -> None:
    threads: set[int] = set()
    while not clock.out_of_time():
        with transaction.atomic():
            # Newest first: what stays of a thread between batches never points at a deleted parent.
            pks = list(selection.released_checkpoints().order_by("-pk").values_list("pk", flat=True)[:batch])
            if not pks:
                break
            removed = checkpoints_remove(Checkpoint.objects.filter(pk__in=pks), measure=_measure)
        threads |= removed.threads
        _count(impact, removed)
        stats.tick(impact)
    impact.threads_released += len(threads)


def _apply_keep(selection: Selection, impact: Impact, batch: int, clock: Clock, stats: Stats) -> None:
    threads: set[int] = set()
    last_pk = 0
    while not clock.out_of_time():
        # Threads are walked in chunks by primary key, so each window query reads a few threads only.
        chunk = list(
            selection.pruned_threads.filter(pk__gt=last_pk).order_by("pk").values_list("pk", flat=True)[:THREAD_CHUNK]
        )
        if not chunk:
            break
        last_pk = chunk[-1]
        while not clock.out_of_time():
            with transaction.atomic():
                removed = checkpoints_keep_newest(
                    threads=chunk, keep=selection.policy.keep_checkpoints, limit=batch, measure=_measure
                )
                if not removed.checkpoints:
                    break
            threads |= removed.threads
            _count(impact, removed)
            stats.tick(impact)
    impact.threads_pruned += len(threads)


def _apply_blocks(selection: Selection, impact: Impact, batch: int, clock: Clock, stats: Stats) -> None:
    threads: set[int] = set()
    while not clock.out_of_time():
        with transaction.atomic():
            pks = list(selection.blocks.order_by("pk").values_list("pk", flat=True)[:batch])
            if not pks:
                break
            chosen = Block.objects.filter(pk__in=pks, archived=True)
            per_thread = Counter(chosen.values_list("thread_id", flat=True))
            # Lock the threads (in key order) as a save does, so their counters stay exact.
            list(Thread.objects.select_for_update().filter(pk__in=per_thread).order_by("pk").values_list("pk", flat=True))
            holders = blocks_holders(chosen)
            if holders.checkpoints:
                _count(impact, checkpoints_remove(Checkpoint.objects.filter(pk__in=holders.checkpoints), measure=_measure))
            if holders.writes:
                # Writes referring to these blocks, with their task's other writes (holding.py).
                _count(impact, writes_remove(tasks_writes(holders.writes), measure=_measure))
            size = chosen.aggregate(size=payload_bytes("message", "content"))["size"]
            deleted, _ = chosen.delete()
            Thread.objects.filter(pk__in=per_thread).update(
                archived_count=F("archived_count")
                - Case(*[When(pk=pk, then=Value(n)) for pk, n in per_thread.items()], default=Value(0))
            )
        threads |= set(per_thread)
        impact.blocks += deleted
        impact.bytes += size
        stats.tick(impact)
    impact.threads_purged += len(threads)


def _apply_items(selection: Selection, impact: Impact, batch: int, clock: Clock, stats: Stats) -> None:
    while not clock.out_of_time():
        with transaction.atomic():
            pks = list(selection.items.order_by("pk").values_list("pk", flat=True)[:batch])
            if not pks:
                break
            # The condition again: an item refreshed since it was picked is kept.
            chosen = selection.items.filter(pk__in=pks)
            size = chosen.aggregate(size=payload_bytes("value"))["size"]
            deleted, _ = chosen.delete()
        impact.items += deleted
        impact.bytes += size
        stats.tick(impact)


def retention_apply(
    *,
    actor=None,
    now: datetime | None = None,
    batch: int = DEFAULT_BATCH,
    via: str = "cli",
    max_seconds: float | None = None,
    progress: Callable[[str, Impact], None] | None = None,
    request=None,
    run: RetentionRun | None = None,
) -> RetentionRun:
    """Apply every policy at `now`, in batches of at most `batch` rows per transaction.

    Records a RetentionRun (history) and one audit event. With `max_seconds`
    the run stops between batches when the time is up and is marked partial;
    running it again continues (the rules select what is left). `progress` is
    called after every committed batch with the step's name and its running counts.
    `run` is a run recorded when the apply was queued (`retention_enqueue`).
    """
    ensure_admin(actor, "retention.apply")
    if not 1 <= batch <= 100_000:
        raise InvalidInput("batch must be from 1 to 100000.", fields={"batch": ["must be from 1 to 100000."]})
    now = now or timezone.now()
    if run is None:
        run = _run_record(actor=actor, via=via, now=now, status=RetentionRun.Status.RUNNING)
    else:
        RetentionRun.objects.filter(pk=run.pk).update(status=RetentionRun.Status.RUNNING)
    clock = Clock.after(max_seconds)
    stats = Stats("", progress)
    total = Impact()
    per_policy: list[dict[str, Any]] = []
    error = ""
    try:
        policies = _policies()
        for policy in policies:
            selection = _selection(policy, policies, now)
            impact = Impact()
            stats.step = policy.agent_code or "(default)"
            if selection.idle_threads is not None:
                _apply_release(selection, impact, batch, clock, stats)
            if selection.pruned_threads is not None:
                _apply_keep(selection, impact, batch, clock, stats)
            if selection.blocks is not None:
                _apply_blocks(selection, impact, batch, clock, stats)
            if selection.items is not None:
                _apply_items(selection, impact, batch, clock, stats)
            per_policy.append(PolicyImpact(policy=policy_snapshot(policy), impact=impact).as_dict())
            total.add(impact)
    except Exception as exc:  # recorded in the run and the audit log, then raised again
        error = f"{type(exc).__name__}: {exc}"[:2000]
        raise
    finally:
        status = RetentionRun.Status.FAILED if error else RetentionRun.Status.PARTIAL if clock.stopped else RetentionRun.Status.DONE
        RetentionRun.objects.filter(pk=run.pk).update(
            status=status,
            finished_at=timezone.now(),
            batches=stats.batches,
            counts=total.as_dict(),
            policies=per_policy,
            error=error,
        )
        audit_record(
            actor=actor,
            action="retention.apply",
            target=f"retention-run:{run.pk}",
            detail={"status": status, "via": via, "removed": total.as_dict(), "batches": stats.batches, "now": now.isoformat()},
            request=request,
        )
    run.refresh_from_db()
    return run


def _run_record(*, actor, via: str, now: datetime, status: str) -> RetentionRun:
    authenticated = actor is not None and actor.is_authenticated
    return RetentionRun.objects.create(
        actor=actor if authenticated else None,
        actor_name=actor.get_username() if authenticated else "system",
        via=via,
        cutoff_now=now,
        status=status,
    )


@transaction.atomic
def retention_enqueue(*, actor, request=None) -> RetentionRun:
    """Admin: an apply at this instant, for the job queue; recorded at once as a queued run.

    The run and its queue entry commit together; the worker applies the policies with
    the cutoffs of this instant, however long the job waited (memoryadmin/queue.py).
    """
    ensure_admin(actor, "retention.apply")
    run = _run_record(actor=actor, via="web", now=timezone.now(), status=RetentionRun.Status.QUEUED)
    queue.job_enqueue("retention_run", run_id=run.pk)
    return run


def retention_run_queued(*, run_id: int) -> RetentionRun | None:
    """The queue's job for a queued run: the apply, as the admin who asked for it.

    Taken again after its worker died, the run continues: the rules select what is left.
    A run that has finished is not applied twice; an admin who lost the role since
    asking fails the run (recorded, not retried).
    """
    run = RetentionRun.objects.select_related("actor").filter(pk=run_id).first()
    if run is None or run.status not in (RetentionRun.Status.QUEUED, RetentionRun.Status.RUNNING):
        return run
    try:
        return retention_apply(actor=run.actor, now=run.cutoff_now, via=run.via, run=run)
    except Forbidden as exc:
        RetentionRun.objects.filter(pk=run.pk).update(status=RetentionRun.Status.FAILED, error=exc.message, finished_at=timezone.now())
        run.refresh_from_db()
        return run


def retention_scheduled_apply(*, now: datetime) -> RetentionRun:
    """The queue's scheduled apply at `now`, as the system: taken again after its worker
    died, it continues the same run (one run per scheduled instant)."""
    run = RetentionRun.objects.filter(via="schedule", cutoff_now=now).order_by("id").first()
    if run is not None and run.status != RetentionRun.Status.RUNNING:
        return run
    return retention_apply(now=now, via="schedule", run=run)


def retention_runs(*, actor, limit: int = 50) -> list[RetentionRun]:
    """The history of applies, newest first (operators and admins)."""
    access.ensure_may_read_all(
        actor, target="retention", action="retention.read", message="Only operators and admins may see retention runs."
    )
    return list(RetentionRun.objects.order_by("-id")[:limit])


def retention_policies(*, actor) -> list[RetentionPolicy]:
    """Every policy (operators and admins)."""
    access.ensure_may_read_all(
        actor, target="retention", action="retention.read", message="Only operators and admins may see retention policies."
    )
    policies = list(RetentionPolicy.objects.select_related("updated_by").order_by("agent_code"))
    # How many threads each policy covers, for the confirmation of its deletion (one grouped count).
    counts = dict(Thread.objects.order_by().values_list("agent_code").annotate(n=Count("id")))
    own = {p.agent_code for p in policies if not p.is_default}
    for p in policies:
        p.thread_count = sum(n for code, n in counts.items() if code not in own) if p.is_default else counts.get(p.agent_code, 0)
    return policies
