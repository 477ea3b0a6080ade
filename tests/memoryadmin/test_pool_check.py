"""The pool's check of a connection before it is lent (memoryadmin/postgres/base.py): no round trip
for an open, idle connection; a connection the server ended is found out and replaced."""

from __future__ import annotations

import time

import httpx
import psycopg
import pytest
from django.conf import settings
from django.db import connection

from memoryadmin.apikeys import apikey_create
from memoryadmin.postgres.base import quick_check

from ..conftest import IS_POSTGRES
from ..reliability.test_stream_capacity import _database_env
from ..reliability.servers import Gunicorn

pytestmark = pytest.mark.skipif(not IS_POSTGRES, reason="the pool is PostgreSQL's")


def _connect() -> psycopg.Connection:
    params = {k: v for k, v in settings.DATABASE_LISTEN.items() if v and k != "dbname"}
    return psycopg.connect(**params, dbname=connection.settings_dict["NAME"], autocommit=True)


@pytest.mark.django_db
def test_an_open_idle_connection_is_lent_without_asking_the_server():
    with _connect() as conn:
        executed = []
        execute = conn.execute
        # psycopg's own check runs an empty query through execute(): none may run here.
        conn.execute = lambda *args, **kwargs: executed.append(args) or execute(*args, **kwargs)
        for _ in range(100):
            quick_check(conn)
        assert executed == []
        assert conn.execute("SELECT 1").fetchone() == (1,)


@pytest.mark.django_db
def test_a_connection_the_server_ended_fails_the_check():
    with _connect() as victim, _connect() as killer:
        pid = victim.info.backend_pid
        killer.execute("SELECT pg_terminate_backend(%s)", [pid])
        deadline = time.monotonic() + 5
        while killer.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", [pid]).fetchone()[0]:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        with pytest.raises(psycopg.OperationalError):
            quick_check(victim)


@pytest.mark.django_db(transaction=True)
def test_the_server_replaces_the_pooled_connections_postgresql_ended(alice):
    """Every pooled connection of the production server ended by PostgreSQL (as a restart does):
    the next requests are answered, each on a new connection, not failed."""
    database = _database_env()
    server = Gunicorn(database["DATABASE_URL"], workers=1, DATABASE_LISTEN_URL=database["DATABASE_LISTEN_URL"],
                      DJANGO_DB_POOL_MIN_SIZE="2")
    server.start()
    key = apikey_create(owner=alice).plaintext
    headers = {"Authorization": f"Bearer {key}"}
    try:
        for _ in range(5):
            assert httpx.get(f"{server.url}/api/v1/threads", headers=headers, timeout=10).status_code == 200
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            (ours,) = cursor.fetchone()
        with _connect() as killer:
            # Every connection of the server (its pool's, its listener's), not this test's own.
            ended = killer.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid NOT IN (pg_backend_pid(), %s) AND backend_type = 'client backend'",
                [ours],
            ).fetchone()[0]
        assert ended >= 1
        time.sleep(0.5)
        answers = [httpx.get(f"{server.url}/api/v1/threads", headers=headers, timeout=10).status_code for _ in range(10)]
        assert answers == [200] * 10
    finally:
        server.stop()
