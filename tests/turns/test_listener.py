"""The streams' listener: PostgreSQL LISTEN/NOTIFY, one connection per process (sessions_app/turns/listener.py).

On PostgreSQL, directly or through PgBouncer in transaction mode: the listener then
connects where DATABASE_LISTEN_URL says (LISTEN needs a session of its own), while
the writes that notify go through the pooler.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connection, transaction

from sessions_app.threads.models import Thread
from sessions_app.threads.services import thread_save_agent_state
from sessions_app.turns import listener
from sessions_app.turns import services as turns

from ..conftest import IS_POSTGRES
from .test_live import run

ROOT = Path(__file__).resolve().parents[2]
postgres_only = pytest.mark.skipif(not IS_POSTGRES, reason="LISTEN/NOTIFY: PostgreSQL")


def _listen_settings(**env: str) -> dict:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_", "PYTEST", "DJANGO_DB_"))}
    code = "import django, json; django.setup(); from django.conf import settings as s; print(json.dumps(s.DATABASE_LISTEN))"
    done = subprocess.run(
        [sys.executable, "-c", code], check=True, cwd=ROOT, capture_output=True, text=True, timeout=60,
        env={**base, "DJANGO_SETTINGS_MODULE": "memoryadmin.settings", "DJANGO_DEBUG": "1", **env},
    )
    return json.loads(done.stdout)


def test_the_listener_reaches_postgresql_where_database_listen_url_says():
    pooled = "postgres://app:secret@127.0.0.1:6432/memoryadmin"
    # Behind a pooler: the listener goes to PostgreSQL itself, the same database.
    direct = _listen_settings(DATABASE_URL=pooled, DATABASE_LISTEN_URL="postgres://listener@db.internal:5432/memoryadmin")
    assert direct == {"host": "db.internal", "port": "5432", "user": "listener", "password": "", "dbname": None}
    # A pooler's alias resolved: another database name is used as given.
    assert _listen_settings(DATABASE_URL=pooled, DATABASE_LISTEN_URL="postgres://u@db:5432/ma_prod")["dbname"] == "ma_prod"
    # By default, where DATABASE_URL points.
    assert _listen_settings(DATABASE_URL=pooled) == {
        "host": "127.0.0.1", "port": "6432", "user": "app", "password": "secret", "dbname": None,
    }
    assert _listen_settings(DATABASE_URL="sqlite:///x.sqlite3") is None


@pytest.fixture
def thread_pk(alice) -> int:
    thread_save_agent_state(actor=alice, thread_id="heard", agent_code="bot", context=[{"role": "user", "content": "hi"}])
    return Thread.objects.get(thread_id="heard").pk


def _notify(thread_pk: int, *, commit: bool) -> None:
    with transaction.atomic():
        listener.turn_changed(thread_pk)
        if not commit:
            transaction.set_rollback(True)


def _direct():
    """A connection of our own to PostgreSQL itself, the test database (to look at its sessions)."""
    params = {k: v for k, v in settings.DATABASE_LISTEN.items() if v and k != "dbname"}
    return psycopg.connect(**params, dbname=connection.settings_dict["NAME"], autocommit=True)


def _listener_backends() -> list[int]:
    with _direct() as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = 'memoryadmin-listener' AND datname = %s",
            [connection.settings_dict["NAME"]],
        ).fetchall()
    return [pid for (pid,) in rows]


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_a_committed_write_wakes_its_threads_streams_and_a_rolled_back_one_does_not(alice, thread_pk):
    async def scenario():
        hub = listener.listener()
        watch = await hub.subscribe(listener.turn_channel(thread_pk))
        other = await hub.subscribe(listener.turn_channel(thread_pk + 1))
        assert watch.listening
        await watch.wait(0.5)  # the wake-up every (re)connection gives
        await other.wait(0)
        await sync_to_async(_notify)(thread_pk, commit=False)
        assert not await watch.wait(0.5)
        await sync_to_async(_notify)(thread_pk, commit=True)
        assert await watch.wait(1)
        assert not await other.wait(0.2)
        # Through the services: a chunk appended wakes the stream at its commit.
        await sync_to_async(turns.turn_begin)(actor=alice, thread_id="heard", question="q")
        assert await watch.wait(1)
        await sync_to_async(turns.turn_append_chunk)(actor=alice, thread_id="heard", text="x")
        assert await watch.wait(1)
        watch.close()
        other.close()

    run(scenario)


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_many_streams_share_one_listening_connection(thread_pk):
    async def scenario():
        hub = listener.listener()
        watches = [await hub.subscribe(listener.turn_channel(thread_pk + i % 5)) for i in range(40)]
        assert hub.streams == 40 and all(w.listening for w in watches)
        assert len(await sync_to_async(_listener_backends)()) == 1
        for watch in watches:
            await watch.wait(0)
        await sync_to_async(_notify)(thread_pk, commit=True)
        woken = await asyncio.gather(*(w.wait(1) for w in watches))
        assert sum(woken) == 8  # the 8 watches of that thread, not the 32 others
        for watch in watches:
            watch.close()

    run(scenario)


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_the_listener_reconnects_when_its_connection_is_lost(thread_pk):
    async def scenario():
        hub = listener.listener()
        watch = await hub.subscribe(listener.turn_channel(thread_pk))
        await watch.wait(0.5)
        (backend,) = await sync_to_async(_listener_backends)()

        def terminate():
            with _direct() as conn:
                conn.execute("SELECT pg_terminate_backend(%s)", [backend])

        await sync_to_async(terminate)()
        # Reconnected, it wakes every stream (what was committed meanwhile is read again)...
        assert await watch.wait(5)
        for _ in range(50):
            if watch.listening:
                break
            await asyncio.sleep(0.1)
        assert watch.listening and await sync_to_async(_listener_backends)() != [backend]
        # ...and notifications arrive again.
        await sync_to_async(_notify)(thread_pk, commit=True)
        assert await watch.wait(1)
        watch.close()

    run(scenario)
