"""Operations over threads and the store: retention policies and runs, bulk jobs.

The tables keep the names they were created with (`sessions_app_*`).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


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
        db_table = "sessions_app_retentionpolicy"
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
    """One apply (the command line, the queue's schedule or the page) and what it removed.

    Dry runs are not stored: a dry run writes nothing at all.
    """

    class Status(models.TextChoices):
        QUEUED = "queued"
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
        db_table = "sessions_app_retentionrun"
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
        db_table = "sessions_app_bulkjob"
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


class QueuedJob(models.Model):
    """What every job run by the queue keeps (docs/operations.md, "Jobs"): who asked, its
    status, the error that failed it, when it was made and finished."""

    class Status(models.TextChoices):
        PENDING = "pending"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"

    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    actor_name = models.CharField(max_length=150, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True
        ordering = ["-id"]

    @property
    def is_finished(self) -> bool:
        return self.status in (self.Status.DONE, self.Status.FAILED)


class EraseJob(QueuedJob):
    """An erase too large for one request, run by the job queue (docs/operations.md, "Erase a user").

    The receipt is the one `user_erase` returns (and records as the `user.erase` event).
    """

    username = models.CharField(max_length=150)
    revoke_access = models.BooleanField(default=False)
    preview = models.JSONField(default=dict, blank=True)
    receipt = models.JSONField(default=dict, blank=True)
    attempts = models.IntegerField(default=0)

    class Meta(QueuedJob.Meta):
        pass

    def __str__(self) -> str:
        return f"erase {self.username} #{self.pk} ({self.status})"


class ExportJob(QueuedJob):
    """A bulk export too large for one request, written to a file by the job queue
    (docs/operations.md, "Export"); the selection is frozen by `max_pk`, as a bulk job's."""

    selection = models.JSONField(default=dict)
    max_pk = models.BigIntegerField(default=0)
    total = models.IntegerField(default=0)
    size = models.BigIntegerField(default=0)

    class Meta(QueuedJob.Meta):
        pass

    def __str__(self) -> str:
        return f"export #{self.pk} ({self.status})"
