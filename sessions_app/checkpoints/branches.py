"""Branches of a thread's checkpoint history, for the timeline and the thread page.

A history is a tree: each checkpoint names the one it went on from
(`parent_checkpoint_id`, rule C7). Run after run, the parent is the checkpoint made
just before in the same namespace; a checkpoint whose parent is an older one starts
a **branch** (a fork: time travel, `update_state` from an earlier checkpoint, a
replay). The **latest branch** of a namespace is the chain of parents from its
newest checkpoint back to a root: what the graph resumes from.

Both are read in a constant number of queries, whatever the length of the history:
"the checkpoint just before" is a correlated subquery, the latest branch a recursive
query that follows parent ids inside the thread.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import connections, router
from django.db.models import F, OuterRef, Q, QuerySet, Subquery

from ..threads.models import Thread
from .models import Checkpoint

FORKS_SHOWN = 10


def previous_in_time() -> Subquery:
    """Inside a query on checkpoints: the id of the checkpoint made just before, in the same namespace."""
    return Subquery(
        Checkpoint.objects.filter(thread=OuterRef("thread"), checkpoint_ns=OuterRef("checkpoint_ns"), pk__lt=OuterRef("pk"))
        .order_by("-pk")
        .values("checkpoint_id")[:1]
    )


def is_fork(parent_checkpoint_id: str, previous_id: str | None) -> bool:
    """A checkpoint that goes on from another than the one made just before it."""
    return bool(parent_checkpoint_id) and parent_checkpoint_id != previous_id


def forks_of(thread: Thread) -> QuerySet[Checkpoint]:
    """The thread's checkpoints that start a branch (one query when evaluated)."""
    return (
        Checkpoint.objects.filter(thread=thread)
        .exclude(parent_checkpoint_id="")
        .annotate(previous_id=previous_in_time())
        .filter(Q(previous_id__isnull=True) | ~Q(previous_id=F("parent_checkpoint_id")))
    )


def latest_branch_ids(thread: Thread, pks: list[int], checkpoint_ns: str | None = None) -> set[int]:
    """Which of these checkpoints (primary keys) lie on the latest branch of their namespace.

    One recursive query: from the newest checkpoint of each namespace (or of the one
    given) along parent ids, within the thread. UNION (not UNION ALL) stops at a
    checkpoint already reached, so even a stored cycle of parent ids ends.
    """
    if not pks:
        return set()
    table = connections[router.db_for_read(Checkpoint)].ops.quote_name(Checkpoint._meta.db_table)
    seed_ns = "" if checkpoint_ns is None else " AND checkpoint_ns = %s"
    sql = (
        f"WITH RECURSIVE branch(id, checkpoint_ns, parent) AS ("
        f" SELECT id, checkpoint_ns, parent_checkpoint_id FROM {table}"
        f" WHERE id IN (SELECT MAX(id) FROM {table} WHERE thread_id = %s{seed_ns} GROUP BY checkpoint_ns)"
        f" UNION"
        f" SELECT c.id, c.checkpoint_ns, c.parent_checkpoint_id FROM {table} c JOIN branch b"
        f" ON c.thread_id = %s AND c.checkpoint_ns = b.checkpoint_ns AND c.checkpoint_id = b.parent"
        f") SELECT id FROM branch WHERE id IN ({', '.join(['%s'] * len(pks))})"
    )
    params: list[Any] = [thread.pk, *([] if checkpoint_ns is None else [checkpoint_ns]), thread.pk, *pks]
    with connections[router.db_for_read(Checkpoint)].cursor() as cursor:
        cursor.execute(sql, params)
        return {row[0] for row in cursor.fetchall()}


@dataclass
class Fork:
    checkpoint: Checkpoint
    step: Any
    on_latest_branch: bool


@dataclass
class Branches:
    """The thread page's summary: how many checkpoints, how many branches, the newest forks."""

    thread: Thread
    total: int
    fork_count: int
    forks: list[Fork]

    @property
    def branch_count(self) -> int:
        """Every fork adds a branch to the first one (none without checkpoints)."""
        return self.fork_count + 1 if self.total else 0


def checkpoint_branches_in(*, thread: Thread) -> Branches:
    """The branches of a thread already checked for reading (four queries)."""
    total = Checkpoint.objects.filter(thread=thread).count()
    forks_qs = forks_of(thread)
    fork_count = forks_qs.count() if total else 0
    rows = list(forks_qs.defer("checkpoint").order_by("-id")[:FORKS_SHOWN]) if fork_count else []
    on_branch = latest_branch_ids(thread, [row.pk for row in rows])
    forks = []
    for row in rows:
        row.thread = thread
        meta = row.metadata if isinstance(row.metadata, dict) else {}
        forks.append(Fork(checkpoint=row, step=meta.get("step", ""), on_latest_branch=row.pk in on_branch))
    return Branches(thread=thread, total=total, fork_count=fork_count, forks=forks)
