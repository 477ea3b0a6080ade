"""Open live-turn streams: the limits per user, per server and per process, and their leases.

The leases of other worker processes or servers are rows like the ones those processes
write (`stream_open` there); a real gunicorn server is in tests/reliability/test_stream_capacity.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path

import asyncio
import functools

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connection, transaction
from django.test import override_settings
from django.utils import timezone

from sessions_app.threads.models import Thread
from sessions_app.threads.services import thread_save_agent_state
from sessions_app.turns import services as turns
from sessions_app.turns import streams
from sessions_app.turns.models import TurnStreamLease

from ..conftest import IS_POSTGRES, login_client, make_user
from .test_live import FAST, events, rest, run
from .test_live import open_stream as async_open_stream

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]
STREAM = "/threads/live/turns/stream"
ROOMY = {
    "MEMORYADMIN_TURN_STREAMS_PER_USER": 10,
    "MEMORYADMIN_TURN_STREAMS_PER_SERVER": 10,
    "MEMORYADMIN_TURN_STREAMS_PER_PROCESS": 10,
}


@pytest.fixture
def thread(alice):
    thread_save_agent_state(actor=alice, thread_id="live", agent_code="bot", context=[{"role": "user", "content": "hi"}])
    return "live"


def lease_of(user, *, server=None, pid=None, age: float = 0) -> TurnStreamLease:
    """The lease another worker process (or server) holds for an open stream."""
    renewed = timezone.now() - timedelta(seconds=age)
    return TurnStreamLease.objects.create(
        user=user, thread_id="live", server=server or settings.MEMORYADMIN_SERVER_NAME,
        pid=pid or os.getpid() + 1, opened_at=renewed, renewed_at=renewed,
    )


def open_stream(client, user):
    login_client(client, user)
    return client.get(STREAM)


# Committed rows: closing a response closes the database connection, as at the end of a request.
@pytest.mark.django_db(transaction=True)
@override_settings(**{**ROOMY, "MEMORYADMIN_TURN_STREAMS_PER_USER": 2, **FAST})
def test_a_user_past_the_per_user_limit_gets_429_and_others_do_not(client, alice, operator, thread):
    first, second = open_stream(client, alice), open_stream(client, alice)
    assert (first.status_code, second.status_code) == (200, 200)
    refused = open_stream(client, alice)
    assert refused.status_code == 429
    assert refused["Retry-After"] == str(int(settings.MEMORYADMIN_TURN_SSE_LEASE_SECONDS))
    assert "2 live stream(s) open, the most one user may have" in refused.content.decode()
    # The user's streams on other processes and servers count as well.
    TurnStreamLease.objects.filter(user=alice).delete()
    lease_of(alice, server="another-host")
    assert open_stream(client, alice).status_code == 200
    assert open_stream(client, alice).status_code == 429
    assert open_stream(client, operator).status_code == 200


@override_settings(**{**ROOMY, "MEMORYADMIN_TURN_STREAMS_PER_SERVER": 3})
def test_the_server_limit_counts_the_streams_of_every_worker_process(client, alice, bob, operator, thread):
    lease_of(bob, pid=os.getpid() + 1)
    lease_of(bob, pid=os.getpid() + 2)
    lease_of(bob, server="another-host")
    assert open_stream(client, alice).status_code == 200
    refused = open_stream(client, operator)
    assert refused.status_code == 429 and "This server has 3 live stream(s) open" in refused.content.decode()
    assert int(refused["Retry-After"]) >= 1


@override_settings(**{**ROOMY, "MEMORYADMIN_TURN_STREAMS_PER_PROCESS": 1})
def test_a_process_takes_at_most_its_share_of_the_streams(client, alice, operator, thread):
    # Another process's stream leaves this process its own share.
    lease_of(alice, pid=os.getpid() + 1)
    assert open_stream(client, alice).status_code == 200
    refused = open_stream(client, operator)
    assert refused.status_code == 429 and refused["Retry-After"] == "1"
    assert "This server process has 1 live stream(s) open" in refused.content.decode()


@override_settings(**{**ROOMY, "MEMORYADMIN_TURN_STREAMS_PER_PROCESS": 0})
def test_a_limit_of_zero_opens_no_stream(client, alice, thread):
    assert open_stream(client, alice).status_code == 429
    assert not TurnStreamLease.objects.exists()


@override_settings(**{**ROOMY, "MEMORYADMIN_TURN_STREAMS_PER_SERVER": 1})
def test_the_lease_of_a_killed_worker_stops_counting_when_it_expires(client, alice, bob, thread):
    fresh = lease_of(bob)
    assert open_stream(client, alice).status_code == 429
    fresh.delete()
    dead = lease_of(bob, age=settings.MEMORYADMIN_TURN_SSE_LEASE_SECONDS + 1)
    assert open_stream(client, alice).status_code == 200
    assert not TurnStreamLease.objects.filter(pk=dead.pk).exists()


def _count_leases() -> int:
    return TurnStreamLease.objects.count()


@pytest.mark.django_db(transaction=True)
@override_settings(**{**ROOMY, **FAST})
@pytest.mark.parametrize("ending", ["max time", "turn finished", "client gone", "closed before the first byte"])
def test_the_lease_goes_when_the_stream_ends(alice, thread, ending):
    if ending == "turn finished":
        turns.turn_begin(actor=alice, thread_id="live", question="q")
        turns.turn_append_chunk(actor=alice, thread_id="live", text="a")

    async def scenario():
        response = await async_open_stream(alice)
        assert response.status_code == 200 and await sync_to_async(_count_leases)() == 1
        stream = events(response)
        if ending == "max time":
            assert (await rest(stream))[-1] == "event: timeout\ndata: "
        elif ending == "turn finished":
            assert await anext(stream) == "retry: 2000" and (await anext(stream)).startswith("event: chunk")
            await sync_to_async(turns.turn_finish)(actor=alice, thread_id="live")
            assert (await rest(stream))[-1] == "event: finished\ndata: "
        elif ending == "client gone":
            # Django's ASGI handler cancels the response when the client disconnects.
            await anext(stream)
            # Read until a read waits (events already due come at once), then go away mid-read.
            while True:
                reading = asyncio.ensure_future(anext(stream))
                await asyncio.sleep(0.02)
                if not reading.done():
                    break
                try:
                    reading.result()
                except StopAsyncIteration:
                    reading = None  # the stream ended first: its lease must go all the same
                    break
            if reading is not None:
                reading.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await reading
        else:
            await sync_to_async(response.close)()

    # Only the first ending waits for the maximum time; the others must not meet it first.
    with override_settings(MEMORYADMIN_TURN_SSE_MAX_SECONDS=0.3 if ending == "max time" else 30):
        run(scenario)
    assert not TurnStreamLease.objects.exists()


@pytest.mark.django_db(transaction=True)
@override_settings(**{**ROOMY, **FAST, "MEMORYADMIN_TURN_SSE_MAX_SECONDS": 30})
def test_heartbeats_renew_the_lease_and_a_lost_lease_ends_the_stream(alice, thread):
    async def scenario():
        stream = events(await async_open_stream(alice))
        lease = await sync_to_async(TurnStreamLease.objects.get)(user=alice)
        assert await anext(stream) == "retry: 2000"
        assert await anext(stream) == ": heartbeat"
        assert await anext(stream) == ": heartbeat"
        await sync_to_async(lease.refresh_from_db)()
        assert lease.renewed_at > lease.opened_at
        # Expired and deleted by another open (the stream stalled): its place may be taken.
        await sync_to_async(lease.delete)()
        assert await rest(stream) == ["event: timeout\ndata: "]

    run(scenario)


@pytest.mark.skipif(not IS_POSTGRES, reason="makes PostgreSQL fail a query: renames a table in a transaction")
@pytest.mark.django_db(transaction=True)
@override_settings(**{**ROOMY, **FAST, "MEMORYADMIN_TURN_SSE_MAX_SECONDS": 30})
def test_a_stream_that_fails_on_a_database_error_releases_its_lease(alice, thread):
    from django.db import ProgrammingError

    turns.turn_begin(actor=alice, thread_id="live", question="q")

    async def scenario():
        stream = events(await async_open_stream(alice))
        assert await anext(stream) == "retry: 2000"

        def break_turns():
            with connection.cursor() as cursor:
                cursor.execute("ALTER TABLE sessions_app_turnchunk RENAME TO sessions_app_turnchunk_away")

        await sync_to_async(break_turns)()
        try:
            # The next read (woken by this chunk's notification, or the poll) fails.
            await sync_to_async(_notify_thread)(thread)
            with pytest.raises(ProgrammingError):
                await rest(stream)
        finally:
            def repair():
                with connection.cursor() as cursor:
                    cursor.execute("ALTER TABLE sessions_app_turnchunk_away RENAME TO sessions_app_turnchunk")

            await sync_to_async(repair)()

    run(scenario)
    assert not TurnStreamLease.objects.exists()


def _notify_thread(thread_id: str) -> None:
    from sessions_app.turns.listener import turn_changed

    with transaction.atomic():
        turn_changed(Thread.objects.get(thread_id=thread_id).pk)


@pytest.mark.django_db(transaction=True)
@override_settings(**{**ROOMY, "MEMORYADMIN_TURN_STREAMS_PER_SERVER": 1})
def test_concurrent_opens_cannot_both_take_the_last_place(thread):
    """Eight opens at once, each on its own connection as on eight worker threads: one lease."""
    viewers = [make_user(f"viewer{i}", "operator") for i in range(8)]
    live = Thread.objects.get(thread_id=thread)
    barrier = threading.Barrier(len(viewers))

    def attempt(viewer):
        barrier.wait()
        try:
            streams.stream_open(actor=viewer, thread=live)
            return "opened"
        except streams.StreamLimitReached as exc:
            return exc.scope
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=len(viewers)) as pool:
        outcomes = sorted(pool.map(attempt, viewers))
    assert outcomes == ["opened"] + ["server"] * (len(viewers) - 1)
    assert TurnStreamLease.objects.count() == 1


def _settings_in_a_process(**env: str) -> dict:
    """The stream settings as a fresh process computes them from this environment."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("GUNICORN_", "MEMORYADMIN_", "PYTEST"))}
    code = (
        "import django, json; django.setup(); from django.conf import settings as s; "
        "print(json.dumps({n: getattr(s, n) for n in dir(s) if n.startswith('MEMORYADMIN_TURN_S')}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], check=False, cwd=ROOT, capture_output=True, text=True, timeout=60,
        env={**base, "DJANGO_SETTINGS_MODULE": "memoryadmin.settings", "DJANGO_DEBUG": "1", **env},
    )
    if done.returncode:
        return {"error": done.stderr.strip().splitlines()[-1]}
    return json.loads(done.stdout)


