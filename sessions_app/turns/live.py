"""The live-turn event stream: server-sent events of a thread's pending turn (docs/turns.md, "Pages").

An async generator: under the ASGI server an open stream is a coroutine waiting on an
asyncio event, holding no thread and no database connection between its reads.

- wake-ups: on PostgreSQL the stream waits on its thread's notification channel
  (sessions_app/turns/listener.py: one LISTEN connection per process); every write
  to the pending turn notifies it at commit, and the stream reads what is new. While
  the listener is down (it reconnects) the stream reads at each heartbeat. On SQLite,
  which cannot notify (`make run`, tests), it reads every MEMORYADMIN_TURN_SSE_POLL_SECONDS.
- reads: one statement (sessions_app/turns/reads.py) for the pending turn and its chunks
  after an index; the streams of a thread woken together share one (`SharedReads`),
  whatever each has sent. On PostgreSQL it runs on the event loop's own reading
  connection (`reads.Reader`), with no thread and no pooled connection; on SQLite in a
  thread (sync_to_async), the connection given back after each read, at most
  STREAM_DB_SLOTS at a time (`database_slot`).
- the end: `event: finished` when the followed turn is finished or discarded,
  `event: timeout` after `max_seconds`, when the lease is lost or when the worker
  stops (memoryadmin/worker.py: its streams end first, so it can exit), `event: ended`
  (with the reason, sessions_app/threads/notify.py) when the thread was deleted,
  cleared, released, its checkpoints deleted or its owner erased: on PostgreSQL the
  notification of that write ends the stream without another read; a read that finds
  the thread gone, or an end it outlived recorded on its row after the stream opened
  (SQLite, or a notification missed while the listener reconnected), ends it the same
  way. A client that leaves cancels the coroutine (Django's ASGI handler listens for
  the disconnect), and the finally block releases the lease.
- threads: under the ASGI server the request's own thread is let go when the stream
  starts (memoryadmin/requestthread.py); what runs in a thread afterwards (the reads
  on SQLite, the release) runs on the few threads the process's streams share.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import re
from collections.abc import AsyncIterator, Callable, Iterator

from asgiref.sync import sync_to_async
from django.db import connection
from django.utils import timezone
from django.utils.html import escape

from memoryadmin import draining
from memoryadmin.requestthread import shared_threads
from sessions_app.threads.notify import ENDS
from sessions_app.turns import listener
from sessions_app.turns import streams
from sessions_app.turns.reads import GONE, lowest_guess, stored_instant, needed_after, of_this_loop, parse_rows, read_params
from sessions_app.turns.reads import read_statement, reader_errors, rows_in_thread, reader

log = logging.getLogger(__name__)

# What ends a line of an event stream: CRLF, a lone CR and a lone LF alike.
_SSE_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def sse(event: str, data: str, event_id: int | None = None) -> str:
    """One server-sent event whose payload can never forge a field of the stream.

    A browser ends a line at CR, LF or CRLF, so the payload is split on all three and
    each piece is a `data:` line of its own (the client joins them back with LF): a
    chunk holding "\\revent: x" stays data. The event name and id are ours, never
    content; one that could end a line is a bug, refused rather than sent.
    """
    event_id_text = "" if event_id is None else str(event_id)
    if _SSE_LINE_BREAK.search(event) or _SSE_LINE_BREAK.search(event_id_text) or "\x00" in event_id_text:
        raise ValueError(f"an event name or id cannot hold a line break: {event!r}, {event_id_text!r}")
    lines = [f"event: {event}"]
    if event_id is not None:
        lines.append(f"id: {event_id_text}")
    lines.extend(f"data: {line}" for line in _SSE_LINE_BREAK.split(data))
    return "\n".join(lines) + "\n\n"


# Database work of the streams of one process (opens, reads, renewals) at once, at most.
STREAM_DB_SLOTS = 2
_slots: dict[asyncio.AbstractEventLoop, asyncio.Semaphore] = {}


def database_slot() -> asyncio.Semaphore:
    """This event loop's (this worker process's) slots for the streams' database work."""
    loop = asyncio.get_running_loop()
    for ended in [other for other in _slots if other.is_closed()]:
        del _slots[ended]
    if loop not in _slots:
        _slots[loop] = asyncio.Semaphore(STREAM_DB_SLOTS)
    return _slots[loop]


