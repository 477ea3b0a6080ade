"""Open live-turn streams: how many may be open, and the leases that count them (docs/turns.md, "Limits").

Under the ASGI server an open stream is a coroutine (sessions_app/turns/live.py) and
holds no worker thread; the limits bound what one user opens and what one worker process
and one server give to streams (memory, event-loop time, file descriptors). The rules:

- open: a stream is refused with 429 (`StreamLimitReached`, with a Retry-After)
  when its user already has MEMORYADMIN_TURN_STREAMS_PER_USER streams open
  (anywhere), when this server has MEMORYADMIN_TURN_STREAMS_PER_SERVER, or when
  this worker process has MEMORYADMIN_TURN_STREAMS_PER_PROCESS. The process limit
  is there because the kernel does not spread connections evenly over the worker
  processes: without it one process could take most of the server's streams.
- the count: one lease row per open stream, in the database, so that every worker
  process and every server see the same numbers. Opens are serialised (a
  transaction-scoped advisory lock on PostgreSQL, the write lock taken at BEGIN on
  SQLite), so two processes cannot both take the last place.
- renew: the streams of one process renew their leases together, in one statement,
  every half heartbeat: on PostgreSQL on the listener's own connection, so that no
  thread or pooled connection is waited for, else in a thread at a stream's heartbeat
  (sessions_app/turns/live.py, `Leases`); a lease not renewed for
  MEMORYADMIN_TURN_SSE_LEASE_SECONDS (its worker was killed) no longer counts and is
  deleted by the next open.
- release: the lease goes when the stream ends, whatever the reason (the client
  left, the turn finished, the maximum time, an error: the stream's finally block).
"""

from __future__ import annotations

import logging
import math
import os
from datetime import timedelta

from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.utils import timezone

from memoryadmin.errors import DomainError
from sessions_app.threads.models import Thread
from sessions_app.turns.models import TurnStreamLease

log = logging.getLogger(__name__)

# Any fixed 64-bit number names the advisory lock; this one spells "ma_strm".
OPEN_LOCK_KEY = 0x6D615F7374726D
# A refusal by this process alone: another process of the server may have room at once.
PROCESS_RETRY_AFTER = 1


class StreamLimitReached(DomainError):
    """Too many live streams open for this user, this server or this worker process."""

    status = 429
    code = "too_many_streams"

    def __init__(self, message: str, *, scope: str, retry_after: int):
        super().__init__(message)
        self.scope = scope
        self.retry_after = retry_after


def lease_seconds() -> float:
    return float(settings.MEMORYADMIN_TURN_SSE_LEASE_SECONDS)


def _serialise_opens() -> None:
    """Make the opens' count-then-insert one at a time, across processes and servers."""
    if connection.vendor == "postgresql":
        # Transaction-scoped: released at commit or rollback, and it works through
        # PgBouncer in transaction mode (a session-level lock would not).
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [OPEN_LOCK_KEY])
    # SQLite: the settings open every transaction with BEGIN IMMEDIATE, which takes the
    # database's write lock; the next open waits for this one to commit.


def stream_open(*, actor, thread: Thread) -> TurnStreamLease:
    """A lease for a new stream of `thread` watched by `actor`, or StreamLimitReached.

    The caller has checked that the actor may read the thread. Enforces the three
    limits, user first (the caller's own streams), then server, then process.
    """
    server, pid = settings.MEMORYADMIN_SERVER_NAME, os.getpid()
    retry_after = math.ceil(lease_seconds())
    with transaction.atomic():
        _serialise_opens()
        now = timezone.now()
        TurnStreamLease.objects.filter(renewed_at__lt=now - timedelta(seconds=lease_seconds())).delete()
        leases = TurnStreamLease.objects
        per_user = settings.MEMORYADMIN_TURN_STREAMS_PER_USER
        if leases.filter(user=actor).count() >= per_user:
            raise StreamLimitReached(
                f"You have {per_user} live stream(s) open, the most one user may have; "
                "close a page that follows a turn, or wait: the turns panel refreshes every 2 s.",
                scope="user", retry_after=retry_after,
            )
        per_server = settings.MEMORYADMIN_TURN_STREAMS_PER_SERVER
        if leases.filter(server=server).count() >= per_server:
            raise StreamLimitReached(
                f"This server has {per_server} live stream(s) open, its most; retry later.",
                scope="server", retry_after=retry_after,
            )
        per_process = settings.MEMORYADMIN_TURN_STREAMS_PER_PROCESS
        if leases.filter(server=server, pid=pid).count() >= per_process:
            raise StreamLimitReached(
                f"This server process has {per_process} live stream(s) open, its most; retry: another may have room.",
                scope="process", retry_after=PROCESS_RETRY_AFTER,
            )
        return TurnStreamLease.objects.create(
            user=actor, thread_id=thread.thread_id, server=server, pid=pid, opened_at=now, renewed_at=now
        )


def stream_renew_many(lease_ids: set[int]) -> set[int]:
    """Mark these streams alive now, in one statement; the ids whose leases are still there
    (a missing one expired and was deleted: its stream must end)."""
    if not lease_ids:
        return set()
    renewed = TurnStreamLease.objects.filter(pk__in=lease_ids).update(renewed_at=timezone.now())
    if renewed == len(lease_ids):
        return set(lease_ids)
    return set(TurnStreamLease.objects.filter(pk__in=lease_ids).values_list("pk", flat=True))


def stream_renew_statement(lease_ids: set[int], now) -> tuple[str, list]:
    """`stream_renew_many` as one SQL statement (PostgreSQL) for a connection of its own, the
    streams' listener's (sessions_app/turns/live.py, `Leases`): it returns the ids renewed."""
    meta = TurnStreamLease._meta
    quote = connection.ops.quote_name
    table, pk, renewed = quote(meta.db_table), quote(meta.pk.column), quote(meta.get_field("renewed_at").column)
    return f"UPDATE {table} SET {renewed} = %s WHERE {pk} = ANY(%s) RETURNING {pk}", [now, sorted(lease_ids)]


def stream_release(lease: TurnStreamLease) -> None:
    """Delete the stream's lease. If the database does not answer, the lease expires on its own."""
    try:
        TurnStreamLease.objects.filter(pk=lease.pk).delete()
    except DatabaseError:
        log.warning("stream lease %s not released; it expires in %s s", lease.pk, lease_seconds(), exc_info=True)
