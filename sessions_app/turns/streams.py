"""Open live-turn streams: how many may be open, and the leases that count them (docs/turns.md, "Limits").

A live-turn stream holds a server worker thread for as long as it is open. The rules:

- open: a stream is refused with 429 (`StreamLimitReached`, with a Retry-After)
  when its user already has MEMORYADMIN_TURN_STREAMS_PER_USER streams open
  (anywhere), when this server has MEMORYADMIN_TURN_STREAMS_PER_SERVER, or when
  this worker process has MEMORYADMIN_TURN_STREAMS_PER_PROCESS. The process limit
  is there because gunicorn's threaded worker goes on accepting connections when
  all its threads are busy: a request that lands on a process whose threads all
  stream waits for a stream to end, however many threads other processes have free.
- the count: one lease row per open stream, in the database, so that every worker
  process and every server see the same numbers. Opens are serialised (a
  transaction-scoped advisory lock on PostgreSQL, the write lock taken at BEGIN on
  SQLite), so two processes cannot both take the last place.
- renew: each heartbeat of the stream renews its lease; a lease not renewed for
  MEMORYADMIN_TURN_SSE_LEASE_SECONDS (its worker was killed) no longer counts and is
  deleted by the next open.
- release: the lease goes when the stream ends, whatever the reason (the client
  left, the turn finished, the maximum time, an error), and also when a response
  is closed before its first byte (`LeasedStream`).
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Iterator
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


def stream_renew(lease: TurnStreamLease) -> bool:
    """Mark the stream alive now; False when its lease is gone (it expired and was deleted:
    its place may be taken, so the stream must end)."""
    return TurnStreamLease.objects.filter(pk=lease.pk).update(renewed_at=timezone.now()) == 1


def stream_release(lease: TurnStreamLease) -> None:
    """Delete the stream's lease. If the database does not answer, the lease expires on its own."""
    try:
        TurnStreamLease.objects.filter(pk=lease.pk).delete()
    except DatabaseError:
        log.warning("stream lease %s not released; it expires in %s s", lease.pk, lease_seconds(), exc_info=True)


class LeasedStream:
    """A stream's events, then the release of its lease however the stream ends.

    The server calls close() when the response is done (the client left, the events
    ended, an error); a generator closed before it started would not run its cleanup,
    so the release is here rather than in the generator. The events ending (or
    failing) releases at once too, without waiting for the server's close().
    """

    def __init__(self, events: Iterator[str], lease: TurnStreamLease):
        self._events = events
        self._lease = lease
        self._closed = False

    def __iter__(self) -> LeasedStream:
        return self

    def __next__(self) -> str:
        try:
            return next(self._events)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            stream_release(self._lease)
        finally:
            close = getattr(self._events, "close", None)
            if close is not None:
                close()
            # The release may have opened a connection after the events gave theirs back.
            # Inside a transaction (tests) the connection belongs to the caller; else give it
            # back now, not at this thread's next request.
            if not connection.in_atomic_block:
                connection.close()
