"""Live-turn streams cannot starve the production server (gunicorn from gunicorn.conf.py).

A real server with 2 worker processes x 2 threads: the limits computed from that
capacity allow 1 stream per process and 2 per server. With both open, `/healthz`
and the API answer within 2 s, one more stream gets 429; clients that leave free
their worker threads within a few seconds (default heartbeat); a killed worker's
streams stop counting when their leases expire. Runs on the test database (SQLite
or PostgreSQL), which the server shares: `transaction=True`.
"""

from __future__ import annotations

import os
import signal
import socket
import time
from contextlib import suppress

import httpx
import pytest
from django.conf import settings
from django.db import connection
from django.test import Client, override_settings

from memoryadmin.apikeys import apikey_create
from sessions_app.threads.services import thread_save_agent_state
from sessions_app.turns.models import TurnStreamLease

from .servers import Gunicorn, server_env

pytestmark = pytest.mark.django_db(transaction=True)
PER_SERVER = 2  # 2 workers x (2 threads // 2)


def _database_url() -> str:
    db = connection.settings_dict
    if db["ENGINE"] == "django.db.backends.sqlite3":
        return f"sqlite:///{db['NAME']}"
    auth = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


class Watcher:
    """A browser tab following a thread's live turn, on a raw connection: the test decides
    exactly how it goes away."""

    def __init__(self, server: Gunicorn, path: str, session: str):
        self.sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        self.sock.sendall(
            f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n"
            f"Cookie: {settings.SESSION_COOKIE_NAME}={session}\r\n\r\n".encode()
        )
        received = b""
        while b"\r\n\r\n" not in received:
            piece = self.sock.recv(65536)
            assert piece, "the server closed the connection before answering"
            received += piece
        head, _, body = received.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        self.status = int(lines[0].split()[1])
        self.headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
        if self.status != 200:
            length = int(self.headers.get("content-length", "0"))
            while len(body) < length:
                body += self.sock.recv(65536)
            self.sock.close()
        self.body = body.decode()

    def leave(self) -> None:
        """Go away as a browser tab does: everything sent so far read, then a clean close
        (a FIN, not a reset: the slowest departure for the server to notice)."""
        self.sock.setblocking(False)
        with suppress(BlockingIOError):
            while self.sock.recv(65536):
                pass
        self.sock.close()


@pytest.fixture
def watched(alice):
    thread_save_agent_state(actor=alice, thread_id="watched", agent_code="bot", context=[{"role": "user", "content": "hi"}])
    client = Client()
    # The session must be valid for the server, which signs with its own key.
    with override_settings(SECRET_KEY=server_env("")["DJANGO_SECRET_KEY"]):
        client.force_login(alice)
    return "/threads/watched/turns/stream", client.cookies[settings.SESSION_COOKIE_NAME].value


def _server(tmp_path, **env: str) -> Gunicorn:
    server = Gunicorn(
        _database_url(), workers=2, threads=2, MEMORYADMIN_SERVER_NAME="capacity-test",
        GUNICORN_ACCESS_LOG=str(tmp_path / "access.log"), **env,
    )
    server.start()
    return server


@pytest.fixture
def server(tmp_path):
    server = _server(tmp_path)
    yield server
    server.stop()


def _fill(server: Gunicorn, path: str, session: str, deadline_s: float = 15) -> list[Watcher]:
    """Open streams until the server holds PER_SERVER of them. A stream landing on a worker
    process that holds its own share already is refused (429, Retry-After 1): try again,
    as the browser does."""
    open_, deadline = [], time.monotonic() + deadline_s
    while len(open_) < PER_SERVER and time.monotonic() < deadline:
        watcher = Watcher(server, path, session)
        if watcher.status == 200:
            open_.append(watcher)
        else:
            assert watcher.status == 429 and watcher.headers["retry-after"] == "1", watcher.body
            time.sleep(0.05)
    assert len(open_) == PER_SERVER, f"only {len(open_)} streams opened"
    return open_


def _leases():
    return list(TurnStreamLease.objects.filter(server="capacity-test"))


def _assert_full(server: Gunicorn, path: str, session: str) -> None:
    # Whichever worker process answers, the server's count is the database's.
    for _ in range(6):
        extra = Watcher(server, path, session)
        assert extra.status == 429, "a stream past the server's limit was accepted"
        assert int(extra.headers["retry-after"]) >= 1
        assert f"This server has {PER_SERVER} live stream" in extra.body


def test_with_the_most_streams_open_the_server_answers_and_one_more_gets_429(server, watched, alice):
    path, session = watched
    watchers = _fill(server, path, session)
    leases = _leases()
    assert len(leases) == PER_SERVER and len({lease.pid for lease in leases}) == PER_SERVER
    key = apikey_create(owner=alice).plaintext
    # Fresh connections each time, so that every worker process gets some of them.
    for _ in range(8):
        for url, headers in ((f"{server.url}/healthz", {}), (f"{server.url}/api/v1/threads", {"Authorization": f"Bearer {key}"})):
            started = time.monotonic()
            response = httpx.get(url, headers=headers, timeout=2)
            assert response.status_code == 200 and time.monotonic() - started < 2
    _assert_full(server, path, session)
    for watcher in watchers:
        watcher.leave()


def _finished_streams(log_path) -> int:
    with suppress(FileNotFoundError):
        return sum(1 for line in log_path.read_text().splitlines() if "/turns/stream HTTP/1.1\" 200" in line)
    return 0


def test_clients_that_leave_free_their_worker_threads_within_seconds(server, watched, tmp_path):
    path, session = watched
    watchers = _fill(server, path, session)
    _assert_full(server, path, session)
    for watcher in watchers:
        watcher.leave()
    left = time.monotonic()
    # gunicorn writes a request's access-log line when its worker thread is done with it.
    log_path = tmp_path / "access.log"
    while _finished_streams(log_path) < PER_SERVER and time.monotonic() - left < 10:
        time.sleep(0.1)
    assert _finished_streams(log_path) == PER_SERVER and time.monotonic() - left <= 5
    assert _leases() == []
    again = _fill(server, path, session, deadline_s=5 - (time.monotonic() - left))
    assert time.monotonic() - left <= 5
    for watcher in again:
        watcher.leave()


def test_a_killed_workers_streams_stop_counting_when_their_leases_expire(watched, tmp_path):
    path, session = watched
    server = _server(tmp_path, MEMORYADMIN_TURN_SSE_LEASE_SECONDS="5")
    try:
        watchers = _fill(server, path, session)
        victim = _leases()[0]
        os.kill(victim.pid, signal.SIGKILL)
        killed = time.monotonic()
        # Its lease outlives it (nothing released it): the server still counts it.
        _assert_full(server, path, session)
        reopened = None
        while reopened is None and time.monotonic() - killed < 10:
            watcher = Watcher(server, path, session)
            reopened = watcher if watcher.status == 200 else None
            time.sleep(0.2)
        assert reopened is not None and time.monotonic() - killed <= 5 + 3
        assert victim.pk not in {lease.pk for lease in _leases()}
        for watcher in [*watchers, reopened]:
            with suppress(OSError):
                watcher.leave()
    finally:
        server.stop()
