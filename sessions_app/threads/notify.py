"""A thread's notification channel: what tells its open live streams that it changed (PostgreSQL NOTIFY).

- a turn change (a chunk, a new, finished, discarded or restarted turn) notifies with
  no payload: the streams read what is new (sessions_app/turns/live.py).
- an end notifies with its reason (`ENDS`): the thread was deleted, cleared, its
  checkpoints released or deleted (LangGraph's delete_thread), or its owner erased. The
  streams send a last event saying so and end without reading.
- an end of a thread that stays (cleared, released, its checkpoints deleted) is also kept
  on the thread row (`stream_end_fields`, written by the same statement that writes the
  thread): a stream that polls (SQLite) or missed the notification (the listener was
  reconnecting) reads it with the pending turn, and ends the same way. A deleted thread's
  streams find it gone at their next read.

`pg_notify` is transactional: called inside the write's transaction, the notification
goes out at commit, when what it announces is done, and never for a write that rolled
back. The listening side is sessions_app/turns/listener.py. On SQLite nothing is sent;
the streams poll, and find a deleted thread gone, or the end of one that stays, at their
next read.
"""

from __future__ import annotations

from django.db import connection
from django.utils import timezone

CHANNEL_PREFIX = "ma_turn_"

# The reasons a thread's streams end, and what their last event says.
ENDS = {
    "deleted": "This thread was deleted.",
    "cleared": "This thread was cleared.",
    "released": "This thread's checkpoints were released.",
    "checkpoints_deleted": "This thread's checkpoints were deleted.",
    "erased": "This thread's owner was erased.",
}


def thread_channel(thread_pk: int) -> str:
    """The notification channel of one thread (by its primary key, so always an identifier)."""
    return f"{CHANNEL_PREFIX}{int(thread_pk)}"


# The ends after which the thread is still there: kept on its row as well (stream_end_fields).
ENDS_KEPT = ("cleared", "released", "checkpoints_deleted")


def stream_end_fields(end: str) -> dict:
    """The thread's fields that record an end of its streams while it stays (a key of ENDS_KEPT):
    the caller writes them with the thread's own update, in the write's transaction."""
    if end not in ENDS_KEPT:
        raise ValueError(f"not an end a thread outlives: {end!r}")
    return {"streams_ended": end, "streams_ended_at": timezone.now()}


def thread_notify(thread_pk: int, end: str = "") -> None:
    """Tell the thread's open streams, when the current transaction commits, that it changed;
    with `end` (a key of ENDS), that their thread ended that way. PostgreSQL only.

    Notifications of one transaction with the same channel and payload are folded into one.
    """
    if end and end not in ENDS:
        raise ValueError(f"unknown end of a thread: {end!r}")
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_notify(%s, %s)", [thread_channel(thread_pk), end])


def threads_notify(thread_pks: list[int], end: str) -> None:
    """`thread_notify` for many threads, in one statement whatever their number (a bulk purge)."""
    if end and end not in ENDS:
        raise ValueError(f"unknown end of a thread: {end!r}")
    if connection.vendor != "postgresql" or not thread_pks:
        return
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_notify(%s || pk::text, %s) FROM unnest(%s::bigint[]) AS pk",
            [CHANNEL_PREFIX, end, [int(pk) for pk in thread_pks]],
        )
