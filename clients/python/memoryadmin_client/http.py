"""The client's one HTTP layer: the saver and the store both send their requests through `HTTPClient`.

    http = HTTPClient("http://127.0.0.1:8000", api_key)     # "/api/v1" is added unless given
    response = http.send(Call("GET", "/store/items", params={...}))
    response = await http.asend(Call("PUT", "/store/items", body={...}))

Connections: a plain `http://` server is spoken to through the client's own
HTTP/1.1 transport (`memoryadmin_client.wire`, h11 over kept-alive connections):
blocking sockets for the sync calls, asyncio streams for the async ones, one pool
per event loop (a stream belongs to the loop that opened it). The request goes
straight to it, as httpx's client would have sent it (the same headers and
timeouts), without httpx's client or anyio: those cost about a millisecond of CPU
a request, most of what a step costs an agent's process, and in an async program
it ran on the event loop. `https://`, a proxy named in the environment, or a
transport given go through httpx: one pooled `httpx.Client` for the sync calls and
one `httpx.AsyncClient` per event loop. Every client of the process shares one
TLS context, made once (loading the certificates takes tens of milliseconds,
which a new loop's first request would otherwise spend holding the interpreter).
Idle connections are kept 4 s, less than the server's keep-alive
(gunicorn.conf.py: 5 s), so a reused connection is not one the server is
closing; up to 32 of them, enough for that many concurrent tasks of one loop.
Answers are `httpx.Response`s either way.
The key goes as `Authorization: Bearer <key>`; bodies are strict JSON (NaN or
infinity is refused before anything is sent, as `MemoryAdminInvalid`, a
ValueError, since the server would refuse them too). A caller that has already
made its body strict JSON (the LangGraph saver's codec) hands over the bytes
(`Call.content`), written by orjson where it is installed (the `langgraph` extra
brings it), and reads answers with `json_of`, which parses with orjson too.

Retries (`RetryPolicy`): every request the adapters make is idempotent (a put is
an upsert, a write an upsert by task and index, deletes and reads repeat), so
a request is tried again, up to `retries` times, when

- the connection dropped or could not be made (`httpx.TransportError`), or the
  server answered 503 (its database busy or away): after a capped exponential
  backoff with jitter, 0.05 s doubling to at most 1 s;
- the server answered 429 (this key's rate spent): after the `Retry-After` the
  server sent (seconds, or an HTTP date), or the backoff when it sent none. A
  `Retry-After` longer than `retry_after_max` (60 s) is raised at once as
  `MemoryAdminThrottled`, rather than held for minutes.

The 503 of memoryadmin always says `Retry-After: 5`, for any outage; the
backoff tries sooner, since the short outages (a lock, a failover) are the
common ones. Once the retries are spent the last answer is raised (an
`errors.MemoryAdminError` subclass) or, for a dropped connection, httpx's error
(`httpx.TransportError`), whichever transport carried it.
"""

from __future__ import annotations

import asyncio
import email.utils
import functools
import importlib
import json
import math
import random
import re
import time
import urllib.request
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timezone
from typing import Any

import httpx

try:  # the `langgraph` extra depends on it; the core works without it.
    import orjson
except ImportError:  # pragma: no cover - exercised by an install without the extra
    orjson = None

from .errors import MemoryAdminError, error_class, refused_here
from . import wire
from .wire import Answer, PlainHTTPTransport

# httpx's async transport reaches the event loop through anyio, which imports its asyncio
# backend on the first async request: a few hundred milliseconds of importing on the loop.
# Imported here instead, with the client.
try:
    importlib.import_module("anyio._backends._asyncio")
except ImportError:  # pragma: no cover - another anyio layout: imported on first use, as before
    pass

API_PREFIX = "/api/v1"
RETRIES = 6
# Seconds before the first retry; doubled each time, at most RETRY_CAP.
RETRY_BASE = 0.05
RETRY_CAP = 1.0
RETRY_AFTER_MAX = 60.0
JSON_HEADERS = {"Content-Type": "application/json"}
LIMITS = httpx.Limits(max_connections=100, max_keepalive_connections=32, keepalive_expiry=4.0)


@functools.cache
def tls_context():
    """The process's one TLS context, as httpx makes it (certifi's roots, SSL_CERT_FILE honoured)."""
    return httpx.create_ssl_context()


def _environment_proxies() -> bool:
    """Whether the environment names a proxy (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY), as httpx reads it."""
    return any(scheme in urllib.request.getproxies() for scheme in ("http", "https", "all"))


def api_root(*, base_url: str) -> str:
    """The API's root: the server's address with `/api/v1` added, unless it already ends so."""
    root = base_url.rstrip("/")
    return root if root.endswith(API_PREFIX) else root + API_PREFIX


