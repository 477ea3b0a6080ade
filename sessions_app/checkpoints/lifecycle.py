"""A thread's checkpoints as a whole: release, delete, prune, delete by run, copy; LangGraph's thread create and metadata update."""

from __future__ import annotations

import uuid
from typing import Any, Iterable

from django.db import IntegrityError, transaction
from django.db.models import Count
from django.utils import timezone

from memoryadmin import policy
from memoryadmin.audit import audit_record, audit_records
from memoryadmin.errors import Conflict, InvalidInput
from memoryadmin.jsoncheck import text_input_check

from sessions_app.checkpoints.conversation import checkpoints_hydrate
from sessions_app.checkpoints.references import writes_expand, writes_held
from sessions_app.checkpoints.selectors import checkpoint_as_dict, checkpoints_of
from sessions_app.checkpoints.models import Checkpoint, CheckpointWrite
from sessions_app.checkpoints.removal import checkpoints_keep_newest, checkpoints_remove, thread_checkpoints_remove
from sessions_app.checkpoints.status import status_touch
from sessions_app.threads.models import Thread
from sessions_app.threads.notify import stream_end_fields, thread_notify, threads_notify
from sessions_app.threads.selectors import thread_get_for_read, thread_get_for_write, thread_id_validate, threads_get_for_write
from sessions_app.checkpoints.services import RUN_ID_MAX, _ensure_may_write, _json_field_value, _json_object, _thread_for_write


MAX_THREADS_PER_CALL = 1000


def _touch(thread: Thread, **fields) -> None:
    Thread.objects.filter(pk=thread.pk).update(updated_at=timezone.now(), **fields)


def _touch_ending_streams(thread: Thread, end: str) -> None:
    """The thread's update, which also records the end of its open live streams (for those that
    poll), and the notification that ends them when this commits (sessions_app/threads/notify.py)."""
    _touch(thread, **stream_end_fields(end))
    thread_notify(thread.pk, end)

@transaction.atomic
def checkpoint_release(*, actor, thread_id: str, request=None) -> dict[str, Any]:
    """Admin: remove every checkpoint (all namespaces, with their writes) and return them.

    The saver's release (docs/checkpoints.md, rule C5): the answer is the tag
    `{thread_id, checkpoints}` of what was removed, newest first. The thread and its blocks stay.
    """
    thread = thread_get_for_write(actor=actor, thread_id=thread_id, action="checkpoint.release", lock=True)
    released = [checkpoint_as_dict(row, thread=thread) for row in checkpoints_of(thread)]
    thread_checkpoints_remove([thread.pk])
    # Its open live streams end, saying why, when this commits.
    _touch_ending_streams(thread, "released")
    audit_record(
        actor=actor,
        action="checkpoint.release",
        target=f"thread:{thread.thread_id}",
        detail={"owner": thread.owner.get_username(), "checkpoints": len(released)},
        request=request,
    )
    return {"thread_id": thread.thread_id, "checkpoints": released}

@transaction.atomic
def checkpoints_release(*, actor, thread_pks: list[int], request=None) -> dict[int, int]:
    """`checkpoint_release` for many threads at once (a bulk release's batch), by its rules, in a
    fixed number of statements whatever their number: the threads locked and each allowed (one
    refusal refuses them all), every checkpoint and write removed, their open live streams ended,
    one audit event per thread. Answers how many checkpoints each thread had, by its primary key
    (not the checkpoints themselves, which only the saver's single release returns); a thread
    deleted meanwhile is not in it."""
    threads = threads_get_for_write(actor=actor, thread_pks=thread_pks, action="checkpoint.release")
    if not threads:
        return {}
    pks = [thread.pk for thread in threads]
    counts = dict(
        Checkpoint.objects.filter(thread__in=pks).order_by().values_list("thread").annotate(n=Count("id")).values_list("thread", "n")
    )
    thread_checkpoints_remove(pks)
    Thread.objects.filter(pk__in=pks).update(updated_at=timezone.now(), **stream_end_fields("released"))
    threads_notify(pks, "released")
    audit_records(
        actor=actor,
        action="checkpoint.release",
        events=[
            (f"thread:{thread.thread_id}", {"owner": thread.owner.get_username(), "checkpoints": counts.get(thread.pk, 0)})
            for thread in threads
        ],
        request=request,
    )
    return {thread.pk: counts.get(thread.pk, 0) for thread in threads}