def test_the_limits_follow_the_servers_worker_count():
    defaults = _settings_in_a_process()
    assert defaults["MEMORYADMIN_TURN_STREAMS_PER_USER"] == 3
    assert 2 <= defaults["MEMORYADMIN_TURN_SSE_HEARTBEAT_SECONDS"] <= 5
    # gunicorn.conf.py's own default: 2 x cores + 1 worker processes (tests/perf/test_serving.py).
    assert defaults["MEMORYADMIN_TURN_STREAMS_PER_PROCESS"] == 200
    assert defaults["MEMORYADMIN_TURN_STREAMS_PER_SERVER"] == 200 * (2 * os.cpu_count() + 1)
    sized = _settings_in_a_process(GUNICORN_WORKERS="3", MEMORYADMIN_TURN_STREAMS_PER_PROCESS="50")
    assert (sized["MEMORYADMIN_TURN_STREAMS_PER_PROCESS"], sized["MEMORYADMIN_TURN_STREAMS_PER_SERVER"]) == (50, 150)
    chosen = _settings_in_a_process(MEMORYADMIN_TURN_STREAMS_PER_SERVER="2", MEMORYADMIN_TURN_STREAMS_PER_USER="1")
    assert (chosen["MEMORYADMIN_TURN_STREAMS_PER_SERVER"], chosen["MEMORYADMIN_TURN_STREAMS_PER_USER"]) == (2, 1)