def released(fn: Callable, *, slot: bool = True) -> Callable:
    """`fn` run in a thread when a slot is free, its database connection given back when it returns.

    Under the ASGI server, on the threads the process's streams share (memoryadmin/requestthread.py),
    also from a task that outlives the stream that started it; elsewhere thread-sensitive, as
    Django runs it. Inside a transaction (tests) the connection belongs to the caller and stays.
    `slot=False` when the caller already holds one of the slots."""

    def call(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        finally:
            if not connection.in_atomic_block:
                connection.close()

    async def in_thread(*args, **kwargs):
        shared = shared_threads()
        if shared is None:
            return await sync_to_async(call)(*args, **kwargs)
        return await sync_to_async(call, thread_sensitive=False, executor=shared)(*args, **kwargs)

    async def run(*args, **kwargs):
        if not slot:
            # The caller holds a slot already.
            return await in_thread(*args, **kwargs)
        async with database_slot():
            return await in_thread(*args, **kwargs)

    return run


class SharedReads:
    """The reads of this event loop's streams, one per thread at a time, whatever each stream has sent.

    The streams of a thread woken by one notification ask in the same turn of the event loop;
    their requests make one batch, served by one read of the thread's pending turn and of its
    chunks after the lowest index any of them needs (a stream opened later, or resuming after
    the panel's chunks, takes its part of the same rows). The events are formatted once per
    batch, not once per stream. A request made while a read is running waits for the next
    batch: the running read may predate the commit that woke it.

    On PostgreSQL the read is one statement on this event loop's own connection (`Reader`): no
    thread, no pooled connection, no ORM object. Elsewhere (SQLite), or while that connection
    cannot be had, the same statement runs in a thread on Django's connection (`released`).
    """

    def __init__(self):
        self._batches: dict[int, list] = {}
        # One read at a time on the reader's connection: requests wait here in their batches.
        self._reading = asyncio.Lock()
        # Database reads made (tests count them).
        self.reads = 0

    async def read(self, thread_pk: int, followed: int | None, after: int, resume: tuple[int, int] | None):
        """(pending turn or None or GONE, the index the events follow, [(index, event text)…], (end, end_at))."""
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        batch = self._batches.get(thread_pk)
        if batch is None:
            batch = self._batches[thread_pk] = []
            # In the stream's context (its shared threads), and not cancelled if that stream leaves.
            loop.create_task(self._serve(thread_pk, batch))
        batch.append((followed, after, resume, done))
        return await done

    def _close(self, thread_pk: int, batch: list) -> None:
        if self._batches.get(thread_pk) is batch:
            del self._batches[thread_pk]

    async def _serve(self, thread_pk: int, batch: list) -> None:
        try:
            use_reader = listener.listening_supported()
            async with (self._reading if use_reader else database_slot()):
                # From here on, requests make the next batch.
                self._close(thread_pk, batch)
                wants = [(followed, after, resume) for followed, after, resume, _ in batch]
                low = min(lowest_guess(*want) for want in wants)
                pending, end, chunks = await self._rows(thread_pk, low, use_reader)
                lowest = min((needed_after(pending, *want) for want in wants), default=low)
                if pending not in (None, GONE) and lowest < low:
                    # A new pending turn (rare): read it from the lowest index a stream needs.
                    low = lowest
                    pending, end, chunks = await self._rows(thread_pk, low, use_reader)
            events = [(index, sse("chunk", escape(text), index)) for index, text in chunks]
            for (followed, after, resume, done), want in zip(batch, wants):
                if done.done():
                    continue
                if pending is None or pending == GONE:
                    done.set_result((pending, after, [], end))
                    continue
                needed = needed_after(pending, *want)
                done.set_result((pending, needed, [event for event in events if event[0] > needed], end))
        except BaseException as exc:
            self._close(thread_pk, batch)
            for *_, done in batch:
                if not done.done():
                    done.set_exception(exc)
            if isinstance(exc, asyncio.CancelledError):
                raise

    async def _rows(self, thread_pk: int, after: int, use_reader: bool):
        self.reads += 1
        if use_reader:
            try:
                return parse_rows(await reader().fetch(read_statement("postgresql"), read_params(thread_pk, after)))
            except reader_errors() as exc:
                log.warning("live streams' reader: %s; reading in a thread meanwhile", exc)
        return parse_rows(await released(rows_in_thread, slot=use_reader)(thread_pk, after))


_reads: dict[asyncio.AbstractEventLoop, SharedReads] = {}


def shared_reads() -> SharedReads:
    return of_this_loop(_reads, SharedReads)


# The shortest time between two renewals by the process's task (tests use heartbeats of 0).
RENEW_EVERY_MIN = 0.1


class Leases:
    """The leases of this event loop's (this worker process's) open streams, renewed together.

    - on PostgreSQL, while the listener is connected, a task of the process renews every
      open lease every half heartbeat in one statement on the listener's own connection
      (`streams.stream_renew_statement`): no thread and no pooled connection, so renewals
      never queue behind the streams' reads or the pages' and API's synchronous work, and
      a stream waiting on a slow read keeps its place. A stream at its heartbeat finds its
      lease renewed less than a heartbeat ago and goes on without a query.
    - otherwise (SQLite, the listener reconnecting, or a lease that statement did not
      find) the stream at its heartbeat asks for a renewal in a thread: one statement
      renews every open lease of the process (`streams.stream_renew_many`), and every
      stream asking meanwhile waits for that one. A lease missing there is gone (it
      expired and its place may be taken): its stream ends.
    """

    def __init__(self):
        self.open: set[int] = set()
        self._renewed: dict[int, float] = {}
        self._gone: set[int] = set()
        self._every = float("inf")
        self._running: asyncio.Future | None = None
        self._ticker: asyncio.Task | None = None

    def add(self, lease_id: int, heartbeat: float) -> None:
        """A new stream's lease, just written."""
        loop = asyncio.get_running_loop()
        self.open.add(lease_id)
        self._renewed[lease_id] = loop.time()
        self._every = min(self._every, max(heartbeat / 2, RENEW_EVERY_MIN))
        if self._ticker is None and listener.listening_supported():
            # A context of its own: the task outlives the request whose stream started it.
            self._ticker = loop.create_task(self._tick(), name="memoryadmin-stream-leases", context=contextvars.Context())

    def discard(self, lease_id: int | None) -> None:
        self.open.discard(lease_id)
        self._renewed.pop(lease_id, None)
        self._gone.discard(lease_id)

    async def renew(self, lease_id: int, max_age: float) -> bool:
        """False when the stream's lease is gone (it expired and its place may be taken)."""
        loop = asyncio.get_running_loop()
        # While the process's task renews every half heartbeat, a renewal up to a heartbeat
        # old is its last one (the statement takes a moment): no need to renew in a thread.
        fresh = 2 * max_age if self._ticker is not None else max_age
        if lease_id not in self._gone and loop.time() - self._renewed.get(lease_id, float("-inf")) < fresh:
            return True
        if self._running is None:
            self._running = asyncio.ensure_future(self._renew_all())
        await asyncio.shield(self._running)
        return lease_id not in self._gone

    async def _renew_all(self) -> None:
        try:
            ids = set(self.open)
            present = await released(streams.stream_renew_many)(ids)
            now = asyncio.get_running_loop().time()
            for lease_id in ids:
                if lease_id in present:
                    self._renewed[lease_id] = now
                else:
                    self._gone.add(lease_id)
        finally:
            self._running = None

    async def _tick(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(self._every)
            if not self.open:
                self._ticker, self._every = None, float("inf")
                return
            ids = set(self.open)
            try:
                found = await listener.listener().execute(*streams.stream_renew_statement(ids, timezone.now()))
            except Exception as exc:  # the listener reconnects; the streams renew in threads meanwhile
                log.debug("stream leases not renewed on the listener's connection: %s", exc)
                continue
            now = loop.time()
            for (lease_id,) in found:
                if lease_id in self.open:
                    self._renewed[lease_id] = now


_leases: dict[asyncio.AbstractEventLoop, Leases] = {}


def leases() -> Leases:
    return of_this_loop(_leases, Leases)


async def turn_events(
    *,
    thread_pk: int,
    poll: float,
    heartbeat: float,
    max_seconds: float,
    lease_id: int | None = None,
    release: Callable[[], None] | None = None,
    resume: tuple[int, int] | None = None,
    ended_at=None,
) -> AsyncIterator[str]:
    """Server-sent events for a thread's pending turn: its new chunks, heartbeats, then the end.

    Chunks go out HTML-escaped: htmx swaps them into the page as HTML, and agent text is
    untrusted. A `: heartbeat` comment goes out every `heartbeat` seconds, also while
    chunks flow (proxies close idle connections); each heartbeat renews the stream's
    lease `lease_id` (`Leases`), and the stream ends as on timeout when it is gone.
    `resume=(turn_id, index)`: the page already shows that turn's chunks up to `index`,
    so the stream starts after it (when that turn is still the pending one).
    `release` runs however the stream ends. `ended_at`: the thread's `streams_ended_at` when the
    stream was opened; a read that finds another one ends the stream with that end (a thread
    cleared or released where no notification came: SQLite).
    """
    loop = asyncio.get_running_loop()
    start = loop.time()
    next_beat = start + heartbeat
    ended_at = stored_instant(ended_at)
    watch = None
    read, release_async = shared_reads().read, release and released(release)
    kept = leases()
    if lease_id is not None:
        kept.add(lease_id, heartbeat)
    try:
        if listener.listening_supported():
            # Listening before the first read: a chunk committed after it wakes the stream.
            watch = await listener.listener().subscribe(listener.turn_channel(thread_pk))
        yield "retry: 2000\n\n"
        followed, after, woken = None, -1, True
        while True:
            if watch is not None and watch.ended:
                # Deleted, cleared, released, erased: said, and nothing of the thread read again.
                yield sse("ended", ENDS[watch.ended])
                return
            if draining.stopping():
                # The worker stops (memoryadmin/worker.py): the page opens a new stream elsewhere.
                yield sse("timeout", "")
                return
            if woken:
                pending, after, chunks, (end, end_at) = await read(thread_pk, followed, after, resume)
                if pending == GONE:
                    yield sse("ended", ENDS["deleted"])
                    return
                if end_at != ended_at and end in ENDS:
                    yield sse("ended", ENDS[end])
                    return
                if pending is None and followed is not None:
                    yield sse("finished", "")
                    return
                followed = pending if pending is not None else followed
                if chunks:
                    # The chunks of one read in one write.
                    after = chunks[-1][0]
                    yield "".join(event for _, event in chunks)
            now = loop.time()
            if now - start >= max_seconds:
                yield sse("timeout", "")
                return
            if now >= next_beat:
                next_beat = now + heartbeat
                if lease_id is not None and not await kept.renew(lease_id, heartbeat / 2):
                    yield sse("timeout", "")
                    return
                yield ": heartbeat\n\n"
            wait = max(0.0, min(next_beat, start + max_seconds) - loop.time())
            if watch is None:
                await asyncio.sleep(min(poll, wait))
                woken = True
            else:
                # Without a listening connection (it reconnects), read at every heartbeat.
                woken = await watch.wait(wait) or not watch.listening
    finally:
        kept.discard(lease_id)
        if watch is not None:
            watch.close()
        if release_async is not None:
            await release_async()


class LeasedEvents:
    """A stream's events for StreamingHttpResponse, and the release of its lease at the response's close.

    The events' own finally block releases the lease however they end; a response closed
    before its first event never ran them, so Django's close() of the response (it
    calls this close()) releases it too. Releasing twice deletes nothing the second time.
    """

    def __init__(self, events: AsyncIterator[str], release: Callable[[], None]):
        self._events = events
        self._release = release

    def __aiter__(self) -> AsyncIterator[str]:
        return self._events

    def close(self) -> None:
        self._release()


class EventsInThisThread:
    """The events for a WSGI server (`manage.py runserver`), which iterates a response in the
    request's thread: an event loop of its own runs the generator, event by event (Django
    would otherwise read an async stream to its end before sending a byte). close(), which
    the server calls when the response is done or the client left, ends the generator and
    releases the lease, also when the stream never started. On PostgreSQL that loop has a
    listener of its own: under the development server each stream has a listening
    connection, not one per process as under the ASGI server."""

    def __init__(self, events: AsyncIterator[str], release: Callable[[], None]):
        self._events = events
        self._release = release
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False

    def __iter__(self) -> Iterator[str]:
        return self

    def __next__(self) -> str:
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
        try:
            return self._loop.run_until_complete(anext(self._events))
        except StopAsyncIteration:
            self.close()
            raise StopIteration from None
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            if self._loop is not None:
                self._loop.run_until_complete(self._events.aclose())
                pending = asyncio.all_tasks(self._loop)
                for task in pending:
                    task.cancel()
                self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        finally:
            if self._loop is not None:
                self._loop.close()
            self._release()
