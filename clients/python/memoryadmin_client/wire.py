"""The client's own HTTP/1.1 transport for plain `http://` servers, sync and async, over h11.

httpx's transports (httpcore over h11, and anyio for the async one) spend about a
millisecond of CPU per request in Python; an agent's step is a request or two, so that
millisecond was most of what a step cost the agent's process, and in an async program
it ran on the event loop. Here one request is one write and, most often, one read:

- `h11` (httpx's own HTTP/1.1 library) writes the request and parses the answer: its
  length, its chunks, an answer to the end of the connection, 1xx answers, keep-alive;
- `Pool` sends over blocking sockets (any thread), `AsyncPool` over asyncio streams
  (one per event loop: a stream belongs to the loop that opened it).

Both keep idle connections per pool, at most `max_idle` of them, and drop one after
`keepalive_expiry` seconds (shorter than the server's keep-alive) or when the server has
closed it. A kept connection that fails before any byte of the answer came back is
tried once more on a new one: the server closed it as it was reused. Failures are
httpx's errors (`ConnectError`, `ConnectTimeout`, `WriteTimeout`, `ReadTimeout`,
`ReadError`, `RemoteProtocolError`), so the retry policy of `memoryadmin_client.http`
treats them as it treats httpx's own, for the sync and the async calls alike.

`PlainHTTPTransport` puts `Pool` under an httpx client (where the client's own path is
not taken: a proxy in the environment); `https://` goes to httpx's transport there.
"""

from __future__ import annotations

import asyncio
import select
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import NamedTuple

import h11
import httpx

from .turns import take_turn

READ_SIZE = 65536
# A body past this size is written after the request's head rather than copied onto it.
JOIN_LIMIT = 256 * 1024

Headers = Sequence[tuple[bytes, bytes]]


class Answer(NamedTuple):
    """One answer, read whole: its status, reason, headers (names lower-cased) and body."""

    status: int
    reason: bytes
    headers: list[tuple[bytes, bytes]]
    content: bytes


class Timeouts(NamedTuple):
    """Seconds (None: no limit) for making a connection, writing the request and each read."""

    connect: float | None
    write: float | None
    read: float | None


class _Stale(Exception):
    """A reused connection the server had closed: nothing of the answer came back."""


def _error(kind: type[httpx.TransportError], message: str, where: Callable[[], httpx.Request]) -> httpx.TransportError:
    """An httpx error naming the request (made only now: a request's URL takes time to parse)."""
    return kind(message, request=where())


def _request_bytes(conn: h11.Connection, method: bytes, target: bytes, headers: Headers, body: bytes | None) -> list[bytes]:
    """The request as h11 writes it: its head (and the body, when small), then the rest of the body."""
    head = conn.send(h11.Request(method=method, target=target, headers=headers))
    if body:
        conn.send_with_data_passthrough(h11.Data(data=body))  # the body as is, not copied by h11
    conn.send(h11.EndOfMessage())
    if not body:
        return [head]
    if len(body) <= JOIN_LIMIT:
        return [head + body]
    return [head, body]


def _content_length(body: bytes | None) -> list[tuple[bytes, bytes]]:
    return [(b"Content-Length", b"%d" % len(body))] if body else []


