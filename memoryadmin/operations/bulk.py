"""Bulk actions over threads: clear, release, purge (admins) and export (anyone, on what they read).

docs/operations.md, "Bulk actions". A selection is either thread ids ticked in
the list or "everything matching this filter". Nothing is destroyed without a
preview: `bulk_preview` counts the impact and writes nothing; `bulk_start`
records a `BulkJob` and queues the job that runs it (memoryadmin/queue.py), in
one transaction; `bulk_step` processes the next batch of threads in one
transaction, each thread through the same service a single action uses (so
the same rules and one audit event per thread), together with the job's
progress; a purge's batch goes through that service's batch form
(`threads_delete`: the same rules, a fixed number of statements per batch). The queue's worker runs the steps (`bulk_run`); the job's page only
reads its progress. `manage.py bulk_jobs run` finishes jobs from the command line.

A filter selection is frozen at start by `max_pk` (threads created after the
preview are not touched) and walked in primary-key order from `cursor`, so a
step never revisits a thread and a purge never skips one. A step that dies
(its worker killed) rolls back with its cursor, so the job resumes at the
same thread; two workers on one job take turns on its locked row.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from django.db import transaction
from django.db.models import Count, Max, QuerySet, Sum, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from memoryadmin import policy, queue
from memoryadmin.audit import audit_record
from memoryadmin.errors import Forbidden, InvalidInput, NotFound
from memoryadmin.params import parse_bool

from sessions_app.threads import services
from memoryadmin.operations.models import BulkJob
from sessions_app.checkpoints.models import Checkpoint, CheckpointValue, CheckpointWrite
from sessions_app.threads.models import Thread
from sessions_app.checkpoints import search
from sessions_app.threads.selectors import thread_id_validate
from sessions_app.checkpoints import lifecycle

DESTRUCTIVE = ("clear", "release", "purge")
ACTIONS = (*DESTRUCTIVE, "export")
MAX_IDS = 1000
BATCH = 20


@dataclass(frozen=True)
class Selection:
    """Ticked thread ids, or the thread list's filter (q, agent, owner)."""

    ids: tuple[str, ...] = ()
    # The thread list's filter as its query string has it (name: value, `meta` a list), defaults left out.
    filter: dict[str, Any] = field(default_factory=dict)

    @property
    def all_matching(self) -> bool:
        return not self.ids

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> "Selection":
        """From the thread list's form: `ids` (repeated) or `all=1` with the list's filter fields."""
        if parse_bool(data.get("all"), name="all", default=False):
            return cls(filter=_filter_dict(search.thread_list_query_parse(data)))
        ids = data.getlist("ids") if hasattr(data, "getlist") else data.get("ids") or []
        if not isinstance(ids, list | tuple) or not ids:
            raise InvalidInput("Select at least one thread, or everything matching the filter.", fields={"ids": ["select at least one thread."]})
        if len(ids) > MAX_IDS:
            raise InvalidInput(f"At most {MAX_IDS} ticked threads; use the filter.", fields={"ids": [f"at most {MAX_IDS}."]})
        for thread_id in ids:
            thread_id_validate(thread_id)
        return cls(ids=tuple(dict.fromkeys(ids)))

    def as_dict(self) -> dict[str, Any]:
        return {"ids": list(self.ids)} if self.ids else {"filter": self.filter}

    @classmethod
    def from_dict(cls, value: dict[str, Any]) -> "Selection":
        return cls(ids=tuple(value.get("ids") or ()), filter=value.get("filter") or {})


def _action(action: Any) -> str:
    if action not in ACTIONS:
        raise InvalidInput(f"action must be one of {', '.join(ACTIONS)}.", fields={"action": [f"must be one of {', '.join(ACTIONS)}."]})
    return action


def ensure_allowed(actor, action: str) -> None:
    """Destructive bulk actions are for admins; anyone may export what they can read (memoryadmin.policy)."""
    if action in DESTRUCTIVE:
        policy.ensure_admin(
            actor, target="threads", action=f"bulk.{action}", message=f"Only an admin may {action} threads in bulk."
        )


def selection_threads(*, actor, selection: Selection) -> QuerySet[Thread]:
    """The selected threads the actor may see (a member's selection never holds others' threads)."""
    if selection.ids:
        return Thread.objects.visible_to(actor).filter(thread_id__in=selection.ids)
    query = search.thread_list_query_parse(selection.filter)
    return search.thread_list_queryset(actor=actor, query=query)


