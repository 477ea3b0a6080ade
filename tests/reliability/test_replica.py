"""Dashboard reads from a real streaming replica; the API and writes stay on the primary.

A private primary cluster, a second cluster streaming from it (pg_basebackup -R), and
a server configured with DATABASE_REPLICA_URL. Pausing the replica's WAL replay makes
the two databases differ, so each answer shows which one it came from.
"""

from __future__ import annotations

import time

import httpx
import psycopg
import pytest

from memoryadmin.replica import PIN_COOKIE

from .servers import PrivateCluster, Server, manage, postgres_bindir

pytestmark = [
    pytest.mark.skipif(postgres_bindir() is None, reason="PostgreSQL server binaries are not installed"),
]


def scalar(url: str, sql: str):
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(sql).fetchone()[0]


def wait_for(condition, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture(scope="module")
def primary():
    cluster = PrivateCluster()
    cluster.start()
    manage(cluster.url, "migrate", "--noinput")
    manage(cluster.url, "demo_data")
    yield cluster
    cluster.destroy()


@pytest.fixture(scope="module")
def standby(primary):
    cluster = PrivateCluster(standby_of=primary)
    cluster.start()
    yield cluster
    cluster.destroy()


@pytest.fixture(scope="module")
def server(primary, standby, tmp_path_factory):
    # Pages render with the production static files storage: collect them first.
    static = {"DJANGO_STATIC_ROOT": str(tmp_path_factory.mktemp("static"))}
    manage(primary.url, "collectstatic", "--noinput", **static)
    server = Server(primary.url, DATABASE_REPLICA_URL=standby.url, MEMORYADMIN_REPLICA_RETRY_SECONDS="1", **static)
    server.start()
    yield server
    server.kill()


@pytest.fixture(scope="module")
def alice_key(primary):
    return manage(primary.url, "apikey", "create", "--user", "alice").strip().splitlines()[-1]


def caught_up(primary, standby) -> bool:
    sql = "SELECT count(*) FROM sessions_app_thread"
    return scalar(standby.url, sql) == scalar(primary.url, sql)


def signed_in(server: Server, username: str) -> httpx.Client:
    client = httpx.Client(base_url=server.url, timeout=10)
    client.get("/accounts/login/")
    response = client.post(
        "/accounts/login/",
        data={"username": username, "password": "memoryadmin", "csrfmiddlewaretoken": client.cookies["csrftoken"]},
    )
    assert response.status_code == 302, response.text[:300]
    return client


def test_the_standby_streams_from_the_primary(primary, standby):
    assert scalar(standby.url, "SELECT pg_is_in_recovery()") is True
    wait_for(lambda: caught_up(primary, standby), "the standby to replay the demo data")
    assert scalar(standby.url, "SELECT count(*) FROM sessions_app_thread") > 0


def test_pages_read_the_replica_the_api_reads_the_primary_and_a_writer_reads_its_write(primary, standby, server, alice_key):
    wait_for(lambda: caught_up(primary, standby), "the standby to catch up")
    scalar(standby.url, "SELECT pg_wal_replay_pause()")
    try:
        api = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {alice_key}"}, timeout=10)
        saved = api.put(
            "/api/v1/threads/after-the-pause/agent-state",
            json={"agent_code": "probe", "context": [{"role": "user", "content": "written while the replica waits"}]},
        )
        assert saved.status_code == 200, saved.text
        # The API reads the primary: the agent sees its own write at once.
        assert api.get("/api/v1/threads/after-the-pause/agent-state").status_code == 200

        admin = signed_in(server, "admin")
        admin.cookies.delete(PIN_COOKIE)  # signing in is a write; this browser is pinned for a moment
        listing = admin.get("/threads/")
        assert listing.status_code == 200
        assert "kyoto-trip" in listing.text and "after-the-pause" not in listing.text
        assert admin.get("/threads/after-the-pause/").status_code == 404

        # A write through the dashboard pins this browser to the primary: the next page shows it.
        cleared = admin.post("/threads/kyoto-trip/clear", data={"csrfmiddlewaretoken": admin.cookies["csrftoken"]})
        assert cleared.status_code == 302 and PIN_COOKIE in cleared.cookies
        assert "after-the-pause" in admin.get("/threads/").text
        assert admin.get("/threads/after-the-pause/").status_code == 200
    finally:
        scalar(standby.url, "SELECT pg_wal_replay_resume()")

    wait_for(lambda: caught_up(primary, standby), "the standby to replay the new thread")
    admin.cookies.delete(PIN_COOKIE)
    assert "after-the-pause" in admin.get("/threads/").text


def test_a_replica_that_does_not_answer_is_skipped(primary, standby, server, alice_key):
    admin = signed_in(server, "operator")
    admin.cookies.delete(PIN_COOKIE)
    standby.stop()
    try:
        api = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {alice_key}"}, timeout=10)
        context = [{"role": "user", "content": "written while the replica is down"}]
        assert api.put("/api/v1/threads/replica-down/agent-state", json={"agent_code": "probe", "context": context}).status_code == 200
        listing = admin.get("/threads/")
        assert listing.status_code == 200 and "replica-down" in listing.text
    finally:
        standby.start()
    # Once it answers again (after the retry delay) pages read it again.
    wait_for(lambda: caught_up(primary, standby), "the restarted standby to catch up")
    time.sleep(1.1)
    assert admin.get("/threads/").status_code == 200
