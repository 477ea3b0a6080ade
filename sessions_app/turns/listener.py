"""Wake-ups for live-turn streams: PostgreSQL LISTEN/NOTIFY, one listening connection per process.

- notify: every write that changes a thread's pending turn (a new turn, a chunk, a
  finish, a discard, a restart) calls `turn_changed(thread_pk)` inside its own
  transaction; `pg_notify` is transactional, so the wake-up goes out at commit, when
  what it announces is readable, and never for a write that rolled back.
- listen: a worker process holds one `Listener` per event loop, with one psycopg async
  connection in autocommit mode. It LISTENs to the channel of every thread that has an
  open stream in this process (and UNLISTENs when the last one leaves), and sets the
  asyncio events of the streams waiting on a channel when a notification arrives. So
  an open stream costs an event, not a connection nor a thread. A notification with a
  payload says the thread ended (sessions_app/threads/notify.py: deleted, cleared,
  released, erased): its watches keep the reason (`Watch.ended`).
- statements: the same connection runs the process's few statements that must not
  wait for a thread or a pooled connection (`Listener.execute`: the streams' lease
  renewals, sessions_app/turns/live.py), between two waits for notifications.
- failures: when the connection breaks, the listener reconnects (0.1 s, then doubling
  up to 5 s), LISTENs again and wakes every stream, which reads what it may have
  missed. While it is down, `Watch.listening` is False and streams read at each of
  their heartbeats instead.

LISTEN needs a session of its own: behind a pooler in transaction mode the listener
connects to PostgreSQL directly (settings.DATABASE_LISTEN, from DATABASE_LISTEN_URL).
On SQLite there is nothing to listen to; the stream polls (sessions_app/turns/live.py).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from contextlib import suppress

from django.conf import settings
from django.db import connection

from memoryadmin import draining
from sessions_app.threads.notify import ENDS, thread_channel, thread_notify

log = logging.getLogger(__name__)

# With no notification for this long, the listener checks its connection with a query.
HEALTH_SECONDS = 30.0
RECONNECT_FIRST, RECONNECT_MAX = 0.1, 5.0
# A stream opening while the listener connects waits this long for its LISTEN, then goes
# on reading at its heartbeats until the listener is back.
SUBSCRIBE_WAIT = 5.0


# A thread's channel (its turns and its end share it).
turn_channel = thread_channel


def turn_changed(thread_pk: int) -> None:
    """Wake the thread's open streams when the current transaction commits (PostgreSQL only).

    Call it inside the write's transaction (sessions_app/threads/notify.py).
    """
    thread_notify(thread_pk)


def listening_supported() -> bool:
    return settings.DATABASE_LISTEN is not None and connection.vendor == "postgresql"


def _conninfo() -> dict[str, str]:
    params = dict(settings.DATABASE_LISTEN)
    # The default connection's database, including the name tests give it.
    params["dbname"] = params["dbname"] or connection.settings_dict["NAME"]
    params["application_name"] = "memoryadmin-listener"
    return {key: value for key, value in params.items() if value}


class Watch:
    """One stream's subscription to a thread's channel: an event set at each notification."""

    def __init__(self, listener: Listener, channel: str):
        self.listener = listener
        self.channel = channel
        self.event = asyncio.Event()
        # A notification (or a reconnect) came since the last wait: the stream reads.
        self.notified = False
        # Set when the thread ended (deleted, cleared, released, erased): a key of notify.ENDS.
        self.ended = ""

    @property
    def listening(self) -> bool:
        """The listener is connected and LISTENs to this channel: a wake-up will come."""
        return self.listener.connected and self.channel in self.listener.listening

    async def wait(self, timeout: float) -> bool:
        """True when woken (a notification, or a reconnect); False after `timeout` seconds.

        The timeout is a timer of the event loop that sets the event, not a task per wait
        (asyncio.wait_for's): hundreds of streams waiting cost their timers only."""
        if not self.notified:
            timer = asyncio.get_running_loop().call_later(timeout, self.event.set)
            try:
                await self.event.wait()
            finally:
                timer.cancel()
        woken, self.notified = self.notified, False
        self.event.clear()
        return woken

    def close(self) -> None:
        self.listener.unsubscribe(self)


class Listener:
    """The process's (the event loop's) one LISTEN connection, fanning notifications out."""

    def __init__(self, conninfo: dict[str, str]):
        self._conninfo = conninfo
        self._watches: dict[str, set[Watch]] = {}
        self.listening: set[str] = set()
        self.connected = False
        self._changed = asyncio.Event()
        self._synced = asyncio.Condition()
        self._statements: list[tuple[str, list, asyncio.Future]] = []
        # A context of its own: the task outlives the request that happened to start it.
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name="memoryadmin-turn-listener", context=contextvars.Context()
        )

    async def subscribe(self, channel: str) -> Watch:
        """A watch on `channel`, once this connection LISTENs to it (or after SUBSCRIBE_WAIT)."""
        watch = Watch(self, channel)
        self._watches.setdefault(channel, set()).add(watch)
        if not watch.listening:
            self._changed.set()
            async with self._synced:
                with suppress(TimeoutError):
                    await asyncio.wait_for(self._synced.wait_for(lambda: watch.listening), SUBSCRIBE_WAIT)
        return watch

    def unsubscribe(self, watch: Watch) -> None:
        watches = self._watches.get(watch.channel)
        if watches is not None:
            watches.discard(watch)
            if not watches:
                del self._watches[watch.channel]
                self._changed.set()

    async def execute(self, query: str, params: list) -> list[tuple]:
        """Run one statement on this connection (autocommit) between two waits; its rows.

        Raises ConnectionError while the listener is not connected, and the database's
        error if the statement fails or the connection breaks meanwhile."""
        if not self.connected:
            raise ConnectionError("the turn listener is not connected")
        done = asyncio.get_running_loop().create_future()
        self._statements.append((query, params, done))
        self._changed.set()
        return await done

    @property
    def streams(self) -> int:
        return sum(len(watches) for watches in self._watches.values())

    def _wake(self, channel: str | None = None, ended: str = "") -> None:
        # A payload is ours only if it names an end: anyone may NOTIFY a channel.
        ended = ended if ended in ENDS else ""
        for name, watches in self._watches.items():
            if channel is None or name == channel:
                for watch in watches:
                    watch.ended = watch.ended or ended
                    watch.notified = True
                    watch.event.set()

    async def _run(self) -> None:
        import psycopg

        delay = RECONNECT_FIRST
        while True:
            try:
                conn = await psycopg.AsyncConnection.connect(**self._conninfo, autocommit=True)
                async with conn:
                    self.connected, delay = True, RECONNECT_FIRST
                    while True:
                        await self._sync(conn)
                        await self._execute(conn)
                        await self._receive(conn)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the connection failed: reconnect, whatever the cause
                log.warning("turn listener: %s; reconnecting in %.1f s", exc, delay)
                self._fail_statements(exc)
            finally:
                self.connected = False
                self.listening = set()
            await asyncio.sleep(delay)
            delay = min(delay * 2, RECONNECT_MAX)

    async def _sync(self, conn) -> None:
        """LISTEN to the channels streams wait on, UNLISTEN the others; tell the subscribers."""
        from psycopg import sql

        self._changed.clear()
        fresh = not self.listening
        wanted = set(self._watches)
        for channel in sorted(wanted - self.listening):
            await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
            self.listening.add(channel)
        for channel in sorted(self.listening - wanted):
            await conn.execute(sql.SQL("UNLISTEN {}").format(sql.Identifier(channel)))
            self.listening.discard(channel)
        if fresh:
            # (Re)connected: what was committed before these LISTENs took effect is read again.
            self._wake()
        async with self._synced:
            self._synced.notify_all()

    async def _execute(self, conn) -> None:
        """The statements asked for meanwhile, one after the other."""
        import psycopg

        while self._statements:
            query, params, done = self._statements.pop(0)
            try:
                cursor = await conn.execute(query, params)
                rows = await cursor.fetchall() if cursor.description else []
            except psycopg.OperationalError as exc:
                # The connection broke: this statement fails, and so do the others (reconnect).
                if not done.done():
                    done.set_exception(exc)
                raise
            except psycopg.Error as exc:
                if not done.done():
                    done.set_exception(exc)
                continue
            if not done.done():
                done.set_result(rows)

    def _fail_statements(self, exc: Exception) -> None:
        statements, self._statements = self._statements, []
        for _, _, done in statements:
            if not done.done():
                done.set_exception(ConnectionError(f"the turn listener lost its connection: {exc}"))

    async def _receive(self, conn) -> None:
        """Hand notifications out until a stream comes or goes (then LISTEN/UNLISTEN first)."""

        async def drain() -> None:
            async for notify in conn.notifies(timeout=HEALTH_SECONDS):
                self._wake(notify.channel, notify.payload)

        reader = asyncio.ensure_future(drain())
        changed = asyncio.ensure_future(self._changed.wait())
        try:
            done, _ = await asyncio.wait({reader, changed}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            changed.cancel()
            if not reader.done():
                # Waiting for the socket to be readable: cancelling there consumes nothing, and
                # psycopg keeps any notification that arrives meanwhile for the next notifies().
                reader.cancel()
                with suppress(asyncio.CancelledError):
                    await reader
        if reader in done:
            reader.result()  # a broken connection raises here
            await conn.execute("SELECT 1")  # quiet for HEALTH_SECONDS: is it still there?


_listeners: dict[asyncio.AbstractEventLoop, Listener] = {}


def listener() -> Listener:
    """This event loop's listener, started on first use (one per worker process under ASGI)."""
    loop = asyncio.get_running_loop()
    # Loops that ended (a development server's response, a test) take their listener with them.
    for ended in [other for other in _listeners if other.is_closed()]:
        del _listeners[ended]
    found = _listeners.get(loop)
    if found is None or found._task.done():
        found = _listeners[loop] = Listener(_conninfo())
    return found


def wake_all() -> None:
    """Wake every stream waiting on this event loop's listener (the worker stops: memoryadmin/draining.py)."""
    try:
        found = _listeners.get(asyncio.get_running_loop())
    except RuntimeError:
        return
    if found is not None:
        found._wake()


draining.on_stop(wake_all)
