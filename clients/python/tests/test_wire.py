"""The sync client's lean HTTP/1.1 transport, against a real HTTP server on loopback.

The server is the standard library's (`http.server`, HTTP/1.1 with keep-alive), run in a
thread; each test reads what went over the sockets.
"""

from __future__ import annotations

import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from memoryadmin_client import wire
from memoryadmin_client.http import Call, HTTPClient, RetryPolicy


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):  # quiet
        pass

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _answer(self, status: int, body: bytes, headers: dict[str, str] | None = None, length: bool = True) -> None:
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        if length:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        self.server.connections.add(self.client_address)
        body = self._body()
        self._answer(201, b'{"path":"%s","got":%d}' % (self.path.encode(), len(body)), {"Content-Type": "application/json"})

    def do_GET(self):
        self.server.connections.add(self.client_address)
        if self.path == "/api/v1/chunked":
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for part in (b'{"a":', b'"chunked"', b"}"):
                self.wfile.write(b"%x;ext=1\r\n%s\r\n" % (len(part), part))
            self.wfile.write(b"0\r\nX-Trailer: t\r\n\r\n")
        elif self.path == "/api/v1/until-close":
            self._answer(200, b'{"a":"to the end"}', {"Connection": "close"}, length=False)
            self.close_connection = True
        elif self.path == "/api/v1/then-close":
            self._answer(200, b'{"a":"closed after"}')
            self.close_connection = True
        elif self.path == "/api/v1/slow":
            time.sleep(0.5)
            self._answer(200, b"{}")
        elif self.path == "/api/v1/empty":
            self._answer(204, b"", length=False)
        else:
            self._answer(200, b'{"path":"%s"}' % self.path.encode(), {"Content-Type": "application/json"})


@pytest.fixture
def server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    httpd.connections = set()
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def base(server) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}"


def test_the_default_sync_transport_is_the_lean_one_and_keeps_its_connection(server):
    http = HTTPClient(base(server), "ma_key")
    assert isinstance(http._client._transport, wire.PlainHTTPTransport)
    for i in range(5):
        answer = http.send(Call("POST", f"/threads/t-{i}/checkpoints", params={"q": "a b"}, content=b'{"x":1}'))
        assert answer.status_code == 201 and answer.json() == {"path": f"/api/v1/threads/t-{i}/checkpoints?q=a+b", "got": 7}
    assert len(server.connections) == 1  # one kept-alive connection for every request
    http.close()


def test_a_chunked_answer_an_answer_to_the_end_and_a_204_are_read_whole(server):
    http = HTTPClient(base(server))
    assert http.send(Call("GET", "/chunked")).json() == {"a": "chunked"}
    assert http.send(Call("GET", "/until-close")).json() == {"a": "to the end"}
    assert http.send(Call("GET", "/empty")).content == b""
    assert http.send(Call("GET", "/after")).json() == {"path": "/api/v1/after"}
    http.close()


def test_a_connection_the_server_closed_is_not_reused(server):
    http = HTTPClient(base(server))
    assert http.send(Call("GET", "/then-close")).json() == {"a": "closed after"}
    time.sleep(0.05)  # the server's close arrives: the idle socket turns readable
    assert http.send(Call("GET", "/next")).json() == {"path": "/api/v1/next"}
    assert len(server.connections) == 2
    http.close()


def test_a_reused_connection_closed_as_it_was_taken_is_tried_once_more_on_a_new_one(server, monkeypatch):
    """The close racing the reuse: the idle check passes, then the server's end is found."""
    http = HTTPClient(base(server), retry=RetryPolicy(retries=0))
    assert http.send(Call("GET", "/then-close")).status_code == 200
    time.sleep(0.05)
    monkeypatch.setattr(wire, "_readable", lambda sock: False)  # the check ran before the close arrived
    assert http.send(Call("GET", "/again")).json() == {"path": "/api/v1/again"}
    http.close()


def test_a_read_timeout_is_httpx_read_timeout(server):
    http = HTTPClient(base(server), timeout=0.1, retry=RetryPolicy(retries=0))
    with pytest.raises(httpx.ReadTimeout):
        http.send(Call("GET", "/slow"))
    assert http.send(Call("GET", "/fine")).status_code == 200  # the timed-out connection was dropped
    http.close()


def test_a_refused_connection_is_httpx_connect_error_after_the_retries():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    http = HTTPClient(f"http://127.0.0.1:{port}", retry=RetryPolicy(retries=2, base=0.001, cap=0.002))
    with pytest.raises(httpx.ConnectError):
        http.send(Call("GET", "/threads"))


def test_https_goes_to_httpx_own_transport():
    seen = []

    def answer(request):
        seen.append(request.url)
        return httpx.Response(200, json={"ok": True})

    transport = wire.PlainHTTPTransport(fallback=httpx.MockTransport(answer))
    with httpx.Client(transport=transport) as client:
        assert client.get("https://memoryadmin.test/api/v1/x").json() == {"ok": True}
    assert [str(url) for url in seen] == ["https://memoryadmin.test/api/v1/x"]


def test_a_malformed_answer_is_a_protocol_error():
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
        with pytest.raises(httpx.RemoteProtocolError):
            http.send(Call("GET", "/threads"))
