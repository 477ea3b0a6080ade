"""The client's own transport (`memoryadmin_client.wire`) on both of its paths, sync sockets and
asyncio streams, against a real HTTP/1.1 server on loopback (the standard library's, in a thread).

Each test runs the same calls through `HTTPClient.send` and `HTTPClient.asend` (one event loop
for the calls of a test): the keep-alive, the retries and the errors must be the same on both.
"""

from __future__ import annotations

import asyncio
import gzip
import socket
import struct
import threading
import time

import httpx
import pytest
from passes import LoopPasses
from test_wire import Handler

from memoryadmin_client import errors, wire
from memoryadmin_client.http import Call, HTTPClient, RetryPolicy

BIG = 5 * 1024 * 1024
FAST = RetryPolicy(retries=3, base=0.001, cap=0.002)


class MoreHandler(Handler):
    def do_PUT(self):
        self.server.connections.add(self.client_address)
        body = self._body()
        self._answer(200, b'{"got":%d,"tail":"%s"}' % (len(body), body[-3:]), {"Content-Type": "application/json"})

    def do_GET(self):
        self.server.connections.add(self.client_address)
        self.server.hits[self.path] = self.server.hits.get(self.path, 0) + 1
        hits = self.server.hits[self.path]
        if self.path == "/api/v1/big":
            self._answer(200, b"x" * BIG)
        elif self.path == "/api/v1/gzip":
            self._answer(200, gzip.compress(b'{"a":"unzipped"}'), {"Content-Encoding": "gzip"})
        elif self.path.startswith("/api/v1/reset-once") and hits == 1:
            self._body()
            # Closed with a reset (SO_LINGER 0) instead of an answer: the connection "dropped".
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.close_connection = True
        elif self.path == "/api/v1/always-reset":
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.close_connection = True
        elif self.path.startswith("/api/v1/status/"):
            code = int(self.path.rsplit("/", 1)[1])
            self._answer(code, b'{"code":"c","detail":"refused %d"}' % code, {"Retry-After": "0"})
        else:
            super().do_GET()


@pytest.fixture
def server():
    from http.server import ThreadingHTTPServer

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), MoreHandler)
    httpd.daemon_threads = True
    httpd.connections, httpd.hits = set(), {}
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def base(server) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}"


def run(http: HTTPClient, mode: str, *calls: Call, pause: float = 0.0) -> list:
    """The calls one after the other, sync or on one event loop; an exception is returned in place of its answer."""
    if mode == "sync":
        out = []
        for call in calls:
            try:
                out.append(http.send(call))
            except Exception as exc:  # noqa: BLE001 - the test looks at it
                out.append(exc)
            time.sleep(pause)
        return out

    async def main():
        out = []
        try:
            for call in calls:
                try:
                    out.append(await http.asend(call))
                except Exception as exc:  # noqa: BLE001
                    out.append(exc)
                await asyncio.sleep(pause)
        finally:
            await http.aclose()
        return out

    return asyncio.run(main())


MODES = pytest.mark.parametrize("mode", ["sync", "async"])


@MODES
def test_the_plain_http_calls_take_the_clients_own_transport_and_keep_one_connection(server, mode):
    http = HTTPClient(base(server), "ma_key")
    assert http._direct is not None and http._async_direct
    answers = run(http, mode, *(Call("POST", f"/threads/t-{i}/checkpoints", params={"q": "a b"}, content=b'{"x":1}') for i in range(5)))
    assert [a.json() for a in answers] == [{"path": f"/api/v1/threads/t-{i}/checkpoints?q=a+b", "got": 7} for i in range(5)]
    assert all(a.status_code == 201 and a.headers["content-type"] == "application/json" for a in answers)
    assert str(answers[0].request.url) == f"{base(server)}/api/v1/threads/t-0/checkpoints?q=a+b"
    assert answers[0].request.headers["authorization"] == "Bearer ma_key"
    assert len(server.connections) == 1  # one kept-alive connection for every request
    http.close()


def test_each_event_loop_has_its_own_connections(server):
    http = HTTPClient(base(server))

    async def one():
        answer = await http.asend(Call("GET", "/x"))
        pool = http._async_pools[asyncio.get_running_loop()]
        await http.aclose()
        return answer, pool

    (first, pool_a), (second, pool_b) = asyncio.run(one()), asyncio.run(one())
    assert first.json() == second.json() == {"path": "/api/v1/x"}
    assert pool_a is not pool_b and len(server.connections) == 2


@MODES
def test_a_chunked_answer_an_answer_to_the_end_a_204_and_a_gzip_one_are_read_whole(server, mode):
    http = HTTPClient(base(server))
    chunked, to_end, empty, zipped, after = run(
        http, mode, Call("GET", "/chunked"), Call("GET", "/until-close"), Call("GET", "/empty"), Call("GET", "/gzip"),
        Call("GET", "/after"),
    )
    assert chunked.json() == {"a": "chunked"} and to_end.json() == {"a": "to the end"}
    assert empty.status_code == 204 and empty.content == b""
    assert zipped.json() == {"a": "unzipped"}
    assert after.json() == {"path": "/api/v1/after"}


@MODES
def test_a_connection_the_server_closed_is_not_reused(server, mode):
    http = HTTPClient(base(server))
    closed, after = run(http, mode, Call("GET", "/then-close"), Call("GET", "/next"), pause=0.05)
    assert closed.json() == {"a": "closed after"} and after.json() == {"path": "/api/v1/next"}
    assert len(server.connections) == 2