def encode_json(*, body: Any) -> bytes | None:
    """A request body as strict, compact UTF-8 JSON (None for no body): NaN and infinity are refused here."""
    if body is None:
        return None
    try:
        return json.dumps(body, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()
    except ValueError as exc:
        raise refused_here(field="body", message=f"is not strict JSON ({exc}).") from None


def dumps_strict(value: Any) -> bytes:
    """JSON bytes of a value already known to be strict JSON (only dict with str keys, list,
    str, int, finite float, bool, None): orjson where installed, else the standard library.
    orjson writes NaN as null, so this is for values checked before (the saver's codec)."""
    if orjson is not None:
        try:
            return orjson.dumps(value)
        except TypeError:  # an integer past 64 bits, a surrogate: let the checked encoder say why
            pass
    return encode_json(body=value) or b"null"


def json_of(response: httpx.Response) -> Any:
    """The JSON body of an answer, parsed with orjson where installed."""
    if orjson is not None:
        return orjson.loads(response.content)
    return response.json()


def retry_after_seconds(*, response: httpx.Response, now: float | None = None) -> float | None:
    """The wait a `Retry-After` header asks for, in seconds (never negative); None when absent or unreadable.

    Both forms of RFC 9110 are read: delta-seconds ("5") and an HTTP date.
    """
    raw = response.headers.get("Retry-After")
    if raw is None:
        return None
    raw = raw.strip()
    try:
        seconds = float(raw)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(raw)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=timezone.utc)
        seconds = when.timestamp() - (time.time() if now is None else now)
    if not math.isfinite(seconds):
        return None
    return max(0.0, seconds)


@dataclass(frozen=True, kw_only=True)
class RetryPolicy:
    """When a request is tried again, and after how long (the module docstring gives the rules)."""

    retries: int = RETRIES
    base: float = RETRY_BASE
    cap: float = RETRY_CAP
    retry_after_max: float = RETRY_AFTER_MAX

    def backoff(self, *, attempt: int) -> float:
        """Capped exponential backoff with jitter: base·2^attempt, at most cap, then scaled by 0.5…1."""
        return min(self.cap, self.base * 2**attempt) * (0.5 + random.random() / 2)

    def wait(self, *, attempt: int, response: httpx.Response | None) -> float | None:
        """Seconds to wait before trying `attempt + 1`, or None to stop and answer (or raise) now.

        `response` is None when the connection dropped.
        """
        if attempt >= self.retries:
            return None
        if response is None or response.status_code == 503:
            return self.backoff(attempt=attempt)
        if response.status_code == 429:
            asked = retry_after_seconds(response=response)
            if asked is None:
                return self.backoff(attempt=attempt)
            return asked if asked <= self.retry_after_max else None
        return None


@dataclass(frozen=True)
class Call:
    """One API request: `tolerate` lists the statuses that mean "nothing there" (answered None, not raised).

    `headers` are sent with this request only (an `If-Match`, say), on top of the client's.
    `content`, when given, is the body as strict JSON bytes already (then `body` is not used).
    """

    method: str
    path: str
    params: Mapping[str, Any] | None = None
    body: Any = None
    tolerate: tuple[int, ...] = ()
    headers: Mapping[str, str] | None = None
    content: bytes | None = None


def request_headers(*, call: Call, content: bytes | None) -> dict[str, str] | None:
    """The headers of one request beyond the client's: JSON's content type when there is a body, and the call's own."""
    headers = {**(JSON_HEADERS if content is not None else {}), **(call.headers or {})}
    return headers or None


def error_from(*, response: httpx.Response) -> MemoryAdminError:
    """The `MemoryAdminError` subclass for a refused answer, carrying its JSON body (or its text)."""
    try:
        body: Any = response.json()
    except ValueError:
        body = response.text
    return error_class(status_code=response.status_code)(
        response.status_code,
        body,
        response.request.method,
        str(response.request.url),
        retry_after=retry_after_seconds(response=response),
    )


def answered(*, response: httpx.Response, tolerate: tuple[int, ...] = ()) -> httpx.Response | None:
    """A tolerated status is None, any other status of 400 or more is raised, the rest is the response."""
    if response.status_code in tolerate:
        return None
    if response.status_code >= 400:
        raise error_from(response=response)
    return response


