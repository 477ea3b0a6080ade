"""A thread's status as LangGraph reads it, kept on the thread row (`Thread.lg_status`).

The status is `error` when an error is pending against the thread's latest root checkpoint,
`interrupted` when an interrupt is or a node is still to run, else `idle` (a thread with no
checkpoint is idle; nothing here is ever `busy`). It is read from the latest root checkpoint
and its pending writes (`status_expression`), and every write that can change it stores it
again on the thread row, so that a list filtered or sorted by status reads one column
(an index serves the threads that are not idle) instead of computing it for every thread:

- a root checkpoint put, in the statement that touches the thread row (the fast path's one
  statement, fastpath.py's `_STATUS`; the general path's update of the row, `status_touch`);
- a root checkpoint replaced in place (`status_touch`);
- a task's error or interrupt written against a root checkpoint (`status_refresh`);
- checkpoints or pending writes removed (release, delete, prune, retention, erase:
  `removal.py` calls `status_refresh` for the threads they were in), a thread copied.

`status_refresh` locks the thread rows before it reads: on PostgreSQL its reading statement
then sees every put and write committed before the lock was granted, and a put waiting for
the lock sets the status itself when it goes on. The column is written only here and in the
put's statement, each holding the row's lock; a thread row saved whole (the conversation
store's locked saves, a clear) is read under that lock too, so it writes back the status it
read. `manage.py verify` finds a row whose stored
status differs from the one read from its checkpoints (docs/operations.md).
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db import transaction
from django.db.models import Case, Exists, Expression, F, OuterRef, Q, Subquery, Value, When
from django.db.models.functions import Coalesce
from django.utils import timezone

from ..threads.models import Thread
from .models import Checkpoint, CheckpointWrite
from .wire import ERROR, INTERRUPT

IDLE, INTERRUPTED, FAILED = "idle", "interrupted", "error"
# Threads refreshed per statement.
CHUNK = 500


def status_expression() -> Expression:
    """The status of the thread the outer query's row is (a query on threads)."""
    latest = Checkpoint.objects.filter(thread=OuterRef("pk"), checkpoint_ns="").order_by("-id")
    pending = CheckpointWrite.objects.filter(
        thread=OuterRef("thread"), checkpoint_ns="", checkpoint_id=OuterRef("checkpoint_id")
    )
    status = latest.annotate(
        status=Case(
            When(Exists(pending.filter(channel=ERROR)), then=Value(FAILED)),
            When(Q(Exists(pending.filter(channel=INTERRUPT))) | Q(next_node_id__gt=""), then=Value(INTERRUPTED)),
            default=Value(IDLE),
        )
    ).values("status")[:1]
    return Coalesce(Subquery(status), Value(IDLE))


def status_touch(thread_pk: int, *, touch: bool = True) -> None:
    """The thread's status stored again (and its `updated_at` moved, with `touch`), in one
    statement: for the general path of a root checkpoint's put, its row already locked."""
    changes = {"lg_status": status_expression()}
    if touch:
        changes["updated_at"] = timezone.now()
    Thread.objects.filter(pk=thread_pk).update(**changes)


def status_refresh(thread_pks: Iterable[int]) -> None:
    """These threads' statuses stored again, their rows locked first (in order, `CHUNK` at a time)."""
    pks = sorted(set(thread_pks))
    for start in range(0, len(pks), CHUNK):
        chunk = pks[start : start + CHUNK]
        with transaction.atomic():
            list(Thread.objects.select_for_update(no_key=True).filter(pk__in=chunk).order_by("pk").values_list("pk"))
            Thread.objects.filter(pk__in=chunk).update(lg_status=status_expression())


def status_refresh_named(thread_id: str) -> None:
    """`status_refresh` of the thread named `thread_id` (the writes' fast path knows it by name)."""
    with transaction.atomic():
        locked = list(Thread.objects.select_for_update(no_key=True).filter(thread_id=thread_id).order_by().values_list("pk", flat=True))
        if locked:
            Thread.objects.filter(pk=locked[0]).update(lg_status=status_expression())


def writes_change_status(checkpoint_ns: str, channels: Iterable[str]) -> bool:
    """Whether writes on these channels can change their thread's status: an error or an
    interrupt against a root checkpoint."""
    return checkpoint_ns == "" and any(channel in (ERROR, INTERRUPT) for channel in channels)


def statuses_stale(threads):
    """(pk, thread_id, stored, read) of the threads among `threads` whose stored status is not the
    one read from their checkpoints (a query: `manage.py verify` reads it in chunks)."""
    rows = threads.annotate(read_status=status_expression()).exclude(lg_status=F("read_status"))
    return rows.order_by("pk").values_list("pk", "thread_id", "lg_status", "read_status")