@transaction.atomic
def checkpoint_delete_thread(*, actor, thread_id: str, request=None) -> int:
    """LangGraph's delete_thread: every checkpoint and write of the thread, all namespaces.

    The owner or an admin; the thread itself (and its blocks) stays. Returns how
    many checkpoints were removed.
    """
    thread = thread_get_for_write(actor=actor, thread_id=thread_id, action="checkpoint.delete_thread", lock=True)
    count = thread_checkpoints_remove([thread.pk]).checkpoints
    # Its open live streams end, saying why, when this commits, as after a release.
    _touch_ending_streams(thread, "checkpoints_deleted")
    audit_record(
        actor=actor,
        action="checkpoint.delete_thread",
        target=f"thread:{thread.thread_id}",
        detail={"owner": thread.owner.get_username(), "checkpoints": count},
        request=request,
    )
    return count

def thread_ids_input(value: Any, field_name: str = "thread_ids") -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise InvalidInput(f"{field_name} must be a list of thread ids.", fields={field_name: ["must be a list of strings."]})
    if len(value) > MAX_THREADS_PER_CALL:
        message = f"at most {MAX_THREADS_PER_CALL} ids."
        raise InvalidInput(f"{field_name}: {message}", fields={field_name: [message]})
    for index, item in enumerate(value):
        try:
            thread_id_validate(item)
        except InvalidInput:
            raise InvalidInput(
                f"{field_name}[{index}] is not a valid thread id.", fields={f"{field_name}[{index}]": ["is not a valid thread id."]}
            ) from None
    return list(dict.fromkeys(value))

@transaction.atomic
def checkpoint_prune(*, actor, thread_ids: Iterable[str], strategy: Any = "keep_latest", request=None) -> dict[str, int]:
    """LangGraph's prune: keep only the latest checkpoint of each namespace, or delete them all.

    Threads that do not exist are skipped (as LangGraph's savers do); a thread
    the actor may not prune (another member's, or any for an operator) is a 403
    and nothing is pruned. keep_latest is retention's "keep the newest N" with
    N = 1 (sessions_app/checkpoints/removal.py): the latest checkpoint keeps its
    pending writes, and a kept checkpoint whose parent went becomes a root.
    """
    if strategy is None:
        strategy = "keep_latest"
    if strategy not in ("keep_latest", "delete"):
        raise InvalidInput(
            "strategy must be keep_latest or delete.", fields={"strategy": ["must be keep_latest or delete."]}
        )
    ids = thread_ids_input(list(thread_ids))
    _ensure_may_write(actor, ids[0] if ids else "", "checkpoint.prune")
    threads = list(Thread.objects.select_for_update().filter(thread_id__in=ids).order_by("pk"))
    for thread in threads:
        policy.ensure_may_write(actor, owner_id=thread.owner_id, target=f"thread:{thread.thread_id}", action="checkpoint.prune")
    pks = [thread.pk for thread in threads]
    if strategy == "keep_latest":
        removed = checkpoints_keep_newest(threads=pks, keep=1).checkpoints
    else:
        removed = thread_checkpoints_remove(pks).checkpoints
    if threads:
        audit_record(
            actor=actor,
            action="checkpoint.prune",
            target=",".join(f"thread:{t.thread_id}" for t in threads)[:200],
            detail={"strategy": strategy, "threads": [t.thread_id for t in threads], "checkpoints": removed},
            request=request,
        )
    return {"threads": len(threads), "checkpoints": removed}

def run_ids_input(value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) and 0 < len(item) <= RUN_ID_MAX for item in value):
        message = f"must be a list of run ids (1 to {RUN_ID_MAX} characters)."
        raise InvalidInput(f"run_ids {message}", fields={"run_ids": [message]})
    if len(value) > MAX_THREADS_PER_CALL:
        raise InvalidInput("run_ids: too many ids.", fields={"run_ids": [f"at most {MAX_THREADS_PER_CALL} ids."]})
    for index, item in enumerate(value):
        text_input_check(item, f"run_ids[{index}]")
    return list(dict.fromkeys(value))

@transaction.atomic
def checkpoint_delete_for_runs(*, actor, run_ids: Any, request=None) -> int:
    """LangGraph's delete_for_runs: checkpoints (and writes) whose metadata run_id is listed.

    Only the actor's own threads are searched, so a run id never reaches
    another user's checkpoints; operators write nothing.
    """
    ids = run_ids_input(run_ids)
    _ensure_may_write(actor, "", "checkpoint.delete_for_runs")
    if not ids:
        return 0
    mine = policy.restrict(Checkpoint.objects.all(), actor, "checkpoint.delete_for_runs", owner_field="thread__owner")
    # The empty run id is excluded as checkpoint_run_idx's condition is, so the index serves.
    removed = checkpoints_remove(mine.filter(run_id__in=ids).exclude(run_id="")).checkpoints
    if removed:
        audit_record(
            actor=actor,
            action="checkpoint.delete_for_runs",
            target=f"user:{actor.get_username()}"[:200],
            detail={"run_ids": ids[:50], "checkpoints": removed},
            request=request,
        )
    return removed

