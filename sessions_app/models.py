from __future__ import annotations

import re

from django.conf import settings
from django.db import models
from django.utils import timezone

from memoryadmin import roles

# "search" is reserved: /threads/search is LangGraph's search action, so a thread of that
# name could be written (its agent-state) but never read, patched or deleted.
THREAD_ID_RE = re.compile(r"^(?!search$)[A-Za-z0-9_.:@$-]{1,64}$")
TITLE_MAX = 50


class ThreadQuerySet(models.QuerySet):
    def visible_to(self, user) -> "ThreadQuerySet":
        """Members see their own threads; operators and admins see every thread."""
        if roles.can_read_all(user):
            return self
        if user is None or not user.is_authenticated:
            return self.none()
        return self.filter(owner=user)


class Thread(models.Model):
    """One agent session (seed table ac_agent_session)."""

    thread_id = models.CharField(max_length=64, unique=True)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="threads")
    agent_code = models.CharField(max_length=64, blank=True)
    title = models.CharField(max_length=TITLE_MAX, blank=True)
    extra_state = models.JSONField(null=True, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    # Highest seq ever given in this thread, archived rows included: new blocks
    # continue from here, so a seq is never reused (the seed's V2.7 bug).
    last_seq = models.BigIntegerField(default=0)
    # Number of rewrites (compactions or in-place edits); blocks remember which one archived them.
    rewrite_count = models.IntegerField(default=0)
    active_count = models.IntegerField(default=0)
    archived_count = models.IntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = ThreadQuerySet.as_manager()

    class Meta:
        ordering = ["-updated_at", "-id"]
        indexes = [
            models.Index(fields=["owner", "-updated_at"], name="thread_owner_updated_idx"),
            models.Index(fields=["-updated_at", "-id"], name="thread_updated_idx"),
            models.Index(fields=["agent_code", "-updated_at"], name="thread_agent_updated_idx"),
        ]

    def __str__(self) -> str:
        return self.thread_id


class ThreadScoped(models.Model):
    """A row that lives in one thread: what partitioning or distributing by thread needs.

    Every statement about such a row names its thread, so a table hash-partitioned
    (or distributed) by `thread_id` answers it from one partition (docs/scaling.md).
    """

    class Meta:
        abstract = True

    def save_in_thread(self, update_fields: list[str]) -> None:
        """Write these fields of this row, found by its thread and its id (not by id alone)."""
        values = {}
        for name in update_fields:
            field = self._meta.get_field(name)
            if getattr(field, "auto_now", False):
                setattr(self, field.attname, timezone.now())
            values[field.attname] = getattr(self, field.attname)
        type(self)._base_manager.filter(thread_id=self.thread_id, pk=self.pk).update(**values)


def turns_delete(turns: models.QuerySet) -> int:
    """Delete these turns (a queryset filtered by thread) with their chunks; the number of turns.

    The turns go by the queryset's own filter, not by a list of their ids as a cascading
    delete would, so the statement stays in the thread's partition.
    """
    TurnChunk.objects.filter(turn__in=turns).delete()
    return turns._raw_delete(turns.db)


def thread_rows_delete(thread: Thread) -> None:
    """Delete everything a thread holds, each table by `thread_id` (a thread's delete then
    finds nothing left to collect row by row, which Django does by lists of ids)."""
    turns_delete(Turn.objects.filter(thread=thread))
    for model in (CheckpointWrite, Checkpoint, Block):
        model.objects.filter(thread=thread)._raw_delete(model.objects.db)


class Block(ThreadScoped):
    """One message of a thread (seed table ac_agent_block)."""

    class Role(models.TextChoices):
        USER = "user"
        ASSISTANT = "assistant"
        SYSTEM = "system"
        TOOL = "tool"

    thread = models.ForeignKey(Thread, on_delete=models.CASCADE, related_name="blocks")
    agent_code = models.CharField(max_length=64, blank=True)
    seq = models.BigIntegerField()
    # Index of the message in the active context it belongs to (0-based).
    position = models.IntegerField()
    role = models.CharField(max_length=16, choices=Role.choices)
    content = models.TextField(blank=True)
    message = models.JSONField()
    block_type = models.CharField(max_length=32, default="message")
    archived = models.BooleanField(default=False)
    # Which rewrite of the thread archived this block (null while active).
    archived_by = models.IntegerField(null=True, blank=True)
    archived_at = models.DateTimeField(null=True, blank=True)
    # Running SHA-256 over the canonical JSON of the context up to this message.
    chain_hash = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["seq"]
        constraints = [
            models.UniqueConstraint(fields=["thread", "agent_code", "seq"], name="block_thread_agent_seq_uniq"),
        ]
        indexes = [
            models.Index(fields=["thread", "agent_code", "archived", "seq"], name="block_active_idx"),
            models.Index(fields=["thread", "archived", "seq"], name="block_thread_archived_idx"),
            # The dashboard's saves per day and the search's date range (docs/operations.md).
            models.Index(fields=["created_at"], name="block_created_idx"),
            # Retention finds archived blocks past their age without scanning active ones.
            models.Index(fields=["archived_at"], name="block_archived_at_idx", condition=models.Q(archived=True)),
        ]

    def __str__(self) -> str:
        return f"{self.thread_id}#{self.seq} {self.role}"

    @property
    def tool_calls(self) -> list:
        calls = self.message.get("tool_calls") if isinstance(self.message, dict) else None
        return calls if isinstance(calls, list) else []


class Checkpoint(ThreadScoped):
    """One checkpoint of a thread: a snapshot of a graph's state (seed 000's saver, DESIGN §4).

    History order is insertion order (the primary key): a pushed checkpoint is the
    newest, a checkpoint replaced in place keeps its row and so its position.
    `checkpoint` holds the snapshot as readable JSON (see docs/checkpoints.md);
    `run_id` is copied out of `metadata` so that deleting a run's checkpoints is
    an indexed lookup.
    """

    thread = models.ForeignKey(Thread, on_delete=models.CASCADE, related_name="checkpoints")
    checkpoint_ns = models.CharField(max_length=512, blank=True, default="")
    checkpoint_id = models.CharField(max_length=128)
    # "" when the checkpoint has no parent.
    parent_checkpoint_id = models.CharField(max_length=128, blank=True, default="")
    checkpoint = models.JSONField(default=dict)
    metadata = models.JSONField(default=dict, blank=True)
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
            models.Index(fields=["run_id"], name="checkpoint_run_idx"),
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

    thread = models.ForeignKey(Thread, on_delete=models.CASCADE, related_name="checkpoint_writes")
    checkpoint_ns = models.CharField(max_length=512, blank=True, default="")
    checkpoint_id = models.CharField(max_length=128)
    task_id = models.CharField(max_length=255)
    task_path = models.CharField(max_length=1024, blank=True, default="")
    idx = models.IntegerField()
    channel = models.CharField(max_length=255)
    value = models.JSONField()
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


# --- operations: retention policies and runs, bulk jobs ------------------------------------------


class RetentionPolicy(models.Model):
    """How long one agent's data is kept (docs/operations.md, "Retention").

    A thread follows the policy of its agent_code; the policy with the empty
    agent_code is the default for every agent without a policy of its own. An
    empty field means "keep forever" for that rule. Store items belong to no
    agent, so the store TTL is a field of the default policy only.
    """

    agent_code = models.CharField(max_length=64, unique=True, blank=True)
    # Keep the newest N checkpoints of each thread (per checkpoint namespace).
    keep_checkpoints = models.PositiveIntegerField(null=True, blank=True)
    # Release (delete every checkpoint of) threads with no activity for D days.
    release_idle_days = models.PositiveIntegerField(null=True, blank=True)
    # Delete archived blocks archived more than D days ago.
    purge_archived_days = models.PositiveIntegerField(null=True, blank=True)
    # Delete store items without a TTL of their own not updated for D days (default policy only).
    store_ttl_days = models.PositiveIntegerField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["agent_code"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(agent_code="") | models.Q(store_ttl_days__isnull=True),
                name="retention_store_ttl_default_only",
            ),
            models.CheckConstraint(condition=models.Q(keep_checkpoints__gte=1), name="retention_keep_at_least_one"),
        ]

    def __str__(self) -> str:
        return self.agent_code or "(default)"

    @property
    def is_default(self) -> bool:
        return self.agent_code == ""