@pytest.mark.parametrize(
    "env",
    [
        {"MEMORYADMIN_TURN_SSE_HEARTBEAT_SECONDS": "5", "MEMORYADMIN_TURN_SSE_LEASE_SECONDS": "10"},
        {"MEMORYADMIN_TURN_STREAMS_PER_USER": "-1"},
        {"MEMORYADMIN_TURN_SSE_HEARTBEAT_SECONDS": "often"},
    ],
)
def test_stream_settings_that_cannot_work_are_refused_at_start(env):
    assert "ImproperlyConfigured" in _settings_in_a_process(**env).get("error", "")


@pytest.mark.django_db(transaction=True)
def test_the_streams_of_a_process_renew_their_leases_in_one_statement(alice, thread):
    from django.test.utils import CaptureQueriesContext

    from sessions_app.turns import live

    rows = [lease_of(alice, pid=os.getpid(), age=3) for _ in range(3)]

    async def scenario(max_age: float):
        kept = live.leases()
        kept.open.update(row.pk for row in rows)
        return await asyncio.gather(*(kept.renew(row.pk, max_age) for row in rows))

    with CaptureQueriesContext(connection) as queries:
        assert run(functools.partial(scenario, 60)) == [True, True, True]
    assert sum(q["sql"].startswith("UPDATE") for q in queries.captured_queries) == 1
    assert all(row.renewed_at < TurnStreamLease.objects.get(pk=row.pk).renewed_at for row in rows)
    # A lease deleted meanwhile (expired, its place taken): its stream is told to end.
    rows[1].delete()
    assert run(functools.partial(scenario, 0)) == [True, False, True]