def test_a_kept_async_connection_closed_as_it_was_taken_is_tried_once_more_on_a_new_one(server, monkeypatch):
    """The close racing the reuse: the idle check passes, then the server's end is found."""
    http = HTTPClient(base(server), retry=RetryPolicy(retries=0))
    monkeypatch.setattr(wire._AsyncConnection, "stale", lambda self: False)  # the check ran before the close arrived
    closed, again = run(http, "async", Call("GET", "/then-close"), Call("GET", "/again"), pause=0.05)
    assert closed.status_code == 200 and again.json() == {"path": "/api/v1/again"}


@MODES
def test_a_dropped_connection_is_retried_for_every_call_as_the_policy_says(server, mode):
    http = HTTPClient(base(server), retry=FAST)
    (answer,) = run(http, mode, Call("GET", "/reset-once"))
    assert answer.json() == {"path": "/api/v1/reset-once"} and server.hits["/api/v1/reset-once"] == 2


@MODES
def test_a_connection_that_keeps_dropping_is_an_httpx_transport_error_after_the_retries(server, mode):
    http = HTTPClient(base(server), retry=FAST)
    (error,) = run(http, mode, Call("GET", "/always-reset"))
    assert isinstance(error, httpx.TransportError) and server.hits["/api/v1/always-reset"] == FAST.retries + 1
    assert error.request.url.path == "/api/v1/always-reset"


@MODES
def test_a_read_timeout_is_httpx_read_timeout_and_the_connection_is_dropped(server, mode):
    http = HTTPClient(base(server), timeout=0.1, retry=RetryPolicy(retries=0))
    slow, fine = run(http, mode, Call("GET", "/slow"), Call("GET", "/fine"))
    assert isinstance(slow, httpx.ReadTimeout) and fine.status_code == 200
    assert len(server.connections) == 2


@MODES
def test_a_refused_connection_is_httpx_connect_error_after_the_retries(mode):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    (error,) = run(HTTPClient(f"http://127.0.0.1:{port}", retry=FAST), mode, Call("GET", "/threads"))
    assert isinstance(error, httpx.ConnectError)


@MODES
def test_large_bodies_go_and_come_back_whole(server, mode):
    http = HTTPClient(base(server), timeout=10)
    body = b"y" * (BIG - 3) + b"end"
    sent, big, after = run(http, mode, Call("PUT", "/upload", content=body), Call("GET", "/big"), Call("GET", "/after"))
    assert sent.json() == {"got": BIG, "tail": "end"}
    assert len(big.content) == BIG and big.content == b"x" * BIG
    assert after.json() == {"path": "/api/v1/after"} and len(server.connections) == 1


@MODES
def test_refusals_are_the_same_error_classes_and_503_and_429_are_retried(server, mode):
    http = HTTPClient(base(server), retry=FAST)
    missing, gone, throttled, tolerated = run(
        http, mode, Call("GET", "/status/404"), Call("GET", "/status/503"), Call("GET", "/status/429"),
        Call("GET", "/status/412", tolerate=(412,)),
    )
    assert isinstance(missing, errors.MemoryAdminNotFound) and missing.detail == "refused 404"
    assert f"GET {base(server)}/api/v1/status/404" in str(missing)
    assert isinstance(gone, errors.MemoryAdminUnavailable) and server.hits["/api/v1/status/503"] == FAST.retries + 1
    assert isinstance(throttled, errors.MemoryAdminThrottled) and throttled.retry_after == 0
    assert server.hits["/api/v1/status/429"] == FAST.retries + 1
    assert tolerated is None and server.hits["/api/v1/status/404"] == 1


def test_a_malformed_answer_is_a_protocol_error_on_the_async_path_too():
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()

        def serve():
            conn, _ = listener.accept()
            conn.recv(65536)
            conn.sendall(b"SMTP ready\r\n\r\n")
            conn.close()

        threading.Thread(target=serve, daemon=True).start()
        http = HTTPClient(f"http://127.0.0.1:{listener.getsockname()[1]}", retry=RetryPolicy(retries=0))
        (error,) = run(http, "async", Call("GET", "/threads"))
    assert isinstance(error, httpx.RemoteProtocolError)


def test_https_a_transport_given_or_a_proxy_go_through_httpx(monkeypatch):
    assert HTTPClient("https://memoryadmin.test")._direct is None
    assert not HTTPClient("https://memoryadmin.test")._async_direct
    given = HTTPClient("http://memoryadmin.test", async_transport=httpx.MockTransport(lambda r: httpx.Response(200)))
    assert given._direct is not None and not given._async_direct
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.test:3128")
    proxied = HTTPClient("http://memoryadmin.test")
    assert proxied._direct is None and not proxied._async_direct


def test_answers_that_came_back_together_are_read_in_turns_of_the_loops_passes(server, monkeypatch):
    from memoryadmin_client import turns

    # No budget: a pass lets one piece of work through, the other answers wait for the next passes.
    monkeypatch.setattr(turns, "TURN_BUDGET", 0.0)
    http = HTTPClient(base(server))
    passes = LoopPasses()
    read_in: list[int] = []

    async def main():
        async def one():
            await http.asend(Call("GET", "/slow"))  # answered after 0.5 s
            read_in.append(passes.count)

        passes.start()
        tasks = [asyncio.create_task(one()) for _ in range(6)]
        await asyncio.sleep(0.2)  # every request sent (one per pass)
        time.sleep(0.6)  # the loop held: every answer comes back meanwhile, all readable at once
        await asyncio.gather(*tasks)
        passes.stop()
        await http.aclose()

    asyncio.run(main())
    assert len(read_in) == 6 and len(set(read_in)) == 6, read_in  # each answer read in a pass of its own