class RetentionRun(models.Model):
    """One `retention apply` (from cron or the dashboard) and what it removed.

    Dry runs are not stored: a dry run writes nothing at all.
    """

    class Status(models.TextChoices):
        RUNNING = "running"
        DONE = "done"
        PARTIAL = "partial"
        FAILED = "failed"

    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    actor_name = models.CharField(max_length=150, blank=True)
    via = models.CharField(max_length=16, default="cli")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.RUNNING)
    # The instant every cutoff was computed from.
    cutoff_now = models.DateTimeField()
    started_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    batches = models.IntegerField(default=0)
    counts = models.JSONField(default=dict, blank=True)
    policies = models.JSONField(default=list, blank=True)
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"retention run {self.pk} ({self.status})"


class BulkJob(models.Model):
    """A bulk action over threads, processed in batches (docs/operations.md, "Bulk actions").

    The selection is a list of thread ids or a thread-list filter; a filter is
    bounded by `max_pk` (threads created after the preview are not touched) and
    walked by primary key from `cursor`, one short transaction per batch.
    """

    class Action(models.TextChoices):
        CLEAR = "clear"
        RELEASE = "release"
        PURGE = "purge"

    class Status(models.TextChoices):
        PENDING = "pending"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"

    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    actor_name = models.CharField(max_length=150, blank=True)
    action = models.CharField(max_length=16, choices=Action.choices)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    selection = models.JSONField(default=dict)
    max_pk = models.BigIntegerField(default=0)
    cursor = models.BigIntegerField(default=0)
    total = models.IntegerField(default=0)
    processed = models.IntegerField(default=0)
    preview = models.JSONField(default=dict, blank=True)
    counts = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]
        indexes = [models.Index(fields=["status", "id"], name="bulkjob_status_idx")]

    def __str__(self) -> str:
        return f"bulk {self.action} #{self.pk} ({self.status})"

    @property
    def is_finished(self) -> bool:
        return self.status in (self.Status.DONE, self.Status.FAILED)

    @property
    def percent(self) -> int:
        if self.is_finished and self.status == self.Status.DONE:
            return 100
        return min(100, int(self.processed * 100 / self.total)) if self.total else 0