class _Reader:
    """The sans-IO half of reading an answer: feeds h11 what was read, returns its events."""

    __slots__ = ("conn", "got", "status", "reason", "headers", "chunks")

    def __init__(self, conn: h11.Connection) -> None:
        self.conn, self.got = conn, 0
        self.status, self.reason, self.headers, self.chunks = 0, b"", [], []

    def feed(self, data: bytes) -> None:
        if not data and not self.got:
            raise _Stale  # closed before the first byte of the answer
        self.got += len(data)
        self.conn.receive_data(data)

    def step(self) -> bool | None:
        """True: the answer is whole; None: more bytes are needed; False: go on."""
        event = self.conn.next_event()
        kind = type(event)
        if event is h11.NEED_DATA:
            return None
        if kind is h11.Data:
            self.chunks.append(event.data)
        elif kind is h11.Response:
            self.status, self.reason, self.headers = event.status_code, event.reason, list(event.headers)
        elif kind is h11.EndOfMessage:
            return True
        elif kind is h11.ConnectionClosed:
            raise h11.RemoteProtocolError("Server disconnected without sending a complete response.")
        return False  # InformationalResponse (a 1xx), Data, Response

    def answer(self) -> Answer:
        content = self.chunks[0] if len(self.chunks) == 1 else b"".join(self.chunks)
        return Answer(self.status, self.reason, self.headers, content)

    def reusable(self) -> bool:
        """Both sides done, no `Connection: close`: the connection can carry the next request."""
        if self.conn.our_state is h11.DONE and self.conn.their_state is h11.DONE:
            self.conn.start_next_cycle()
            return True
        return False


# --- blocking sockets ---------------------------------------------------------------------------


class _Connection:
    __slots__ = ("sock", "h11", "idle_since")

    def __init__(self, sock: socket.socket) -> None:
        self.sock, self.h11, self.idle_since = sock, h11.Connection(h11.CLIENT), 0.0

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:  # pragma: no cover - closing a broken socket
            pass


def _readable(sock: socket.socket | None) -> bool:
    """An idle connection with something to read has been closed (or broken) by the server."""
    if sock is None:
        return True
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)


class Pool:
    """Kept-alive connections to one `host:port`, used from any thread (module docstring)."""

    def __init__(self, host: str, port: int, *, max_idle: int = 32, keepalive_expiry: float = 4.0) -> None:
        self.host, self.port = host, port
        self.authority = (host if ":" not in host else f"[{host}]") + f":{port}"
        self.max_idle, self.keepalive_expiry = max_idle, keepalive_expiry
        self._idle: deque[_Connection] = deque()
        self._lock = threading.Lock()

    def _take(self) -> _Connection | None:
        now = time.monotonic()
        with self._lock:
            while self._idle:
                conn = self._idle.pop()
                if now - conn.idle_since < self.keepalive_expiry and not _readable(conn.sock):
                    return conn
                conn.close()
        return None

    def _give_back(self, conn: _Connection) -> None:
        conn.idle_since = time.monotonic()
        with self._lock:
            if len(self._idle) < self.max_idle:
                self._idle.append(conn)
                return
        conn.close()

    def _connect(self, timeouts: Timeouts, where: Callable[[], httpx.Request]) -> _Connection:
        try:
            sock = socket.create_connection((self.host, self.port), timeout=timeouts.connect)
        except TimeoutError as exc:
            raise _error(httpx.ConnectTimeout, str(exc) or "connect timed out", where) from exc
        except OSError as exc:
            raise _error(httpx.ConnectError, str(exc), where) from exc
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return _Connection(sock)

    def request(
        self, method: bytes, target: bytes, headers: Headers, body: bytes | None, timeouts: Timeouts,
        where: Callable[[], httpx.Request],
    ) -> Answer:
        """One request (`headers` without Host and Content-Length: added here), its answer read whole.
        `where` makes the httpx.Request an error names."""
        headers = [(b"Host", self.authority.encode()), *headers, *_content_length(body)]
        conn = self._take()
        if conn is not None:
            try:
                return self._exchange(conn, method, target, headers, body, timeouts, where)
            except _Stale:
                pass  # closed by the server as it was reused: once more on a new connection
        conn = self._connect(timeouts, where)
        try:
            return self._exchange(conn, method, target, headers, body, timeouts, where)
        except _Stale as exc:
            raise _error(httpx.RemoteProtocolError, "Server disconnected without sending a response.", where) from exc

    def _exchange(self, conn: _Connection, method, target, headers, body, timeouts: Timeouts, where) -> Answer:
        sock = conn.sock
        try:
            try:
                parts = _request_bytes(conn.h11, method, target, headers, body)
                if sock.gettimeout() != timeouts.write:  # each change is a system call
                    sock.settimeout(timeouts.write)
                for part in parts:
                    sock.sendall(part)
            except TimeoutError as exc:
                raise _error(httpx.WriteTimeout, str(exc) or "write timed out", where) from exc
            except OSError as exc:
                raise _Stale from exc
            if timeouts.read != timeouts.write:
                sock.settimeout(timeouts.read)
            reader = _Reader(conn.h11)
            while True:
                done = reader.step()
                if done:
                    break
                if done is None:
                    try:
                        reader.feed(sock.recv(READ_SIZE))
                    except ConnectionResetError as exc:
                        if reader.got:
                            raise
                        raise _Stale from exc
        except TimeoutError as exc:
            conn.close()
            raise _error(httpx.ReadTimeout, str(exc) or "read timed out", where) from exc
        except (h11.RemoteProtocolError, h11.LocalProtocolError) as exc:  # a malformed answer, a bad length or chunk
            conn.close()
            raise _error(httpx.RemoteProtocolError, str(exc) or type(exc).__name__, where) from exc
        except OSError as exc:
            conn.close()
            raise _error(httpx.ReadError, str(exc), where) from exc
        except BaseException:
            conn.close()
            raise
        if reader.reusable():
            self._give_back(conn)
        else:
            conn.close()
        return reader.answer()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, deque()
        for conn in idle:
            conn.close()


