"""Checkpoints and their pending writes (docs/checkpoints.md)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from memoryadmin.jsonfield import StoredJSONField

from ..threads.models import Thread, ThreadScoped


class Checkpoint(ThreadScoped):
    """One checkpoint of a thread: a snapshot of a graph's state (docs/checkpoints.md, rules C1-C5).

    History order is insertion order (the primary key): a pushed checkpoint is the
    newest, a checkpoint replaced in place keeps its row and so its position.
    `checkpoint` holds the snapshot as readable JSON (see docs/checkpoints.md);
    `run_id` is copied out of `metadata` so that deleting a run's checkpoints is
    an indexed lookup.
    """

    thread = models.ForeignKey(Thread, on_delete=models.CASCADE, related_name="checkpoints", db_index=False)
    checkpoint_ns = models.CharField(max_length=512, blank=True, default="")
    checkpoint_id = models.CharField(max_length=128)
    # "" when the checkpoint has no parent.
    parent_checkpoint_id = models.CharField(max_length=128, blank=True, default="")
    checkpoint = StoredJSONField(default=dict)
    # A root LangGraph checkpoint's messages channel, kept as the thread's blocks and held
    # here by reference ({"channel", "agent", "upto", "count"}; sessions_app/checkpoints/
    # conversation.py), left out of `checkpoint`; null when `checkpoint` holds every channel.
    messages_ref = StoredJSONField(null=True, blank=True, default=None)
    # The channels of `checkpoint` holding messages by reference to its messages channel
    # ({"$messages": ...} markers; sessions_app/checkpoints/references.py); null when none.
    refs = StoredJSONField(null=True, blank=True, default=None)
    # The channels whose value is stored once per version in CheckpointValue ({channel: [version,
    # digest]}; sessions_app/checkpoints/versions.py), left out of `checkpoint`; null when none.
    values_ref = StoredJSONField(null=True, blank=True, default=None)
    metadata = StoredJSONField(default=dict, blank=True)
    run_id = models.CharField(max_length=128, blank=True, default="")
    node_id = models.CharField(max_length=255, blank=True, default="")
    next_node_id = models.CharField(max_length=255, blank=True, default="")
    # Not auto_now_add: a copied checkpoint keeps the time it was first made.
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["thread", "checkpoint_ns", "checkpoint_id"], name="checkpoint_thread_ns_id_uniq"
            ),
        ]
        indexes = [
            models.Index(fields=["thread", "checkpoint_ns", "-id"], name="checkpoint_thread_ns_idx"),
            models.Index(fields=["thread", "-id"], name="checkpoint_thread_idx"),
            # Only checkpoints with a run id are looked up by it (delete_for_runs takes none empty).
            models.Index(fields=["run_id"], name="checkpoint_run_idx", condition=~models.Q(run_id="")),
        ]

    def __str__(self) -> str:
        ns = f"{self.checkpoint_ns}/" if self.checkpoint_ns else ""
        return f"{self.thread_id}:{ns}{self.checkpoint_id}"


class CheckpointWrite(ThreadScoped):
    """A pending write of a task against a checkpoint (LangGraph's checkpoint_writes).

    Keyed by (thread, checkpoint_ns, checkpoint_id), not by a foreign key to the
    checkpoint: LangGraph's loop sends a task's writes concurrently with the put
    of the checkpoint they belong to, so they may arrive first (its own savers
    have no such key either). One row per (task_id, idx): a retried task writes
    nothing twice. LangGraph's special channels (errors, interrupts, scheduled,
    resume) take negative indexes so they never collide with ordinary writes.
    """

    thread = models.ForeignKey(Thread, on_delete=models.CASCADE, related_name="checkpoint_writes", db_index=False)
    checkpoint_ns = models.CharField(max_length=512, blank=True, default="")
    checkpoint_id = models.CharField(max_length=128)
    task_id = models.CharField(max_length=255)
    task_path = models.CharField(max_length=1024, blank=True, default="")
    idx = models.IntegerField()
    channel = models.CharField(max_length=255)
    value = StoredJSONField()
    # The value holds messages by reference to its checkpoint's messages channel (references.py).
    refers = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        # LangGraph replays a super-step's writes in (task_path, task_id, idx) order.
        ordering = ["task_path", "task_id", "idx"]
        constraints = [
            models.UniqueConstraint(
                fields=["thread", "checkpoint_ns", "checkpoint_id", "task_id", "idx"],
                name="checkpoint_write_task_idx_uniq",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.thread_id}:{self.checkpoint_id}:{self.task_id}#{self.idx} {self.channel}"


class CheckpointValue(ThreadScoped):
    """A channel's value at one version, stored once for every checkpoint of the thread's
    namespace holding that version (LangGraph's checkpoint_blobs; versions.py).

    Keyed by the value's digest too: a version is LangGraph's promise that the value did not
    change, and the digest makes a checkpoint read back exactly even where a saver reused a
    version for another value. Removing checkpoints removes the values no checkpoint of the
    thread still holds (removal.py).
    """

    thread = models.ForeignKey(Thread, on_delete=models.CASCADE, related_name="checkpoint_values", db_index=False)
    checkpoint_ns = models.CharField(max_length=512, blank=True, default="")
    channel = models.CharField(max_length=255)
    version = models.CharField(max_length=128)
    digest = models.CharField(max_length=64)
    value = StoredJSONField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["thread", "checkpoint_ns", "channel", "version", "digest"], name="checkpoint_value_version_uniq"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.thread_id}:{self.checkpoint_ns}:{self.channel}@{self.version}"


class SavedThreadView(models.Model):
    """A named filter of the thread list, seen and deleted by its owner alone (docs/operations.md, "Saved views").

    `query` is the list's query string as `search.ThreadListQuery.querystring` writes
    it (defaults left out), so applying the view is following a link.
    """

    NAME_MAX = 80
    QUERY_MAX = 2000

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="saved_thread_views")
    name = models.CharField(max_length=NAME_MAX)
    query = models.CharField(max_length=QUERY_MAX, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name", "id"]
        constraints = [models.UniqueConstraint(fields=["owner", "name"], name="savedthreadview_owner_name_uniq")]

    def __str__(self) -> str:
        return f"{self.owner_id}:{self.name}"
