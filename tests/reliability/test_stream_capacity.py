"""Live-turn streams on the production server (gunicorn.conf.py: gunicorn with uvicorn's ASGI workers).

A real server with 2 worker processes on the test database. 50 open streams hold
no request capacity: `/healthz` and the API answer within 1 s; a chunk another
process commits reaches every open stream within 1 s (PostgreSQL's NOTIFY, no polling
interval to wait out); a client that closes its connection frees its place within
5 s; past the server's limit a stream gets 429; a killed worker's streams stop
counting when their leases expire. On PostgreSQL, the production database (directly
or through PgBouncer, the listener then on DATABASE_LISTEN_URL), which the server
shares: `transaction=True`. SQLite's polling streams are tests/turns/test_live.py's.
"""

from __future__ import annotations

import os
import select
import signal
import socket
import time
from contextlib import suppress
from datetime import timedelta

import httpx
import psycopg
import pytest
from django.conf import settings
from django.db import connection
from django.test import Client, override_settings
from django.utils import timezone

from memoryadmin.apikeys import apikey_create
from sessions_app.threads.services import thread_save_agent_state
from sessions_app.turns import services as turns
from sessions_app.turns.models import TurnStreamLease

from ..conftest import IS_POSTGRES
from .servers import Gunicorn, server_env

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not IS_POSTGRES, reason="the production server's database: PostgreSQL, which notifies"),
]
STREAMS = 50
SERVER_NAME = "capacity-test"


def _url(*, host: str, port, user: str, password: str, name: str) -> str:
    auth = user + (f":{password}" if password else "")
    return f"postgres://{auth}@{host or '127.0.0.1'}:{port or 5432}/{name}"


def _database_env() -> dict[str, str]:
    """DATABASE_URL (and DATABASE_LISTEN_URL) of the test database, as the server must reach it."""
    db = connection.settings_dict
    env = {"DATABASE_URL": _url(host=db["HOST"], port=db["PORT"], user=db["USER"], password=db.get("PASSWORD"), name=db["NAME"])}
    listen = settings.DATABASE_LISTEN
    env["DATABASE_LISTEN_URL"] = _url(
        host=listen["host"], port=listen["port"], user=listen["user"], password=listen["password"], name=db["NAME"]
    )
    return env


class Watcher:
    """A browser tab following a thread's live turn, on a raw connection: the test decides
    exactly how it goes away and sees every byte as it comes."""

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
        self.body = body
        if self.status != 200:
            while len(self.body) < int(self.headers.get("content-length", "0")):
                piece = self.sock.recv(65536)
                if not piece:
                    break
                self.body += piece
            self.sock.close()
        else:
            self.sock.setblocking(False)

    def read(self) -> None:
        with suppress(BlockingIOError):
            while piece := self.sock.recv(65536):
                self.body += piece

    def leave(self) -> None:
        """Go away as a browser tab does: a clean close (a FIN, not a reset)."""
        self.read()
        self.sock.close()


def _read_until(watchers: list[Watcher], done, timeout: float) -> float:
    """Read every watcher until done(watcher) holds for all of them; the seconds it took."""
    start = time.monotonic()
    waiting = [w for w in watchers if not done(w)]
    while waiting and time.monotonic() - start < timeout:
        ready, _, _ = select.select([w.sock for w in waiting], [], [], 0.05)
        for watcher in waiting:
            if watcher.sock in ready:
                watcher.read()
        waiting = [w for w in waiting if not done(w)]
    assert not waiting, f"{len(waiting)} of {len(watchers)} streams did not get there in {timeout} s"
    return time.monotonic() - start


@pytest.fixture
def watched(alice):
    thread_save_agent_state(actor=alice, thread_id="watched", agent_code="bot", context=[{"role": "user", "content": "hi"}])
    client = Client()
    # The session must be valid for the server, which signs with its own key.
    with override_settings(SECRET_KEY=server_env("")["DJANGO_SECRET_KEY"]):
        client.force_login(alice)
    return "/threads/watched/turns/stream", client.cookies[settings.SESSION_COOKIE_NAME].value