class Turn(ThreadScoped):
    """One question-and-answer turn of a thread's business-layer dialogue (docs/turns.md).

    A thread has at most one pending turn (its answer still streaming in as
    TurnChunk rows) and a sliding window of finished turns, oldest dropped first
    (seed 000's MultiTurnContextManager, kept in the database so that every server
    process sees the same state).
    """

    class Status(models.TextChoices):
        PENDING = "pending"
        FINISHED = "finished"

    thread = models.ForeignKey(Thread, on_delete=models.CASCADE, related_name="turns")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    # Order of the turns in the thread; a restarted turn keeps its number.
    seq = models.IntegerField()
    question = models.TextField()
    answer = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["thread", "seq"], name="turn_thread_seq_uniq"),
            # One pending turn per thread, whatever the number of server processes.
            models.UniqueConstraint(
                fields=["thread"], condition=models.Q(status="pending"), name="turn_one_pending_per_thread"
            ),
        ]
        indexes = [models.Index(fields=["thread", "status", "seq"], name="turn_thread_status_seq_idx")]

    def __str__(self) -> str:
        return f"turn {self.seq} of {self.thread_id} ({self.status})"


class TurnChunk(models.Model):
    """A streamed piece of a pending turn's answer; `index` orders them (0, 1, 2…)."""

    turn = models.ForeignKey(Turn, on_delete=models.CASCADE, related_name="chunks")
    index = models.IntegerField()
    text = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["turn", "index"], name="turnchunk_turn_index_uniq")]

    def __str__(self) -> str:
        return f"chunk {self.index} of turn {self.turn_id}"