def _filter_dict(query: search.ThreadListQuery) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for name, value in query.filter_fields():
        if name == "meta":
            found.setdefault("meta", []).append(value)
        else:
            found[name] = value
    return found


def selection_fields(selection: Selection) -> list[tuple[str, str]]:
    """The selection as form fields, so a confirmation posts exactly what was previewed."""
    if selection.ids:
        return [("ids", thread_id) for thread_id in selection.ids]
    fields = [("all", "1")]
    for name, value in selection.filter.items():
        fields += [(name, item) for item in value] if isinstance(value, list) else [(name, value)]
    return fields


@dataclass(frozen=True)
class Impact:
    threads: int
    active_blocks: int
    archived_blocks: int
    checkpoints: int
    pending_writes: int
    checkpoint_values: int = 0

    @property
    def blocks(self) -> int:
        return self.active_blocks + self.archived_blocks

    def as_dict(self) -> dict[str, int]:
        return {
            "threads": self.threads,
            "active_blocks": self.active_blocks,
            "archived_blocks": self.archived_blocks,
            "checkpoints": self.checkpoints,
            "pending_writes": self.pending_writes,
            "checkpoint_values": self.checkpoint_values,
        }


def _impact(threads: QuerySet[Thread]) -> Impact:
    """Counts of the selection in four queries, whatever its size."""
    ids = threads.order_by().values("pk")
    row = Thread.objects.filter(pk__in=ids).aggregate(
        threads=Count("id"),
        active=Coalesce(Sum("active_count"), Value(0)),
        archived=Coalesce(Sum("archived_count"), Value(0)),
    )
    return Impact(
        threads=row["threads"],
        active_blocks=row["active"],
        archived_blocks=row["archived"],
        checkpoints=Checkpoint.objects.filter(thread__in=ids).count(),
        pending_writes=CheckpointWrite.objects.filter(thread__in=ids).count(),
        checkpoint_values=CheckpointValue.objects.filter(thread__in=ids).count(),
    )


def bulk_preview(*, actor, action: Any, selection: Selection) -> Impact:
    """What the action would touch: threads, blocks, checkpoints. Reads only."""
    action = _action(action)
    ensure_allowed(actor, action)
    return _impact(selection_threads(actor=actor, selection=selection))


@transaction.atomic
def bulk_start(*, actor, action: Any, selection: Selection, request=None) -> BulkJob:
    """Admin: record a bulk job over the selection as it is now, audited with its preview, and queue it.

    The job row, its audit event and its queue entry commit together (on SQLite, where
    there is no queue, the job runs once this transaction commits).
    """
    action = _action(action)
    if action not in DESTRUCTIVE:
        raise InvalidInput("Exports are downloaded directly, not run as jobs.", fields={"action": ["must be clear, release or purge."]})
    ensure_allowed(actor, action)
    threads = selection_threads(actor=actor, selection=selection)
    impact = _impact(threads)
    if not impact.threads:
        raise InvalidInput("No thread matches this selection.", fields={"selection": ["matches no thread."]})
    max_pk = threads.aggregate(top=Max("pk"))["top"] or 0
    job = BulkJob.objects.create(
        actor=actor,
        actor_name=actor.get_username(),
        action=action,
        selection=selection.as_dict(),
        max_pk=max_pk,
        total=impact.threads,
        preview=impact.as_dict(),
        counts={"threads": 0, "blocks": 0, "checkpoints": 0, "skipped": 0},
    )
    audit_record(
        actor=actor,
        action="bulk.start",
        target=f"bulk:{job.pk}",
        detail={"action": action, "selection": selection.as_dict(), "before": impact.as_dict()},
        request=request,
    )
    queue.job_enqueue("bulk_job_run", job_id=job.pk)
    return job


def bulk_job_get(*, actor, job_id: int) -> BulkJob:
    """A job, for its page: admins only (bulk jobs are destructive)."""
    job = BulkJob.objects.filter(pk=job_id).first()
    if job is None:
        raise NotFound(f"No bulk job {job_id}.")
    policy.ensure_admin(actor, target=f"bulk:{job_id}", action="bulk.read", message="Only an admin may see bulk jobs.")
    return job


