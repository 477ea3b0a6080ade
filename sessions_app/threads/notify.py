"""A thread's notification channel: what tells its open live streams that it changed (PostgreSQL NOTIFY).

- a turn change (a chunk, a new, finished, discarded or restarted turn) notifies with
  no payload: the streams read what is new (sessions_app/turns/live.py).
- an end notifies with its reason (`ENDS`): the thread was deleted, cleared, released
  or its owner erased. The streams send a last event saying so and end without reading.

`pg_notify` is transactional: called inside the write's transaction, the notification
goes out at commit, when what it announces is done, and never for a write that rolled
back. The listening side is sessions_app/turns/listener.py. On SQLite nothing is sent;
the streams poll, and find a deleted thread gone at their next read.
"""

from __future__ import annotations

from django.db import connection

CHANNEL_PREFIX = "ma_turn_"

# The reasons a thread's streams end, and what their last event says.
ENDS = {
    "deleted": "This thread was deleted.",
    "cleared": "This thread was cleared.",
    "released": "This thread's checkpoints were released.",
    "erased": "This thread's owner was erased.",
}


def thread_channel(thread_pk: int) -> str:
    """The notification channel of one thread (by its primary key, so always an identifier)."""
    return f"{CHANNEL_PREFIX}{int(thread_pk)}"


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