@transaction.atomic
def checkpoint_copy_thread(*, actor, source_thread_id: str, target_thread_id: Any = None) -> Thread:
    """LangGraph's copy_thread: every checkpoint and write of a thread, into another thread.

    The actor must be able to read the source and write the target: the target
    is created for the actor, or is the actor's own thread still without
    checkpoints (else 409). Order, namespaces, parents, metadata and creation
    times are kept. The new thread takes the source's metadata.
    """
    source = thread_get_for_read(actor=actor, thread_id=source_thread_id)
    target_id = str(uuid.uuid4()) if target_thread_id is None else target_thread_id
    if target_id == source.thread_id:
        raise InvalidInput("thread_id must differ from the source thread.", fields={"thread_id": ["must differ from the source."]})
    target, created = _thread_for_write(actor=actor, thread_id=target_id, action="checkpoint.copy", create=True)
    if not created and Checkpoint.objects.filter(thread=target).exists():
        raise Conflict(f"Thread {target_id!r} already has checkpoints.", fields={"thread_id": ["already has checkpoints."]})
    if created:
        target.metadata = source.metadata
        target.save(update_fields=["metadata", "updated_at"])
    # The copy holds every channel itself: the source's blocks stay the source's.
    sources = list(CheckpointWrite.objects.filter(thread=source).order_by("id"))
    originals = checkpoints_hydrate(list(Checkpoint.objects.filter(thread=source).order_by("id")), also=writes_held(sources))
    writes_expand(sources)
    copies = [
        Checkpoint(
            thread=target,
            checkpoint_ns=row.checkpoint_ns,
            checkpoint_id=row.checkpoint_id,
            parent_checkpoint_id=row.parent_checkpoint_id,
            checkpoint=row.checkpoint,
            metadata=row.metadata,
            run_id=row.run_id,
            node_id=row.node_id,
            next_node_id=row.next_node_id,
            created_at=row.created_at,
        )
        for row in originals
    ]
    # Rows of one INSERT take increasing keys in list order: the copy keeps the history order.
    Checkpoint.objects.bulk_create(copies, batch_size=500)
    writes = [
        CheckpointWrite(
            thread=target,
            checkpoint_ns=write.checkpoint_ns,
            checkpoint_id=write.checkpoint_id,
            task_id=write.task_id,
            task_path=write.task_path,
            idx=write.idx,
            channel=write.channel,
            value=_json_field_value(write.value),
            created_at=write.created_at,
        )
        for write in sources
    ]
    CheckpointWrite.objects.bulk_create(writes, batch_size=1000)
    status_touch(target.pk, touch=False)  # the source's status, as read from the copies (status.py)
    return target

@transaction.atomic
def thread_create(*, actor, thread_id: Any = None, metadata: Any = None, if_exists: Any = None) -> tuple[Thread, bool]:
    """LangGraph's thread create: the id is optional (a uuid is made), metadata is stored.

    `if_exists` "raise" (the default) answers 409 when the id is taken;
    "do_nothing" returns the existing thread when the actor may read it (403 otherwise).
    """
    if if_exists is None:
        if_exists = "raise"
    if if_exists not in ("raise", "do_nothing"):
        raise InvalidInput("if_exists must be raise or do_nothing.", fields={"if_exists": ["must be raise or do_nothing."]})
    metadata = _json_object(metadata, "metadata")
    thread_id = str(uuid.uuid4()) if thread_id is None else thread_id
    thread_id_validate(thread_id)
    _ensure_may_write(actor, thread_id, "thread.create")
    if Thread.objects.filter(thread_id=thread_id).exists():
        if if_exists == "raise":
            raise Conflict(f"Thread {thread_id!r} already exists.", fields={"thread_id": ["already exists."]})
        return thread_get_for_read(actor=actor, thread_id=thread_id), False
    try:
        with transaction.atomic():
            thread = Thread.objects.create(thread_id=thread_id, owner=actor, metadata=metadata)
    except IntegrityError:
        if if_exists == "raise":
            raise Conflict(f"Thread {thread_id!r} already exists.", fields={"thread_id": ["already exists."]}) from None
        return thread_get_for_read(actor=actor, thread_id=thread_id), False
    return thread, True

@transaction.atomic
def thread_update_metadata(*, actor, thread_id: str, metadata: Any) -> Thread:
    """LangGraph's thread update: the given metadata keys are merged into the thread's (owner only)."""
    metadata = _json_object(metadata, "metadata", required=True)
    thread, _ = _thread_for_write(actor=actor, thread_id=thread_id, action="thread.update", create=False)
    # Each update is checked, and so is what they add up to.
    thread.metadata = _json_object({**(thread.metadata or {}), **metadata}, "metadata")
    thread.save(update_fields=["metadata", "updated_at"])
    return thread