# --- asyncio streams ----------------------------------------------------------------------------


class _AsyncConnection:
    __slots__ = ("reader", "writer", "h11", "idle_since")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer, self.h11, self.idle_since = reader, writer, h11.Connection(h11.CLIENT), 0.0

    def stale(self) -> bool:
        """The server closed it while idle (its end read, or the transport gone)."""
        return self.reader.at_eof() or self.writer.transport.is_closing()

    def close(self) -> None:
        self.writer.transport.abort()  # nothing left to send: no need to wait for a clean close


class AsyncPool:
    """Kept-alive connections to one `host:port`, for the tasks of one event loop (module docstring).

    At most `max_connections` requests are under way at once; the others wait their turn."""

    def __init__(
        self, host: str, port: int, *, max_idle: int = 32, keepalive_expiry: float = 4.0, max_connections: int = 100,
    ) -> None:
        self.host, self.port = host, port
        self.authority = (host if ":" not in host else f"[{host}]") + f":{port}"
        self.max_idle, self.keepalive_expiry = max_idle, keepalive_expiry
        self._idle: deque[_AsyncConnection] = deque()
        self._slots = asyncio.Semaphore(max_connections)

    def _take(self) -> _AsyncConnection | None:
        now = time.monotonic()
        while self._idle:
            conn = self._idle.pop()
            if now - conn.idle_since < self.keepalive_expiry and not conn.stale():
                return conn
            conn.close()
        return None

    def _give_back(self, conn: _AsyncConnection) -> None:
        if len(self._idle) < self.max_idle:
            conn.idle_since = time.monotonic()
            self._idle.append(conn)
        else:
            conn.close()

    async def _connect(self, timeouts: Timeouts, where: Callable[[], httpx.Request]) -> _AsyncConnection:
        try:
            async with asyncio.timeout(timeouts.connect):
                reader, writer = await asyncio.open_connection(self.host, self.port, limit=READ_SIZE)
        except TimeoutError as exc:
            raise _error(httpx.ConnectTimeout, "connect timed out", where) from exc
        except OSError as exc:
            raise _error(httpx.ConnectError, str(exc), where) from exc
        return _AsyncConnection(reader, writer)

    async def request(
        self, method: bytes, target: bytes, headers: Headers, body: bytes | None, timeouts: Timeouts,
        where: Callable[[], httpx.Request],
    ) -> Answer:
        """As `Pool.request`, on the running loop."""
        headers = [(b"Host", self.authority.encode()), *headers, *_content_length(body)]
        async with self._slots:
            conn = self._take()
            if conn is not None:
                try:
                    return await self._exchange(conn, method, target, headers, body, timeouts, where)
                except _Stale:
                    pass  # closed by the server as it was reused: once more on a new connection
            conn = await self._connect(timeouts, where)
            try:
                return await self._exchange(conn, method, target, headers, body, timeouts, where)
            except _Stale as exc:
                raise _error(httpx.RemoteProtocolError, "Server disconnected without sending a response.", where) from exc

    async def _exchange(self, conn: _AsyncConnection, method, target, headers, body, timeouts: Timeouts, where) -> Answer:
        writer, stream = conn.writer, conn.reader
        await take_turn()  # most often taken already: the caller's encoding of the request
        try:
            try:
                parts = _request_bytes(conn.h11, method, target, headers, body)
                for part in parts:
                    writer.write(part)
                if writer.transport.get_write_buffer_size():  # not all written at once: wait for it
                    async with asyncio.timeout(timeouts.write):
                        await writer.drain()
            except TimeoutError as exc:
                raise _error(httpx.WriteTimeout, "write timed out", where) from exc
            except OSError as exc:
                raise _Stale from exc
            reader = _Reader(conn.h11)
            while True:
                done = reader.step()
                if done:
                    break
                if done is None:
                    try:
                        async with asyncio.timeout(timeouts.read):
                            data = await stream.read(READ_SIZE)
                    except ConnectionResetError as exc:
                        if reader.got:
                            raise
                        raise _Stale from exc
                    # What came back is read (and, most often, the task's next request made) in
                    # a turn of the loop's passes: twenty answers come back together.
                    await take_turn()
                    reader.feed(data)
        except TimeoutError as exc:
            conn.close()
            raise _error(httpx.ReadTimeout, "read timed out", where) from exc
        except (h11.RemoteProtocolError, h11.LocalProtocolError) as exc:
            conn.close()
            raise _error(httpx.RemoteProtocolError, str(exc) or type(exc).__name__, where) from exc
        except OSError as exc:
            conn.close()
            raise _error(httpx.ReadError, str(exc), where) from exc
        except BaseException:  # cancelled: the answer is lost with the connection
            conn.close()
            raise
        if reader.reusable():
            self._give_back(conn)
        else:
            conn.close()
        return reader.answer()

    def close(self) -> None:
        idle, self._idle = self._idle, deque()
        for conn in idle:
            conn.close()