def _server(**env: str) -> Gunicorn:
    database = _database_env()
    env = {
        "MEMORYADMIN_SERVER_NAME": SERVER_NAME,
        "MEMORYADMIN_TURN_STREAMS_PER_USER": str(STREAMS + 10),
        "MEMORYADMIN_TURN_STREAMS_PER_SERVER": str(STREAMS),
        **{k: v for k, v in database.items() if k != "DATABASE_URL"},
        **env,
    }
    server = Gunicorn(database["DATABASE_URL"], workers=2, **env)
    server.start()
    return server


@pytest.fixture
def server():
    server = _server()
    yield server
    server.stop()


def _open(server: Gunicorn, path: str, session: str, count: int) -> list[Watcher]:
    watchers = [Watcher(server, path, session) for _ in range(count)]
    assert [w.status for w in watchers] == [200] * count, [w.body for w in watchers if w.status != 200][:1]
    return watchers


def _leases() -> list[TurnStreamLease]:
    return list(TurnStreamLease.objects.filter(server=SERVER_NAME))


def test_with_50_streams_open_the_server_answers_within_a_second(server, watched, alice):
    path, session = watched
    watchers = _open(server, path, session, STREAMS)
    assert len(_leases()) == STREAMS
    key = apikey_create(owner=alice).plaintext
    # Fresh connections each time, so that both worker processes get some of them.
    for _ in range(5):
        for url, headers in ((f"{server.url}/healthz", {}), (f"{server.url}/api/v1/threads", {"Authorization": f"Bearer {key}"})):
            started = time.monotonic()
            response = httpx.get(url, headers=headers, timeout=5)
            assert response.status_code == 200 and time.monotonic() - started < 1, (url, time.monotonic() - started)
    # One more is past the server's limit, whichever worker process answers.
    refused = Watcher(server, path, session)
    assert refused.status == 429 and int(refused.headers["retry-after"]) >= 1
    assert f"This server has {STREAMS} live stream" in refused.body.decode()
    for watcher in watchers:
        watcher.leave()


def test_a_chunk_committed_by_another_process_reaches_every_open_stream_within_a_second(server, watched, alice):
    path, session = watched
    turns.turn_begin(actor=alice, thread_id="watched", question="q")
    watchers = _open(server, path, session, STREAMS)
    _read_until(watchers, lambda w: b"retry: 2000" in w.body, timeout=5)
    # This test process is not the server: the chunk reaches the streams through the database.
    turns.turn_append_chunk(actor=alice, thread_id="watched", text="hello from elsewhere")
    took = _read_until(watchers, lambda w: b"data: hello from elsewhere" in w.body, timeout=1)
    assert took < 1
    turns.turn_finish(actor=alice, thread_id="watched")
    _read_until(watchers, lambda w: b"event: finished" in w.body, timeout=1)
    for watcher in watchers:
        watcher.leave()


def test_a_client_that_leaves_frees_its_place_within_five_seconds(server, watched):
    path, session = watched
    watchers = _open(server, path, session, STREAMS)
    assert Watcher(server, path, session).status == 429
    leaving, staying = watchers[:10], watchers[10:]
    for watcher in leaving:
        watcher.leave()
    left = time.monotonic()
    while len(_leases()) > len(staying) and time.monotonic() - left < 10:
        time.sleep(0.05)
    assert len(_leases()) == len(staying) and time.monotonic() - left < 5
    again = _open(server, path, session, len(leaving))
    assert time.monotonic() - left < 5
    for watcher in [*staying, *again]:
        watcher.leave()


def test_a_killed_workers_streams_stop_counting_when_their_leases_expire(watched):
    path, session = watched
    server = _server(
        MEMORYADMIN_TURN_SSE_LEASE_SECONDS="5", MEMORYADMIN_TURN_SSE_HEARTBEAT_SECONDS="1",
        MEMORYADMIN_TURN_STREAMS_PER_SERVER="4",
    )
    try:
        watchers = _open(server, path, session, 4)
        victim = _leases()[0].pid
        os.kill(victim, signal.SIGKILL)
        killed = time.monotonic()
        dead = {lease.pk for lease in _leases() if lease.pid == victim}
        # Its leases outlive it (nothing released them): the server still counts them.
        assert Watcher(server, path, session).status == 429
        reopened = []
        while len(reopened) < len(dead) and time.monotonic() - killed < 20:
            watcher = Watcher(server, path, session)
            if watcher.status == 200:
                reopened.append(watcher)
            else:
                time.sleep(0.2)
        # The lease time (5 s) and room for a loaded machine; before it, the places stay taken.
        assert len(reopened) == len(dead) and 5 - 2 <= time.monotonic() - killed <= 5 + 8
        assert not dead & {lease.pk for lease in _leases()}
        for watcher in [*watchers, *reopened]:
            with suppress(OSError):
                watcher.leave()
    finally:
        server.stop()