class _Answered(httpx.Response):
    """An answer read by the client's own transport (`wire`): its `request` (an httpx.Request,
    whose URL takes time to parse) is made the first time it is asked for."""

    def __init__(self, answer: Answer, where: Callable[[], httpx.Request]) -> None:
        super().__init__(
            answer.status, headers=answer.headers, stream=httpx.ByteStream(answer.content),
            extensions={"http_version": b"HTTP/1.1", "reason_phrase": answer.reason},
        )
        self._where = where
        if any(name == b"content-encoding" for name, _ in answer.headers):
            self.read()  # compressed: httpx's decoders make the content
        else:
            # As read() leaves it, without passing the bytes through httpx's identity decoder.
            self._content, self.is_stream_consumed, self.is_closed = answer.content, True, True

    @property
    def request(self) -> httpx.Request:
        if self._request is None:
            self._request = self._where()
        return self._request

    @request.setter
    def request(self, value: httpx.Request) -> None:
        self._request = value


# A path made only of what a URL's path may hold as it is (percent-escapes included).
_PATH_SAFE = re.compile(r"[A-Za-z0-9\-._~!$&'()*+,;=:@/%]*")


class HTTPClient:
    """memoryadmin's API over pooled connections, with the one retry policy and the one error hierarchy.

    `base_url` is the server (`http://127.0.0.1:8000`; `/api/v1` is added unless
    given), `api_key` a memoryadmin API key (none when the transport authenticates
    by itself). `transport` / `async_transport` are handed to httpx.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        timeout: float = 30.0,
        retry: RetryPolicy | None = None,
        headers: Mapping[str, str] | None = None,
        transport: httpx.BaseTransport | None = None,
        async_transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.base_url = api_root(base_url=base_url)
        self.retry = retry if retry is not None else RetryPolicy()
        self.headers = {"Accept": "application/json", **(headers or {})}
        if api_key:
            self.headers["Authorization"] = f"Bearer {api_key}"
        self._timeout = timeout
        self._async_transport = async_transport
        # A plain http:// server, no transport given and no proxy in the environment: the calls
        # skip httpx's clients (their URL merging, cookie jar and, async, anyio cost more than the
        # request itself) and go straight to the client's own transport (`wire`), sync and async.
        root = httpx.URL(self.base_url)
        direct = root.scheme == "http" and not _environment_proxies()
        self._direct: wire.Pool | None = None
        self._async_direct = direct and async_transport is None
        if transport is None:
            # Plain http:// over the client's own transport (memoryadmin_client.wire), https:// over httpx's.
            transport = PlainHTTPTransport(
                fallback=httpx.HTTPTransport(verify=tls_context(), limits=LIMITS),
                max_idle=LIMITS.max_keepalive_connections, keepalive_expiry=LIMITS.keepalive_expiry,
            )
            if direct:
                self._direct = transport.pool(root.host, root.port or 80)
        self._client = httpx.Client(
            base_url=self.base_url, headers=self.headers, timeout=timeout, transport=transport,
            verify=tls_context(), limits=LIMITS,
        )
        # What httpx's client would send (its User-Agent, Accept-Encoding… and ours), as bytes, once.
        self._root, self._path = root, root.raw_path.decode("ascii").rstrip("/")
        self._host = (root.host, root.port or 80)
        self._raw_headers = [
            (name.encode("latin-1"), value.encode("latin-1")) for name, value in self._client.headers.items()
        ]
        limits = httpx.Timeout(timeout)
        self._wire_timeouts = wire.Timeouts(limits.connect, limits.write, limits.read)
        self._async_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient] = (
            weakref.WeakKeyDictionary()
        )
        self._async_pools: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, wire.AsyncPool] = (
            weakref.WeakKeyDictionary()
        )

    # the client's own transport

    def _direct_request(self, call: Call, content: bytes | None) -> tuple[bytes, bytes, list[tuple[bytes, bytes]], Callable[[], httpx.Request]]:
        """(method, target, headers, where) of a call as httpx's client would send it (where:
        the httpx.Request an error or `response.request` names, made on demand)."""
        path = self._path + call.path
        if not _PATH_SAFE.fullmatch(path):
            path = httpx.URL(self.base_url + call.path).raw_path.decode("ascii")
        if call.params:
            path += ("&" if "?" in path else "?") + str(httpx.QueryParams(call.params))
        headers = self._raw_headers
        if content is not None or call.headers:
            merged = {name.lower(): (name, value) for name, value in headers}
            for name, value in ({**(JSON_HEADERS if content is not None else {}), **(call.headers or {})}).items():
                merged[name.lower().encode("latin-1")] = (name.encode("latin-1"), value.encode("latin-1"))
            headers = list(merged.values())
        method, target = call.method.encode("ascii"), path.encode("ascii")

        def where() -> httpx.Request:
            return httpx.Request(
                call.method, self._root.copy_with(raw_path=target), headers=headers, content=content,
                extensions={"timeout": httpx.Timeout(self._timeout).as_dict()},
            )

        return method, target, headers, where

    def _send_direct(self, call: Call, content: bytes | None) -> httpx.Response:
        method, target, headers, where = self._direct_request(call, content)
        return _Answered(self._direct.request(method, target, headers, content, self._wire_timeouts, where), where)

    async def _asend_direct(self, call: Call, content: bytes | None) -> httpx.Response:
        loop = asyncio.get_running_loop()
        pool = self._async_pools.get(loop)
        if pool is None:
            pool = self._async_pools[loop] = wire.AsyncPool(
                *self._host, max_idle=LIMITS.max_keepalive_connections, keepalive_expiry=LIMITS.keepalive_expiry,
                max_connections=LIMITS.max_connections,
            )
        method, target, headers, where = self._direct_request(call, content)
        return _Answered(await pool.request(method, target, headers, content, self._wire_timeouts, where), where)

    # the calls

    def send(self, call: Call) -> httpx.Response | None:
        """`call` over the sync client, retried as the policy says; None for a tolerated status."""
        content = call.content if call.content is not None else encode_json(body=call.body)
        attempt = 0
        while True:
            try:
                if self._direct is not None:
                    response = self._send_direct(call, content)
                else:
                    response = self._client.request(
                        call.method, call.path, params=call.params or None, content=content,
                        headers=request_headers(call=call, content=content),
                    )
            except httpx.TransportError:
                wait = self.retry.wait(attempt=attempt, response=None)
                if wait is None:
                    raise
            else:
                wait = self.retry.wait(attempt=attempt, response=response)
                if wait is None:
                    return answered(response=response, tolerate=call.tolerate)
            time.sleep(wait)
            attempt += 1

    async def asend(self, call: Call) -> httpx.Response | None:
        """`call` on the running loop, retried as the policy says; None for a tolerated status."""
        content = call.content if call.content is not None else encode_json(body=call.body)
        attempt = 0
        while True:
            try:
                if self._async_direct:
                    response = await self._asend_direct(call, content)
                else:
                    client = self._async_clients.get(asyncio.get_running_loop())
                    if client is None or client.is_closed:
                        client = await self._async_client_made()
                    response = await client.request(
                        call.method, call.path, params=call.params or None, content=content,
                        headers=request_headers(call=call, content=content),
                    )
            except httpx.TransportError:
                wait = self.retry.wait(attempt=attempt, response=None)
                if wait is None:
                    raise
            else:
                wait = self.retry.wait(attempt=attempt, response=response)
                if wait is None:
                    return answered(response=response, tolerate=call.tolerate)
            await asyncio.sleep(wait)
            attempt += 1

    def async_client(self) -> httpx.AsyncClient:
        """The running event loop's AsyncClient (https://, a transport given), made on its first use there."""
        loop = asyncio.get_running_loop()
        client = self._async_clients.get(loop)
        if client is None or client.is_closed:
            client = httpx.AsyncClient(
                base_url=self.base_url, headers=self.headers, timeout=self._timeout, transport=self._async_transport,
                verify=tls_context(), limits=LIMITS,
            )
            self._async_clients[loop] = client
        return client

    async def _async_client_made(self) -> httpx.AsyncClient:
        """The running loop's AsyncClient, made in a worker thread: with the shared TLS context
        it loads no certificates, but setting up its pool still takes milliseconds."""
        loop = asyncio.get_running_loop()
        made = await asyncio.to_thread(
            httpx.AsyncClient,
            base_url=self.base_url, headers=self.headers, timeout=self._timeout, transport=self._async_transport,
            verify=tls_context(), limits=LIMITS,
        )
        client = self._async_clients.get(loop)
        if client is not None and not client.is_closed:  # another task of this loop made one meanwhile
            await made.aclose()
            return client
        self._async_clients[loop] = made
        return made

    def close(self) -> None:
        """Closes the sync client (and so its transport)."""
        self._client.close()

    async def aclose(self) -> None:
        """Closes the running loop's connections; another loop's can only be closed from that loop."""
        loop = asyncio.get_running_loop()
        pool = self._async_pools.pop(loop, None)
        if pool is not None:
            pool.close()
        client = self._async_clients.pop(loop, None)
        if client is not None:
            await client.aclose()

    def __enter__(self) -> HTTPClient:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    async def __aenter__(self) -> HTTPClient:
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.aclose()


__all__ = [
    "API_PREFIX",
    "Call",
    "HTTPClient",
    "RETRIES",
    "RetryPolicy",
    "answered",
    "api_root",
    "dumps_strict",
    "encode_json",
    "json_of",
    "error_from",
    "request_headers",
    "retry_after_seconds",
]
