"""`PlainHTTPTransport`: the sync client's transport for plain `http://` servers.

httpx's own transport (httpcore and h11) spends about a millisecond of CPU per request
in Python; an agent's step is a request or two, so that millisecond is most of what a
step costs the agent's process. This transport hands a plain `http://` request to the
standard library's HTTP/1.1 client (`http.client`), which parses the answer (its length,
its chunks, an answer to the end of the connection, 1xx answers) in a fraction of that,
over kept-alive connections. httpx's client stays on top of it (URLs, headers, timeouts,
content decoding, proxies: a proxied URL takes httpx's proxy transport, never this one).
`https://` goes to httpx's own transport, with the process's TLS context.

Connections: idle ones are kept per host and port, at most `max_idle` of them, and
dropped after `keepalive_expiry` seconds (shorter than the server's keep-alive) or when
the server has closed them (a readable idle socket). A kept connection that fails before
any byte of the answer came back is tried once more on a new one: the server closed it
as it was reused. Failures are httpx's errors (`ConnectError`, `ReadTimeout`,
`RemoteProtocolError`…), so the retry policy of `memoryadmin_client.http` treats them
as it treats httpx's own.
"""

from __future__ import annotations

import http.client
import select
import socket
import threading
import time
from collections import deque
from typing import Any

import httpx


class _Connection(http.client.HTTPConnection):
    """http.client's connection, with Nagle's algorithm off (a request is one write) and its idle time."""

    idle_since = 0.0

    def connect(self) -> None:
        super().connect()
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class _Stale(Exception):
    """A reused connection the server had closed: nothing of the answer came back."""


class PlainHTTPTransport(httpx.BaseTransport):
    """`http.client` over kept-alive connections for `http://`, httpx's transport for the rest (module docstring)."""

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
        conn = _Connection(origin[0], origin[1], timeout=timeouts.get("connect"))
        try:
            conn.connect()
        except TimeoutError as exc:
            raise httpx.ConnectTimeout(str(exc) or "connect timed out", request=request) from exc
        except OSError as exc:
            raise httpx.ConnectError(str(exc), request=request) from exc
        return conn

    # one request

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        if url.scheme != "http":
            return self.fallback.handle_request(request)
        origin = (url.host, url.port or 80)
        timeouts = request.extensions.get("timeout", {})
        body = request.read()
        conn = self._take(origin)
        if conn is not None:
            try:
                return self._exchange(origin, conn, request, body, timeouts)
            except _Stale:
                pass  # closed by the server as it was reused: once more on a new connection
        conn = self._connect(origin, timeouts, request)
        try:
            return self._exchange(origin, conn, request, body, timeouts)
        except _Stale as exc:
            raise httpx.RemoteProtocolError("Server disconnected without sending a response.", request=request) from exc

    def _exchange(self, origin, conn: _Connection, request: httpx.Request, body: bytes, timeouts) -> httpx.Response:
        try:
            try:
                conn.sock.settimeout(timeouts.get("write"))
                # The request's own headers, Host and Accept-Encoding included, as httpx made them.
                conn.putrequest(request.method, request.url.raw_path.decode("ascii"), skip_host=True, skip_accept_encoding=True)
                for name, value in request.headers.raw:
                    conn.putheader(name, value)
                conn.endheaders(body or None)
            except TimeoutError as exc:
                raise httpx.WriteTimeout(str(exc) or "write timed out", request=request) from exc
            except OSError as exc:
                raise _Stale from exc
            conn.sock.settimeout(timeouts.get("read"))
            try:
                answer = conn.getresponse()
            except (http.client.RemoteDisconnected, ConnectionResetError) as exc:  # closed before the first byte of the answer
                raise _Stale from exc
            content = answer.read()
        except TimeoutError as exc:
            conn.close()
            raise httpx.ReadTimeout(str(exc) or "read timed out", request=request) from exc
        except (http.client.HTTPException, ValueError) as exc:  # a malformed answer, a bad length or chunk
            conn.close()
            raise httpx.RemoteProtocolError(str(exc) or type(exc).__name__, request=request) from exc
        except OSError as exc:
            conn.close()
            raise httpx.ReadError(str(exc), request=request) from exc
        except BaseException:
            conn.close()
            raise
        if answer.will_close:
            conn.close()
        else:
            self._give_back(origin, conn)
        return httpx.Response(
            answer.status, headers=answer.getheaders(), stream=httpx.ByteStream(content),
            extensions={"http_version": b"HTTP/1.1", "reason_phrase": answer.reason.encode("latin-1", "replace")},
        )

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, {}
        for connections in idle.values():
            for conn in connections:
                conn.close()
        self.fallback.close()


def _readable(sock: socket.socket | None) -> bool:
    """An idle connection with something to read has been closed (or broken) by the server."""
    if sock is None:
        return True
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)


__all__ = ["PlainHTTPTransport"]