def _apply(job: BulkJob, threads: list[Thread], counts: dict[str, int], request) -> None:
    """A batch: the rules of the single thread's clear, release or delete for every thread of it,
    in a fixed number of statements whatever its size (services.threads_clear,
    lifecycle.checkpoints_release, services.threads_delete); a thread deleted since is skipped."""
    pks = [thread.pk for thread in threads]
    if job.action == "clear":
        done = {pk: (result["archived"], 0) for pk, result in services.threads_clear(actor=job.actor, thread_pks=pks, request=request).items()}
    elif job.action == "release":
        done = {pk: (0, n) for pk, n in lifecycle.checkpoints_release(actor=job.actor, thread_pks=pks, request=request).items()}
    else:
        checkpoints = dict(
            Checkpoint.objects.filter(thread__in=pks).order_by().values_list("thread").annotate(n=Count("id")).values_list("thread", "n")
        )
        deleted = services.threads_delete(actor=job.actor, thread_pks=pks, request=request)
        done = {pk: (result["active"] + result["archived"], checkpoints.get(pk, 0)) for pk, result in deleted.items()}
    for thread in threads:
        if thread.pk not in done:
            counts["skipped"] = counts.get("skipped", 0) + 1
        else:
            blocks, removed = done[thread.pk]
            counts["threads"] += 1
            counts["blocks"] += blocks
            counts["checkpoints"] += removed
        job.cursor = thread.pk
        job.processed += 1


def _finish(job: BulkJob, request) -> None:
    job.status = BulkJob.Status.DONE
    job.finished_at = timezone.now()
    audit_record(
        actor=job.actor,
        action="bulk.finish",
        target=f"bulk:{job.pk}",
        detail={"action": job.action, "before": job.preview, "done": job.counts, "processed": job.processed},
        request=request,
    )


def bulk_step(*, actor, job_id: int, batch: int = BATCH, request=None) -> BulkJob:
    """Process the next batch of a job in one transaction; returns the job as it now stands.

    The job row is locked, so two workers never process the same batch. A thread
    deleted since the preview is skipped. A refusal (the job's admin lost the
    role) fails the job: the batch rolls back and the failure is recorded.
    """
    policy.ensure_admin(actor, target=f"bulk:{job_id}", action="bulk.step", message="Only an admin may run bulk jobs.")
    try:
        with transaction.atomic():
            job = BulkJob.objects.select_for_update().filter(pk=job_id).first()
            if job is None:
                raise NotFound(f"No bulk job {job_id}.")
            if job.is_finished:
                return job
            if job.actor is None or not policy.may_administer(job.actor, f"bulk.{job.action}"):
                raise Forbidden("The admin who started this job may no longer run it.", target=f"bulk:{job.pk}", action=f"bulk.{job.action}")
            job.status = BulkJob.Status.RUNNING
            # The filter is applied with the job owner's eyes, as at preview time.
            threads = list(
                selection_threads(actor=job.actor, selection=Selection.from_dict(job.selection))
                .filter(pk__gt=job.cursor, pk__lte=job.max_pk)
                .order_by("pk")[:batch]
            )
            counts = dict(job.counts)
            if threads:
                _apply(job, threads, counts, request)
            job.counts = counts
            if len(threads) < batch:
                _finish(job, request)
            job.save()
            return job
    except Forbidden as exc:
        with transaction.atomic():
            BulkJob.objects.filter(pk=job_id).update(
                status=BulkJob.Status.FAILED, error=exc.message, finished_at=timezone.now(), updated_at=timezone.now()
            )
        raise


def bulk_run(*, job_id: int, batch: int = BATCH) -> BulkJob:
    """Run a job to its end (the queue's worker, the command line): steps as its own admin until done.

    A refusal (the job's admin lost the role) has already failed the job; it ends here.
    """
    job = BulkJob.objects.select_related("actor").get(pk=job_id)
    while not job.is_finished:
        try:
            job = bulk_step(actor=job.actor, job_id=job.pk, batch=batch)
        except Forbidden as exc:
            BulkJob.objects.filter(pk=job.pk, finished_at__isnull=True).update(
                status=BulkJob.Status.FAILED, error=exc.message, finished_at=timezone.now(), updated_at=timezone.now()
            )
            return BulkJob.objects.get(pk=job.pk)
    return job
