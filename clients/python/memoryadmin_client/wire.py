"""`PlainHTTPTransport`: the sync client's transport for plain `http://` servers.

httpx's own transport (httpcore and h11) spends about a millisecond of CPU per request
in Python; an agent's step is a request or two, so that millisecond is most of what a
step costs the agent's process. This transport speaks the little HTTP/1.1 the client
needs over kept-alive sockets: the request head and body in one write, the answer read
by its Content-Length (or its chunks, or to the end when the server closes). httpx's
client stays on top of it (URLs, headers, timeouts, content decoding, proxies: a proxied
URL takes httpx's proxy transport, never this one). `https://` goes to httpx's own
transport, with the process's TLS context.

Connections: idle ones are kept per host and port, at most `max_idle` of them, and
dropped after `keepalive_expiry` seconds (shorter than the server's keep-alive) or when
the server has closed them (a readable idle socket). A kept connection that fails before
any byte of the answer came back is tried once more on a new one: the server closed it
as it was reused. Failures are httpx's errors (`ConnectError`, `ReadTimeout`,
`RemoteProtocolError`…), so the retry policy of `memoryadmin_client.http` treats them
as it treats httpx's own.
"""

from __future__ import annotations

import select
import socket
import threading
import time
from collections import deque
from typing import Any

import httpx

READ_SIZE = 65536
MAX_HEAD = 65536
NO_BODY = frozenset({204, 304})


class _Connection:
    __slots__ = ("sock", "buffer", "idle_since")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = b""
        self.idle_since = 0.0

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


class _Closed(Exception):
    """The server closed the connection before the first byte of the answer."""


