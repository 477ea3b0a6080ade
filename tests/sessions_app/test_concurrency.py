"""Concurrent saves to one thread (PostgreSQL: real row locks, real parallel transactions)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from django.db import connection

from memoryadmin.apikeys import apikey_create
from sessions_app.models import Block, Thread
from sessions_app.threads.selectors import thread_agent_state
from sessions_app.threads.services import thread_save_agent_state

from ..conftest import IS_POSTGRES
from .helpers import turns

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif(not IS_POSTGRES, reason="parallel transactions need PostgreSQL"),
    pytest.mark.django_db(transaction=True),
]
CLIENTS = 8


def run_together(jobs):
    """Start every job at the same instant, each in its own thread (and database connection)."""
    barrier = threading.Barrier(len(jobs))

    def start(job):
        barrier.wait()
        try:
            return job()
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        return [future.result() for future in [pool.submit(start, job) for job in jobs]]


def assert_consistent(thread_id: str):
    seqs = list(Block.objects.filter(thread__thread_id=thread_id).values_list("seq", flat=True))
    assert len(seqs) == len(set(seqs)), "duplicate seq"
    thread = Thread.objects.get(thread_id=thread_id)
    assert thread.last_seq == max(seqs)
    active = list(Block.objects.filter(thread=thread, archived=False).order_by("seq").values_list("position", flat=True))
    assert active == list(range(len(active)))
    assert thread.active_count == len(active)
    return thread


def test_identical_first_saves_create_one_thread_and_write_once(alice):
    context = turns(20)
    results = run_together(
        [lambda: thread_save_agent_state(actor=alice, thread_id="race", agent_code="bot", context=context)] * CLIENTS
    )
    assert sorted(r.mode for r in results) == ["append"] + ["noop"] * (CLIENTS - 1)
    assert Block.objects.count() == 20
    assert_consistent("race")
    assert thread_agent_state(actor=alice, thread_id="race").context == context


def test_growing_saves_lose_no_message_and_never_collide(alice):
    thread_save_agent_state(actor=alice, thread_id="grow", agent_code="bot", context=turns(10))
    sizes = [10 + 2 * (i + 1) for i in range(CLIENTS)]
    results = run_together(
        [lambda n=n: thread_save_agent_state(actor=alice, thread_id="grow", agent_code="bot", context=turns(n)) for n in sizes]
    )
    thread = assert_consistent("grow")
    # Every message a save reported as written is there, archived or active.
    assert Block.objects.filter(thread=thread).count() == 10 + sum(r.appended for r in results)
    # The active context is exactly the context of the save that committed last.
    last = max(results, key=lambda r: r.max_seq)
    assert thread_agent_state(actor=alice, thread_id="grow").context == turns(last.active)
    # A final save of the longest context leaves exactly that context active.
    thread_save_agent_state(actor=alice, thread_id="grow", agent_code="bot", context=turns(max(sizes) + 2))
    assert thread_agent_state(actor=alice, thread_id="grow").context == turns(max(sizes) + 2)
    assert_consistent("grow")


def test_concurrent_http_saves_get_no_server_error(alice, live_server):
    key = apikey_create(owner=alice).plaintext
    url = f"{live_server.url}/api/v1/threads/http-race/agent-state"

    def put(n):
        def job():
            with httpx.Client(headers={"Authorization": f"Bearer {key}"}, timeout=30) as client:
                return client.put(url, json={"agent_code": "bot", "context": turns(n)})

        return job

    responses = run_together([put(20)] * (CLIENTS // 2) + [put(22 + i) for i in range(CLIENTS // 2)])
    assert [r.status_code for r in responses] == [200] * CLIENTS
    assert_consistent("http-race")


def test_concurrent_appenders_lose_nothing_and_never_share_a_seq(alice):
    from django.core.management import call_command

    from sessions_app.threads.append import thread_append_messages

    thread_append_messages(actor=alice, thread_id="appends", agent_code="bot", messages=turns(4))
    results = run_together(
        [
            lambda i=i: thread_append_messages(actor=alice, thread_id="appends", agent_code="bot", messages=turns(2, f"c{i}"))
            for i in range(CLIENTS)
        ]
    )
    assert [r.appended for r in results] == [2] * CLIENTS
    thread = assert_consistent("appends")
    assert thread.last_seq == 4 + 2 * CLIENTS
    # Each appender's two messages are adjacent, and the chain holds over the whole context.
    context = thread_agent_state(actor=alice, thread_id="appends").context
    assert sorted(m["id"] for m in context) == sorted([m["id"] for m in turns(4)] + [f"c{i}-{j}" for i in range(CLIENTS) for j in (0, 1)])
    call_command("verify", "--thread", "appends")


def test_appenders_guarded_by_one_etag_let_exactly_one_through(alice):
    from memoryadmin.errors import PreconditionFailed
    from sessions_app.threads.append import thread_append_messages

    etag = thread_append_messages(actor=alice, thread_id="guarded", agent_code="bot", messages=turns(2)).etag

    def job(i):
        try:
            return thread_append_messages(
                actor=alice, thread_id="guarded", agent_code="bot", messages=turns(1, f"g{i}"), if_match=etag
            ).appended
        except PreconditionFailed:
            return "412"

    outcomes = run_together([lambda i=i: job(i) for i in range(CLIENTS)])
    assert sorted(outcomes, key=str) == [1] + ["412"] * (CLIENTS - 1)
    assert Block.objects.filter(thread__thread_id="guarded").count() == 3
    assert_consistent("guarded")
