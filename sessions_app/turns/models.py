"""Live turns: a question, its answer streamed in chunks (docs/turns.md)."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from ..threads.models import Thread, ThreadScoped


def turns_delete(turns: models.QuerySet) -> int:
    """Delete these turns (a queryset filtered by thread) with their chunks; the number of turns.

    The turns go by the queryset's own filter, not by a list of their ids as a cascading
    delete would, so the statement stays in the thread's partition.
    """
    TurnChunk.objects.filter(turn__in=turns).delete()
    return turns._raw_delete(turns.db)


class Turn(ThreadScoped):
    """One question-and-answer turn of a thread's business-layer dialogue (docs/turns.md).

    A thread has at most one pending turn (its answer still streaming in as
    TurnChunk rows) and a sliding window of finished turns, oldest dropped first
    (docs/turns.md, rules T1-T5: a multi-turn context manager kept in the database so
    that every server process sees the same state).
    """

    class Status(models.TextChoices):
        PENDING = "pending"
        FINISHED = "finished"

    thread = models.ForeignKey(Thread, on_delete=models.CASCADE, related_name="turns", db_index=False)
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

    @classmethod
    def rows_delete(cls, rows: models.QuerySet) -> int:
        """A turn's chunks go with it."""
        return turns_delete(rows)

    def __str__(self) -> str:
        return f"turn {self.seq} of {self.thread_id} ({self.status})"


class TurnChunk(models.Model):
    """A streamed piece of a pending turn's answer; `index` orders them (0, 1, 2…)."""

    # No index of its own: turnchunk_turn_index_uniq leads with it.
    turn = models.ForeignKey(Turn, on_delete=models.CASCADE, related_name="chunks", db_index=False)
    index = models.IntegerField()
    text = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["turn", "index"], name="turnchunk_turn_index_uniq")]

    def __str__(self) -> str:
        return f"chunk {self.index} of turn {self.turn_id}"


class TurnStreamLease(models.Model):
    """One open live-turn stream, counted against the open-stream limits (sessions_app.turns.streams).

    The row lives as long as the stream: written before its first byte, renewed at
    each heartbeat, deleted when it ends. A row not renewed for
    MEMORYADMIN_TURN_SSE_LEASE_SECONDS belongs to a worker that was killed and no
    longer counts. Transport bookkeeping, not thread data: it names the thread
    without a foreign key and is not part of the thread's rows.
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    thread_id = models.CharField(max_length=64)
    # The server (MEMORYADMIN_SERVER_NAME) and its worker process holding the stream.
    server = models.CharField(max_length=255)
    pid = models.IntegerField()
    opened_at = models.DateTimeField()
    renewed_at = models.DateTimeField()

    class Meta:
        indexes = [
            models.Index(fields=["server", "pid"], name="turnstream_server_pid_idx"),
            models.Index(fields=["renewed_at"], name="turnstream_renewed_idx"),
        ]

    def __str__(self) -> str:
        return f"stream of {self.thread_id} for user {self.user_id} on {self.server}:{self.pid}"