class PlainHTTPTransport(httpx.BaseTransport):
    """HTTP/1.1 over kept-alive sockets for `http://`, httpx's transport for the rest (module docstring)."""

    def __init__(self, *, fallback: httpx.BaseTransport, max_idle: int = 32, keepalive_expiry: float = 4.0) -> None:
        self.fallback = fallback
        self.max_idle = max_idle
        self.keepalive_expiry = keepalive_expiry
        self._idle: dict[tuple[str, int], deque[_Connection]] = {}
        self._lock = threading.Lock()

    # the pool

    def _take(self, origin: tuple[str, int]) -> _Connection | None:
        now = time.monotonic()
        with self._lock:
            idle = self._idle.get(origin)
            while idle:
                conn = idle.pop()
                if now - conn.idle_since < self.keepalive_expiry and not _readable(conn.sock):
                    return conn
                conn.close()
        return None

    def _give_back(self, origin: tuple[str, int], conn: _Connection) -> None:
        conn.idle_since = time.monotonic()
        with self._lock:
            idle = self._idle.setdefault(origin, deque())
            if sum(len(d) for d in self._idle.values()) < self.max_idle:
                idle.append(conn)
                return
        conn.close()

    @staticmethod
    def _connect(origin: tuple[str, int], timeouts: dict[str, Any], request: httpx.Request) -> _Connection:
        try:
            sock = socket.create_connection(origin, timeout=timeouts.get("connect"))
        except TimeoutError as exc:
            raise httpx.ConnectTimeout(str(exc) or "connect timed out", request=request) from exc
        except OSError as exc:
            raise httpx.ConnectError(str(exc), request=request) from exc
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return _Connection(sock)

    # one request

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        if url.scheme != "http":
            return self.fallback.handle_request(request)
        origin = (url.host, url.port or 80)
        timeouts = request.extensions.get("timeout", {})
        head = [b"%s %s HTTP/1.1\r\n" % (request.method.encode("ascii"), url.raw_path)]
        head.extend(b"%s: %s\r\n" % (name, value) for name, value in request.headers.raw)
        head.append(b"\r\n")
        message = b"".join(head) + request.read()
        conn = self._take(origin)
        if conn is not None:
            try:
                return self._exchange(origin, conn, message, request, timeouts)
            except _Closed:
                pass  # closed by the server as it was reused: once more on a new connection
        conn = self._connect(origin, timeouts, request)
        try:
            return self._exchange(origin, conn, message, request, timeouts)
        except _Closed as exc:
            raise httpx.RemoteProtocolError("Server disconnected without sending a response.", request=request) from exc

    def _exchange(self, origin, conn: _Connection, message: bytes, request: httpx.Request, timeouts) -> httpx.Response:
        sock = conn.sock
        try:
            try:
                sock.settimeout(timeouts.get("write"))
                sock.sendall(message)
            except TimeoutError as exc:
                raise httpx.WriteTimeout(str(exc) or "write timed out", request=request) from exc
            except OSError as exc:
                raise _Closed from exc
            sock.settimeout(timeouts.get("read"))
            status, reason, headers, keep = self._read_head(conn, request)
            body = self._read_body(conn, request, status, headers, keep)
        except BaseException:
            conn.close()
            raise
        if keep[0]:
            self._give_back(origin, conn)
        else:
            conn.close()
        return httpx.Response(
            status, headers=headers, stream=httpx.ByteStream(body),
            extensions={"http_version": b"HTTP/1.1", "reason_phrase": reason},
        )

    def _recv(self, conn: _Connection, request: httpx.Request, *, first: bool = False) -> bytes:
        try:
            data = conn.sock.recv(READ_SIZE)
        except TimeoutError as exc:
            raise httpx.ReadTimeout(str(exc) or "read timed out", request=request) from exc
        except OSError as exc:
            if first:
                raise _Closed from exc
            raise httpx.ReadError(str(exc), request=request) from exc
        if not data and first:
            raise _Closed
        return data

    def _read_head(self, conn: _Connection, request: httpx.Request):
        while True:  # an informational answer (1xx) is skipped
            first = not conn.buffer
            while b"\r\n\r\n" not in conn.buffer:
                data = self._recv(conn, request, first=first)
                if not data:
                    raise httpx.RemoteProtocolError("Server disconnected in the answer's head.", request=request)
                first = False
                conn.buffer += data
                if len(conn.buffer) > MAX_HEAD:
                    raise httpx.RemoteProtocolError("The answer's head is too long.", request=request)
            raw, conn.buffer = conn.buffer.split(b"\r\n\r\n", 1)
            lines = raw.split(b"\r\n")
            version, _, rest = lines[0].partition(b" ")
            code, _, reason = rest.partition(b" ")
            if not version.startswith(b"HTTP/1.") or not code.isdigit():
                raise httpx.RemoteProtocolError(f"Not an HTTP/1.1 answer: {lines[0][:80]!r}", request=request)
            status = int(code)
            if 100 <= status < 200:
                continue
            headers = []
            for line in lines[1:]:
                name, sep, value = line.partition(b":")
                if not sep:
                    raise httpx.RemoteProtocolError(f"Malformed header line: {line[:80]!r}", request=request)
                headers.append((name.strip(), value.strip()))
            connection = b",".join(v for n, v in headers if n.lower() == b"connection").lower()
            keep = [b"close" not in connection and (version == b"HTTP/1.1" or b"keep-alive" in connection)]
            return status, reason, headers, keep

    def _read_body(self, conn: _Connection, request: httpx.Request, status: int, headers, keep: list) -> bytes:
        if request.method == "HEAD" or status in NO_BODY:
            return b""
        fields = {name.lower(): value for name, value in headers}
        if b"chunked" in fields.get(b"transfer-encoding", b"").lower():
            return self._read_chunks(conn, request)
        length = fields.get(b"content-length")
        if length is not None:
            if not length.isdigit():
                raise httpx.RemoteProtocolError(f"Bad Content-Length: {length[:40]!r}", request=request)
            return self._read_exactly(conn, request, int(length))
        keep[0] = False  # delimited by the end of the connection
        parts = [conn.buffer]
        conn.buffer = b""
        while data := self._recv(conn, request):
            parts.append(data)
        return b"".join(parts)

    def _read_exactly(self, conn: _Connection, request: httpx.Request, length: int) -> bytes:
        parts, have = [conn.buffer], len(conn.buffer)
        while have < length:
            data = self._recv(conn, request)
            if not data:
                raise httpx.RemoteProtocolError("Server disconnected in the answer's body.", request=request)
            parts.append(data)
            have += len(data)
        joined = b"".join(parts)
        conn.buffer = joined[length:]
        return joined[:length]

    def _read_line(self, conn: _Connection, request: httpx.Request) -> bytes:
        while b"\r\n" not in conn.buffer:
            data = self._recv(conn, request)
            if not data:
                raise httpx.RemoteProtocolError("Server disconnected in a chunked body.", request=request)
            conn.buffer += data
        line, conn.buffer = conn.buffer.split(b"\r\n", 1)
        return line

    def _read_chunks(self, conn: _Connection, request: httpx.Request) -> bytes:
        parts = []
        while True:
            size = self._read_line(conn, request).split(b";", 1)[0].strip()
            try:
                count = int(size, 16)
            except ValueError:
                raise httpx.RemoteProtocolError(f"Bad chunk size: {size[:20]!r}", request=request) from None
            if count == 0:
                while self._read_line(conn, request):  # trailers, up to the empty line
                    pass
                return b"".join(parts)
            parts.append(self._read_exactly(conn, request, count + 2)[:-2])

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, {}
        for connections in idle.values():
            for conn in connections:
                conn.close()
        self.fallback.close()


def _readable(sock: socket.socket) -> bool:
    """An idle connection with something to read has been closed (or broken) by the server."""
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)


__all__ = ["PlainHTTPTransport"]
