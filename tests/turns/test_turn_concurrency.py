"""Concurrent chunk appends to one pending turn (PostgreSQL: real row locks, separate connections)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection

from sessions_app.turns import services as turns
from sessions_app.models import TurnChunk
from sessions_app.threads.services import thread_save_agent_state

from ..conftest import IS_POSTGRES

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif(not IS_POSTGRES, reason="parallel transactions need PostgreSQL (SQLite serialises writers)"),
    pytest.mark.django_db(transaction=True),
]
WRITERS = 4
PER_WRITER = 25


def test_concurrent_appends_lose_nothing_and_keep_each_writers_order(alice):
    thread_save_agent_state(actor=alice, thread_id="race", agent_code="bot", context=[{"role": "user", "content": "q"}])
    turns.turn_begin(actor=alice, thread_id="race", question="q")
    barrier = threading.Barrier(WRITERS)

    def writer(name: str):
        barrier.wait()
        try:
            return [
                turns.turn_append_chunk(actor=alice, thread_id="race", text=f"{name}{i};").index for i in range(PER_WRITER)
            ]
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=WRITERS) as pool:
        results = list(pool.map(writer, "abcd"))

    rows = list(TurnChunk.objects.order_by("index").values_list("index", "text"))
    assert [index for index, _ in rows] == list(range(WRITERS * PER_WRITER))
    for name, indexes in zip("abcd", results):
        # Each writer's chunks come back in the order it sent them, at the indexes it was told.
        assert indexes == sorted(indexes)
        mine = [text for _, text in rows if text.startswith(name)]
        assert mine == [f"{name}{i};" for i in range(PER_WRITER)]
        assert [text for index, text in rows if index in set(indexes)] == mine
    result = turns.turn_finish(actor=alice, thread_id="race")
    assert result.finished and len(result.turn.answer) <= turns.turn_max_answer_chars()
