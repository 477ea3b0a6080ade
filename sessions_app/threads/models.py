"""Threads and their blocks: the conversation store's tables (docs/architecture.md)."""

from __future__ import annotations

import re

from django.conf import settings
from django.apps import apps
from django.db import models
from django.db.models import Q
from django.utils import timezone

from memoryadmin import policy
from memoryadmin.jsonfield import StoredJSONField

# "search" is reserved: /threads/search is LangGraph's search action, so a thread of that
# name could be written (its agent-state) but never read, patched or deleted. "." and ".."
# are path steps to browsers and HTTP clients, which resolve them before sending: a thread
# of either name could never be reached by its URL. Anchored with \A and \Z (not ^ and $,
# which let a trailing newline through), so `.match` and `.fullmatch` both mean the whole id.
THREAD_ID_RE = re.compile(r"\A(?!(?:search|\.|\.\.)\Z)[A-Za-z0-9_.:@$-]{1,64}\Z")
RESERVED_THREAD_IDS = frozenset({"search", ".", ".."})
THREAD_ID_RULE = '1 to 64 characters of A-Z a-z 0-9 _ . : @ $ -, not "search", ".", or ".."'
TITLE_MAX = 50


class ThreadQuerySet(models.QuerySet):
    def visible_to(self, user) -> "ThreadQuerySet":
        """Members see their own threads; operators and admins see every thread (memoryadmin.policy)."""
        return policy.restrict(self, user)


class Thread(models.Model):
    """One agent session: its owner, agent, counters and extra_state (docs/architecture.md, "The conversation store")."""

    thread_id = models.CharField(max_length=64, unique=True)
    # No index of its own: thread_owner_updated_idx leads with it (every put updates a thread row,
    # and each index of the row takes an entry then).
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="threads", db_index=False)
    agent_code = models.CharField(max_length=64, blank=True)
    title = models.CharField(max_length=TITLE_MAX, blank=True)
    extra_state = StoredJSONField(null=True, blank=True)
    metadata = StoredJSONField(default=dict, blank=True)
    # Highest seq ever given in this thread, archived rows included: new blocks
    # continue from here, so a seq is never reused (docs/architecture.md, rule S6).
    last_seq = models.BigIntegerField(default=0)
    # Number of rewrites (compactions or in-place edits); blocks remember which one archived them.
    rewrite_count = models.IntegerField(default=0)
    active_count = models.IntegerField(default=0)
    archived_count = models.IntegerField(default=0)
    # When this thread's open live streams were last told to end while the thread stays (cleared,
    # its checkpoints released or deleted), and why (a key of notify.ENDS): what a stream that
    # polls (SQLite) or missed the notification reads instead (sessions_app/threads/notify.py).
    streams_ended = models.CharField(max_length=32, blank=True, db_default="")
    streams_ended_at = models.DateTimeField(null=True, blank=True)
    # LangGraph's status of the thread (idle, interrupted, error), read from its latest root
    # checkpoint and that checkpoint's pending writes, and stored again by every write that
    # can change it (sessions_app/checkpoints/status.py): lists filter and sort on the column.
    lg_status = models.CharField(max_length=16, default="idle", db_default="idle")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = ThreadQuerySet.as_manager()

    class Meta:
        ordering = ["-updated_at", "-id"]
        indexes = [
            models.Index(fields=["owner", "-updated_at"], name="thread_owner_updated_idx"),
            models.Index(fields=["-updated_at", "-id"], name="thread_updated_idx"),
            models.Index(fields=["agent_code", "-updated_at"], name="thread_agent_updated_idx"),
            # The threads a status filter looks for: most are idle, and their rows stay out of it.
            models.Index(
                fields=["lg_status", "-updated_at", "-id"], name="thread_status_updated_idx", condition=~Q(lg_status="idle")
            ),
        ]

    def __str__(self) -> str:
        return self.thread_id


class ThreadScoped(models.Model):
    """A row that lives in one thread: what partitioning or distributing by thread needs.

    Every statement about such a row names its thread, so a table hash-partitioned
    (or distributed) by `thread_id` answers it from one partition (docs/scaling.md).
    Their foreign key to the thread has no index of its own (`db_index=False`): each such
    model's unique constraint or indexes lead with `thread_id` and serve its lookups, and
    every insert would write the extra index too.
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

    @classmethod
    def rows_delete(cls, rows: models.QuerySet) -> int:
        """Delete these rows (a queryset filtered by thread) by the queryset's own filter, not
        by a list of their ids as a cascading delete would, so the statement stays in the
        thread's partition. A model whose rows own rows of another table overrides this."""
        return rows._raw_delete(rows.db)


def thread_rows_delete(thread: Thread) -> None:
    """Delete everything a thread holds, each table by `thread_id` (a thread's delete then
    finds nothing left to collect row by row, which Django does by lists of ids).

    Every model that lives in a thread is a `ThreadScoped`, so the rows of every domain
    (blocks, checkpoints and their writes, turns) go without this floor naming them.
    """
    for model in apps.get_models():
        if issubclass(model, ThreadScoped):
            model.rows_delete(model._base_manager.filter(thread=thread))


def threads_rows_delete(thread_pks: list[int]) -> None:
    """`thread_rows_delete` for many threads: one statement per table, whatever their number."""
    for model in apps.get_models():
        if issubclass(model, ThreadScoped):
            model.rows_delete(model._base_manager.filter(thread__in=thread_pks))


class Block(ThreadScoped):
    """One message of a thread, active or archived by a rewrite (docs/architecture.md, rules S4-S6)."""

    class Role(models.TextChoices):
        USER = "user"
        ASSISTANT = "assistant"
        SYSTEM = "system"
        TOOL = "tool"

    thread = models.ForeignKey(Thread, on_delete=models.CASCADE, related_name="blocks", db_index=False)
    agent_code = models.CharField(max_length=64, blank=True)
    seq = models.BigIntegerField()
    # Index of the message in the active context it belongs to (0-based).
    position = models.IntegerField()
    role = models.CharField(max_length=16, choices=Role.choices)
    content = models.TextField(blank=True)
    message = StoredJSONField()
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
