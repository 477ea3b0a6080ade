"""Data for the operations tests, written through the services (as agents write it)."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from sessions_app.checkpoints.services import checkpoint_input, checkpoint_put, checkpoint_put_writes, write_input
from sessions_app.models import Block, Checkpoint, CheckpointWrite, Thread
from sessions_app.threads.services import thread_save_agent_state
from store_app.models import StoreItem
from store_app.services import store_item_put


def turns(count: int, prefix: str = "m") -> list[dict]:
    return [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"{prefix} {i}", "id": f"{prefix}-{i}"}
        for i in range(count)
    ]


def save(user, thread_id: str, context: list[dict], agent: str = "bot", **kwargs):
    return thread_save_agent_state(actor=user, thread_id=thread_id, agent_code=agent, context=context, **kwargs)


def compacted(user, thread_id: str, count: int = 6, agent: str = "bot") -> Thread:
    """A thread with `count` archived blocks and one active summary."""
    save(user, thread_id, turns(count, thread_id), agent=agent)
    save(user, thread_id, [{"role": "system", "content": f"summary of {thread_id}", "name": "__compaction_summary__"}], agent=agent)
    return Thread.objects.get(thread_id=thread_id)


def checkpoints(user, thread_id: str, count: int, ns: str = "", writes: int = 1) -> list[str]:
    """A chain of `count` checkpoints (each the parent of the next), each with pending writes."""
    ids = []
    parent = None
    for i in range(count):
        data = checkpoint_input(
            checkpoint={"channel_values": {"step": i, "note": f"state {i} of {thread_id}"}},
            metadata={"step": i},
            checkpoint_ns=ns,
            parent_checkpoint_id=parent,
        )
        checkpoint_id = f"{ns or 'root'}-{i:04d}"
        checkpoint_put(actor=user, thread_id=thread_id, data=data, checkpoint_id=checkpoint_id)
        if writes:
            checkpoint_put_writes(
                actor=user,
                thread_id=thread_id,
                checkpoint_id=checkpoint_id,
                checkpoint_ns=ns,
                data=write_input(task_id=f"task-{i}", writes=[{"channel": "step", "value": i}] * writes),
            )
        ids.append(checkpoint_id)
        parent = checkpoint_id
    return ids


def store_item(user, namespace: list[str], key: str, ttl=None):
    return store_item_put(actor=user, namespace=namespace, key=key, value={"text": f"{key} in {'.'.join(namespace)}"}, ttl=ttl)


def age_thread(thread_id: str, days: float) -> None:
    Thread.objects.filter(thread_id=thread_id).update(updated_at=timezone.now() - timedelta(days=days))


def age_archived(thread_id: str, days: float) -> None:
    Block.objects.filter(thread__thread_id=thread_id, archived=True).update(archived_at=timezone.now() - timedelta(days=days))


def age_item(namespace: list[str], key: str, days: float) -> None:
    StoreItem.objects.filter(namespace_path=".".join(namespace), key=key).update(updated_at=timezone.now() - timedelta(days=days))


def broken_parents() -> list[str]:
    """Checkpoints whose parent id names a checkpoint that does not exist (must stay empty)."""
    existing = set(Checkpoint.objects.values_list("thread_id", "checkpoint_ns", "checkpoint_id"))
    return [
        f"{t}:{ns}:{cid}->{parent}"
        for t, ns, cid, parent in Checkpoint.objects.exclude(parent_checkpoint_id="").values_list(
            "thread_id", "checkpoint_ns", "checkpoint_id", "parent_checkpoint_id"
        )
        if (t, ns, parent) not in existing
    ]


def table_counts() -> dict[str, int]:
    from memoryadmin.models import AuditEvent
    from memoryadmin.operations.models import BulkJob, RetentionPolicy, RetentionRun

    return {
        "threads": Thread.objects.count(),
        "blocks": Block.objects.count(),
        "archived": Block.objects.filter(archived=True).count(),
        "checkpoints": Checkpoint.objects.count(),
        "writes": CheckpointWrite.objects.count(),
        "items": StoreItem.objects.count(),
        "audit": AuditEvent.objects.count(),
        "runs": RetentionRun.objects.count(),
        "policies": RetentionPolicy.objects.count(),
        "jobs": BulkJob.objects.count(),
    }