def _threads(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


def _settled_threads(pid: int) -> int:
    """The worker's thread count once it stops changing: a finished request's thread exits
    on its own a moment after its response."""
    count, deadline = _threads(pid), time.monotonic() + 20
    while time.monotonic() < deadline:
        time.sleep(0.5)
        again = _threads(pid)
        if again == count:
            return count
        count = again
    return count


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="threads counted in /proc")
def test_open_streams_hold_no_thread_of_their_worker(watched, alice):
    """Each stream's request ran its sync middleware on a thread of its own; once the
    stream's response has started that thread is let go (memoryadmin/requestthread.py),
    and the streams' reads share a fixed few threads: 40 streams, no more threads than 5 and that few."""
    path, session = watched
    server = _server(GUNICORN_WORKERS="1", MEMORYADMIN_TURN_SSE_HEARTBEAT_SECONDS="1")
    try:
        turns.turn_begin(actor=alice, thread_id="watched", question="q")
        first = _open(server, path, session, 5)
        _read_until(first, lambda w: b"retry: 2000" in w.body, timeout=5)
        (pid,) = {lease.pid for lease in _leases()}
        # Every kind of thread the worker keeps (the streams' reads, the database pool's) started.
        turns.turn_append_chunk(actor=alice, thread_id="watched", text="warm")
        _read_until(first, lambda w: b"data: warm" in w.body, timeout=5)
        _read_until(first, lambda w: w.body.count(b": heartbeat") >= 2, timeout=10)
        before = _settled_threads(pid)
        more = _open(server, path, session, 35)
        _read_until(more, lambda w: b"retry: 2000" in w.body, timeout=10)
        turns.turn_append_chunk(actor=alice, thread_id="watched", text="again")
        watchers = [*first, *more]
        _read_until(watchers, lambda w: b"data: again" in w.body, timeout=10)
        _read_until(watchers, lambda w: w.body.count(b": heartbeat") >= 3, timeout=10)
        assert len(_leases()) == 40
        # 35 streams more, not 35 threads more: at most the fixed few a worker starts when first
        # needed (the second of the streams' shared threads, a pool's helper), seen through PgBouncer.
        assert _settled_threads(pid) <= before + 2
        for watcher in watchers:
            watcher.leave()
    finally:
        server.stop()


def test_leases_are_renewed_while_every_read_and_request_of_the_worker_waits(watched, alice):
    """The sync load of a worker stuck (its streams' reads and its API requests wait on a
    lock, every pooled connection taken): the streams' leases are still renewed, on the
    listener's own connection, so none expires and every stream goes on afterwards."""
    from concurrent.futures import ThreadPoolExecutor

    from sessions_app.threads.models import Thread
    from sessions_app.threads.notify import thread_channel
    from sessions_app.turns.models import Turn

    path, session = watched
    server = _server(
        GUNICORN_WORKERS="1", MEMORYADMIN_TURN_SSE_HEARTBEAT_SECONDS="1", MEMORYADMIN_TURN_SSE_LEASE_SECONDS="3",
        DJANGO_DB_POOL_MAX_SIZE="4", DJANGO_DB_POOL_TIMEOUT="30",
    )
    key = apikey_create(owner=alice).plaintext
    params = {k: v for k, v in settings.DATABASE_LISTEN.items() if v and k != "dbname"}
    locker = psycopg.connect(**params, dbname=connection.settings_dict["NAME"])
    waker = psycopg.connect(**params, dbname=connection.settings_dict["NAME"], autocommit=True)
    requests = ThreadPoolExecutor(max_workers=8)
    try:
        turns.turn_begin(actor=alice, thread_id="watched", question="q")
        watchers = _open(server, path, session, 4)
        _read_until(watchers, lambda w: b"retry: 2000" in w.body, timeout=5)
        pk = Thread.objects.get(thread_id="watched").pk
        locker.execute(f"LOCK TABLE {Turn._meta.db_table} IN ACCESS EXCLUSIVE MODE")
        locked_at = timezone.now()
        # Every stream wakes and reads the turn: its reads wait on the lock...
        waker.execute("SELECT pg_notify(%s, '')", [thread_channel(pk)])
        # ...and so do API requests, which take the worker's threads and pooled connections.
        url = f"{server.url}/api/v1/threads/watched/turns"
        waiting = [
            requests.submit(httpx.get, url, headers={"Authorization": f"Bearer {key}"}, timeout=60) for _ in range(8)
        ]
        # Renewed past the lease's 3 s while all of that waits.
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if all(lease.renewed_at > locked_at + timedelta(seconds=4) for lease in _leases()):
                break
            time.sleep(0.2)
        assert len(_leases()) == 4
        assert all(lease.renewed_at > locked_at + timedelta(seconds=4) for lease in _leases())
        assert not any(request.done() for request in waiting)
        locker.rollback()
        assert [request.result().status_code for request in waiting] == [200] * 8
        turns.turn_append_chunk(actor=alice, thread_id="watched", text="after the wait")
        _read_until(watchers, lambda w: b"data: after the wait" in w.body, timeout=10)
        assert not any(b"event: timeout" in w.body for w in watchers)
        for watcher in watchers:
            watcher.leave()
    finally:
        locker.close()
        waker.close()
        requests.shutdown(wait=False, cancel_futures=True)
        server.stop()


