"""The reads of the live-turn streams: one statement for a thread's pending turn and its chunks,
and the event loop's own connection that runs it on PostgreSQL (sessions_app/turns/live.py).

- the statement (`read_statement`): the thread's last end of its streams it outlived
  (`Thread.streams_ended`, `_at`), its pending turn and that turn's chunks after an index,
  in order; no row when the thread is gone. The same text on both databases.
- where it runs: on PostgreSQL on `Reader`'s connection, psycopg's async connection owned by
  a task of the event loop (no thread, no pooled connection, no ORM object); on SQLite, or
  while that connection cannot be had, on Django's connection in a thread (`rows_in_thread`).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
from datetime import timezone as dt_timezone

from django.db import connection, connections
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from sessions_app.threads.models import Thread
from sessions_app.turns import listener
from sessions_app.turns.models import Turn, TurnChunk


def of_this_loop(registry: dict, make):
    """The running event loop's one instance in `registry` (made by `make` the first time);
    closed loops' instances are dropped on the way."""
    loop = asyncio.get_running_loop()
    for ended in [other for other in registry if other.is_closed()]:
        del registry[ended]
    if loop not in registry:
        registry[loop] = make()
    return registry[loop]



# What a read returns for a thread that is no longer there.
GONE = -1


def lowest_guess(followed: int | None, after: int, resume: tuple[int, int] | None) -> int:
    """The lowest chunk index a stream may need, before the read says which turn is pending."""
    if followed is not None:
        return after
    return resume[1] if resume else -1


def needed_after(pending: int | None, followed: int | None, after: int, resume: tuple[int, int] | None) -> int:
    """The index after which a stream needs the chunks of `pending`: what it sent of it, or what the
    page shows of it (`resume`), or none of them (a turn new to it)."""
    if pending == followed:
        return after
    return resume[1] if resume and resume[0] == pending else -1


@functools.cache
def read_statement(vendor: str) -> str:
    """One statement for a read: the thread's last end of its streams it outlived, its pending
    turn and that turn's chunks after an index, in order. One row with no chunk when there is
    none to send, none when the thread is gone. The same text on both databases (`%s` params)."""
    quote = connections["default"].ops.quote_name
    thread, turn, chunk = Thread._meta, Turn._meta, TurnChunk._meta

    def column(meta, name: str) -> str:
        return quote(meta.get_field(name).column)

    thread_pk, turn_pk = quote(thread.pk.column), quote(turn.pk.column)
    index = column(chunk, "index")
    return (
        f"SELECT t.{column(thread, 'streams_ended')}, t.{column(thread, 'streams_ended_at')}, p.{turn_pk}, "
        f"c.{index}, c.{column(chunk, 'text')} "
        f"FROM {quote(thread.db_table)} t "
        f"LEFT JOIN {quote(turn.db_table)} p ON p.{column(turn, 'thread')} = t.{thread_pk} AND p.{column(turn, 'status')} = %s "
        f"LEFT JOIN {quote(chunk.db_table)} c ON c.{column(chunk, 'turn')} = p.{turn_pk} AND c.{index} > %s "
        f"WHERE t.{thread_pk} = %s ORDER BY c.{index}"
    )


def read_params(thread_pk: int, after: int) -> list:
    return [str(Turn.Status.PENDING.value), after, thread_pk]


def stored_instant(value):
    """A stored time as an aware datetime, as either database's driver gives it back raw."""
    if isinstance(value, str):
        value = parse_datetime(value)
    if value is not None and timezone.is_naive(value):
        value = timezone.make_aware(value, dt_timezone.utc)
    return value


def parse_rows(rows: list[tuple]):
    """(pending turn or None or GONE, (end, end_at), [(index, text)…]) from the read's rows."""
    if not rows:
        return GONE, ("", None), []
    end, end_at, pending = rows[0][0], stored_instant(rows[0][1]), rows[0][2]
    chunks = [(index, text) for *_, index, text in rows if index is not None]
    return pending, (end, end_at), chunks


def rows_in_thread(thread_pk: int, after: int) -> list[tuple]:
    """The read on Django's connection (SQLite; PostgreSQL while the reader cannot connect)."""
    with connection.cursor() as cursor:
        cursor.execute(read_statement(connection.vendor), read_params(thread_pk, after))
        return cursor.fetchall()


def reader_errors() -> tuple[type[BaseException], ...]:
    import psycopg

    return (ConnectionError, OSError, psycopg.Error)


class Reader:
    """This event loop's connection for the streams' reads (PostgreSQL): psycopg's async
    connection in autocommit, to where the listener connects (settings.DATABASE_LISTEN).

    A task of the loop owns it: made at the first read, made again at the next read after it
    broke, closed when the loop ends (its tasks are cancelled). Reads run one at a time, in order."""

    def __init__(self):
        self._asked: asyncio.Queue = asyncio.Queue()
        # A context of its own: the task outlives the stream whose read started it.
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name="memoryadmin-stream-reader", context=contextvars.Context()
        )

    async def fetch(self, query: str, params: list) -> list[tuple]:
        if self._task.done():
            raise ConnectionError("the streams' reader has stopped")
        done = asyncio.get_running_loop().create_future()
        self._asked.put_nowait((query, params, done))
        return await done

    async def _run(self) -> None:
        import psycopg

        while True:
            asked = await self._asked.get()
            try:
                conn = await psycopg.AsyncConnection.connect(
                    **{**listener._conninfo(), "application_name": "memoryadmin-streams"}, autocommit=True
                )
            except Exception as exc:  # no connection now: this read fails (and runs in a thread), the next tries again
                _settle(asked[2], exc=exc)
                continue
            async with conn:
                while asked is not None:
                    query, params, done = asked
                    try:
                        cursor = await conn.execute(query, params)
                        _settle(done, rows=await cursor.fetchall())
                    except psycopg.OperationalError as exc:
                        _settle(done, exc=exc)
                        break  # the connection broke: a new one for the next read
                    except psycopg.Error as exc:
                        _settle(done, exc=exc)
                    asked = await self._asked.get()


def _settle(done: asyncio.Future, *, rows=None, exc: BaseException | None = None) -> None:
    if done.done():
        return
    if exc is not None:
        done.set_exception(exc)
    else:
        done.set_result(rows)


_readers: dict[asyncio.AbstractEventLoop, Reader] = {}


def reader() -> Reader:
    found = of_this_loop(_readers, Reader)
    if found._task.done():
        found = _readers[asyncio.get_running_loop()] = Reader()
    return found