# --- under an httpx client ----------------------------------------------------------------------


class PlainHTTPTransport(httpx.BaseTransport):
    """`Pool` for `http://`, httpx's transport for the rest (module docstring)."""

    def __init__(self, *, fallback: httpx.BaseTransport, max_idle: int = 32, keepalive_expiry: float = 4.0) -> None:
        self.fallback = fallback
        self.max_idle = max_idle
        self.keepalive_expiry = keepalive_expiry
        self._pools: dict[tuple[str, int], Pool] = {}
        self._lock = threading.Lock()

    def pool(self, host: str, port: int) -> Pool:
        with self._lock:
            pool = self._pools.get((host, port))
            if pool is None:
                pool = self._pools[(host, port)] = Pool(
                    host, port, max_idle=self.max_idle, keepalive_expiry=self.keepalive_expiry
                )
            return pool

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        if url.scheme != "http":
            return self.fallback.handle_request(request)
        timeouts = request.extensions.get("timeout", {})
        headers = [(name, value) for name, value in request.headers.raw if name.lower() not in (b"host", b"content-length")]
        answer = self.pool(url.host, url.port or 80).request(
            request.method.encode(), url.raw_path, headers, request.read() or None,
            Timeouts(timeouts.get("connect"), timeouts.get("write"), timeouts.get("read")), lambda: request,
        )
        return httpx.Response(
            answer.status, headers=answer.headers, stream=httpx.ByteStream(answer.content),
            extensions={"http_version": b"HTTP/1.1", "reason_phrase": answer.reason},
        )

    def close(self) -> None:
        with self._lock:
            pools, self._pools = self._pools, {}
        for pool in pools.values():
            pool.close()
        self.fallback.close()


__all__ = ["Answer", "AsyncPool", "PlainHTTPTransport", "Pool", "Timeouts"]
