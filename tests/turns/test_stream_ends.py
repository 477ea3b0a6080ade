"""A thread that ends (deleted, cleared, released, its checkpoints deleted, its owner erased) ends its open live streams.

The write notifies the thread's channel in its own transaction (sessions_app/threads/notify.py);
the stream sends `event: ended` saying why and stops, without reading the thread again.
On SQLite, which cannot notify, the stream's next read finds a deleted thread gone, or the
end of a thread that stays recorded on its row.
"""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async
from django.db import connection
from django.test import override_settings

from memoryadmin.operations.erase import user_erase
from sessions_app.checkpoints.lifecycle import checkpoint_delete_thread, checkpoint_release
from sessions_app.threads.models import Thread
from sessions_app.threads.notify import ENDS, thread_channel, thread_notify
from sessions_app.threads.services import thread_clear, thread_delete, thread_save_agent_state
from sessions_app.turns import listener
from sessions_app.turns import services as turns
from sessions_app.turns.models import TurnStreamLease

from ..conftest import IS_POSTGRES
from .test_live import events, open_stream, rest, run

ENDINGS = {
    "deleted": lambda admin: thread_delete(actor=admin, thread_id="live"),
    "cleared": lambda admin: thread_clear(actor=admin, thread_id="live"),
    "released": lambda admin: checkpoint_release(actor=admin, thread_id="live"),
    # LangGraph's delete_thread: the checkpoints go, the thread stays.
    "checkpoints_deleted": lambda admin: checkpoint_delete_thread(actor=admin, thread_id="live"),
    "erased": lambda admin: user_erase(actor=admin, username="alice"),
}
# An end reaches the stream at the write's commit (PostgreSQL) or at its next read, every
# MEMORYADMIN_TURN_SSE_POLL_SECONDS (SQLite): well within this, and long before its timeout.
WITHIN_SECONDS = 3
# A stream that would otherwise go on: a heartbeat a second, ten seconds at most.
OPEN = dict(
    MEMORYADMIN_TURN_SSE_POLL_SECONDS=0.02,
    MEMORYADMIN_TURN_SSE_HEARTBEAT_SECONDS=1,
    MEMORYADMIN_TURN_SSE_LEASE_SECONDS=5,
    MEMORYADMIN_TURN_SSE_MAX_SECONDS=10,
)


@pytest.fixture
def thread(alice):
    thread_save_agent_state(actor=alice, thread_id="live", agent_code="bot", context=[{"role": "user", "content": "hi"}])
    turns.turn_begin(actor=alice, thread_id="live", question="q")
    turns.turn_append_chunk(actor=alice, thread_id="live", text="so far")
    return "live"


@pytest.mark.django_db(transaction=True)
@override_settings(**OPEN)
@pytest.mark.parametrize("end", ENDINGS)
def test_a_thread_that_ends_ends_its_open_streams_saying_why(alice, admin_user, thread, end):
    # SQLite: the read after an erase finds the thread deleted, and says so.
    said = ENDS["deleted"] if end == "erased" and not IS_POSTGRES else ENDS[end]

    async def scenario():
        stream = events(await open_stream(alice))
        assert await anext(stream) == "retry: 2000"
        assert (await anext(stream)).endswith("data: so far")
        await sync_to_async(ENDINGS[end])(admin_user)
        received = await asyncio.wait_for(rest(stream), WITHIN_SECONDS)
        assert received[-1] == f"event: ended\ndata: {said}"
        assert "event: timeout\ndata: " not in received
        assert await sync_to_async(TurnStreamLease.objects.count)() == 0

    run(scenario)


@pytest.mark.django_db(transaction=True)
@override_settings(**{**OPEN, "MEMORYADMIN_TURN_SSE_MAX_SECONDS": 1.5})
@pytest.mark.parametrize("end", ["cleared", "released", "checkpoints_deleted"])
def test_a_stream_opened_after_the_end_goes_on(alice, admin_user, thread, end):
    """The end is kept on the thread's row for the streams that poll: one opened afterwards is not ended by it."""
    ENDINGS[end](admin_user)
    assert Thread.objects.get(thread_id="live").streams_ended == end

    async def scenario():
        received = await rest(events(await open_stream(alice)))
        assert ": heartbeat" in received
        assert received[-1] == "event: timeout\ndata: "

    run(scenario)


@pytest.mark.skipif(not IS_POSTGRES, reason="NOTIFY: PostgreSQL")
@pytest.mark.django_db(transaction=True)
def test_a_notification_naming_no_end_only_wakes_the_stream(thread):
    """Anyone connected may NOTIFY a channel: a payload that is not one of ours ends nothing."""
    pk = Thread.objects.get(thread_id="live").pk

    def notify(payload: str) -> None:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_notify(%s, %s)", [thread_channel(pk), payload])

    async def scenario():
        watch = await listener.listener().subscribe(thread_channel(pk))
        await watch.wait(0.5)  # the wake-up every (re)connection gives
        await sync_to_async(notify)("deleted; drop everything")
        assert await watch.wait(2) and watch.ended == ""
        await sync_to_async(thread_notify)(pk, "erased")
        assert await watch.wait(2) and watch.ended == "erased"
        watch.close()

    run(scenario)


def test_an_end_not_in_the_list_is_refused():
    with pytest.raises(ValueError):
        thread_notify(1, "vanished")