def _exited(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # A worker that exited stays a zombie until gunicorn reaps it.
    with suppress(OSError):
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] == "Z"
    return False


def test_a_worker_recycled_after_max_requests_ends_its_streams_and_exits_at_once(watched, alice):
    """A worker that stops (here: after max_requests, as gunicorn.conf.py recycles them; a deploy's
    SIGTERM goes the same way) does not wait on its open streams until gunicorn kills it
    (`timeout`, 30 s): each stream gets `event: timeout` at once (the page opens a new one), their
    leases are released, the worker exits and its successor serves new streams."""
    path, session = watched
    server = _server(
        GUNICORN_WORKERS="1", GUNICORN_MAX_REQUESTS="30", GUNICORN_MAX_REQUESTS_JITTER="0",
        GUNICORN_GRACEFUL_TIMEOUT="30", GUNICORN_TIMEOUT="30",
    )
    try:
        turns.turn_begin(actor=alice, thread_id="watched", question="q")
        watchers = _open(server, path, session, 5)
        _read_until(watchers, lambda w: b"retry: 2000" in w.body, timeout=5)
        (pid,) = {lease.pid for lease in _leases()}
        # Past max_requests, each request on a fresh connection.
        for _ in range(30):
            with suppress(httpx.HTTPError):
                httpx.get(f"{server.url}/healthz", timeout=5)
            if any(b"event: timeout" in w.body for w in watchers):
                break
        took = _read_until(watchers, lambda w: b"event: timeout" in w.body, timeout=10)
        assert took < 10
        stopped = time.monotonic()
        while (_leases() or not _exited(pid)) and time.monotonic() - stopped < 10:
            time.sleep(0.1)
        assert not _leases() and _exited(pid)
        for watcher in watchers:
            watcher.leave()
        # Its successor serves streams (gunicorn starts it as the old one exits).
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with suppress(httpx.HTTPError, OSError, AssertionError):
                (again,) = _open(server, path, session, 1)
                break
            time.sleep(0.2)
        assert {lease.pid for lease in _leases()} - {pid}
        again.leave()
        assert "WORKER TIMEOUT" not in server.log.read_text()
    finally:
        server.stop()


def test_a_server_stopped_with_streams_open_exits_within_seconds(watched, alice):
    """SIGTERM (a deploy) with streams open: the streams end and the server exits well within
    its graceful timeout, instead of after it."""
    path, session = watched
    server = _server(GUNICORN_GRACEFUL_TIMEOUT="30")
    try:
        turns.turn_begin(actor=alice, thread_id="watched", question="q")
        watchers = _open(server, path, session, 10)
        _read_until(watchers, lambda w: b"retry: 2000" in w.body, timeout=5)
        server.proc.terminate()
        stopped = time.monotonic()
        _read_until(watchers, lambda w: b"event: timeout" in w.body, timeout=10)
        server.proc.wait(timeout=20)
        assert time.monotonic() - stopped < 10
        assert not _leases()
        for watcher in watchers:
            with suppress(OSError):
                watcher.leave()
    finally:
        server.stop()
