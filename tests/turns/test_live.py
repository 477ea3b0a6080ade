"""The live view: the turns panel, its event stream (ownership, chunks, heartbeats, the end)."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.test import AsyncClient, override_settings

from memoryadmin.models import AuditEvent
from sessions_app.models import Thread
from sessions_app.turns import services as turns
from sessions_app.turns import live
from sessions_app.turns.models import TurnStreamLease
from sessions_app.threads.services import thread_save_agent_state

from ..conftest import login_client

pytestmark = pytest.mark.django_db
FAST = dict(
    MEMORYADMIN_TURN_SSE_POLL_SECONDS=0.01,
    MEMORYADMIN_TURN_SSE_HEARTBEAT_SECONDS=0,
    MEMORYADMIN_TURN_SSE_MAX_SECONDS=0.3,
)


@pytest.fixture
def thread(alice):
    thread_save_agent_state(actor=alice, thread_id="live", agent_code="bot", context=[{"role": "user", "content": "hi"}])
    return "live"


def run(scenario):
    """Run an async scenario from a test: the ORM calls it makes in threads (sync_to_async)
    come back to this thread, so they see the test's own rows."""
    return async_to_sync(scenario)()


async def open_stream(user, path: str = "/threads/live/turns/stream"):
    """The stream view's response, through Django's async test client (the view is async)."""
    client = AsyncClient()
    await client.aforce_login(user)
    return await client.get(path)


async def events(response):
    """The stream's events, one string each, as they come."""
    buffer = ""
    async for piece in response.streaming_content:
        buffer += piece.decode() if isinstance(piece, bytes) else piece
        while "\n\n" in buffer:
            event, buffer = buffer.split("\n\n", 1)
            yield event


async def rest(stream) -> list[str]:
    return [event async for event in stream]


# Chunks appended while the stream is open: committed, so that PostgreSQL notifies at commit.
@pytest.mark.django_db(transaction=True)
@override_settings(**{**FAST, "MEMORYADMIN_TURN_SSE_MAX_SECONDS": 10})
def test_the_stream_sends_new_chunks_escaped_and_ends_when_the_turn_finishes(alice, thread):
    turns.turn_begin(actor=alice, thread_id="live", question="q")
    turns.turn_append_chunk(actor=alice, thread_id="live", text="<b>one</b>\ntwo")

    async def scenario():
        response = await open_stream(alice)
        assert response.status_code == 200 and response["Content-Type"] == "text/event-stream"
        stream = events(response)
        assert await anext(stream) == "retry: 2000"
        assert await anext(stream) == "event: chunk\nid: 0\ndata: &lt;b&gt;one&lt;/b&gt;\ndata: two"
        await sync_to_async(turns.turn_append_chunk)(actor=alice, thread_id="live", text=" three")
        following = [await anext(stream) for _ in range(2)]
        assert "event: chunk\nid: 1\ndata:  three" in following
        await sync_to_async(turns.turn_finish)(actor=alice, thread_id="live")
        assert (await rest(stream))[-1] == "event: finished\ndata: "

    run(scenario)


@pytest.mark.django_db(transaction=True)
@override_settings(**FAST)
def test_the_stream_sends_heartbeats_and_ends_after_its_time(alice, thread):
    async def scenario():
        received = await rest(events(await open_stream(alice)))
        assert ": heartbeat" in received
        assert received[-1] == "event: timeout\ndata: "

    run(scenario)


@pytest.mark.django_db(transaction=True)
@override_settings(**FAST)
def test_a_cancelled_stream_stops_and_gives_its_place_back(alice, thread):
    """What Django's ASGI handler does when the client disconnects: it cancels the response."""

    async def scenario():
        response = await open_stream(alice)
        stream = events(response)
        await anext(stream)
        assert await sync_to_async(TurnStreamLease.objects.count)() == 1
        reading = asyncio.ensure_future(anext(stream))
        await asyncio.sleep(0.05)
        reading.cancel()
        with pytest.raises(asyncio.CancelledError):
            await reading
        assert await sync_to_async(TurnStreamLease.objects.count)() == 0

    with override_settings(MEMORYADMIN_TURN_SSE_MAX_SECONDS=30, MEMORYADMIN_TURN_SSE_HEARTBEAT_SECONDS=10):
        run(scenario)


@pytest.mark.parametrize("path", ["/threads/live/turns/stream", "/threads/live/turns/"])
def test_another_member_gets_403_on_the_live_view(client, bob, thread, path):
    login_client(client, bob)
    before = AuditEvent.objects.filter(action="access.denied").count()
    assert client.get(path).status_code == 403
    assert AuditEvent.objects.filter(action="access.denied").count() == before + 1


@pytest.mark.django_db(transaction=True)
@override_settings(**FAST)
def test_an_operator_may_watch(operator, thread):
    async def scenario():
        response = await open_stream(operator)
        assert response.status_code == 200
        await rest(events(response))

    run(scenario)


def test_the_panel_shows_the_pending_and_finished_turns_escaped(client, alice, thread):
    turns.turn_begin(actor=alice, thread_id="live", question="<i>q1</i>")
    turns.turn_append_chunk(actor=alice, thread_id="live", text="a1")
    turns.turn_finish(actor=alice, thread_id="live")
    turns.turn_begin(actor=alice, thread_id="live", question="q2")
    turns.turn_append_chunk(actor=alice, thread_id="live", text="<script>x</script>")
    login_client(client, alice)
    html = client.get("/threads/live/turns/", HTTP_HX_REQUEST="true").content.decode()
    assert "&lt;i&gt;q1&lt;/i&gt;" in html and "a1" in html and 'sse-swap="chunk"' in html
    assert "&lt;script&gt;x&lt;/script&gt;" in html and "<script>x" not in html


@pytest.mark.parametrize("count", [1, 15])
def test_the_panel_costs_the_same_queries_whatever_the_number_of_turns(client, alice, thread, count, django_assert_num_queries):
    with override_settings(MEMORYADMIN_TURN_WINDOW=50):
        for i in range(count):
            turns.turn_begin(actor=alice, thread_id="live", question=f"q{i}")
            turns.turn_append_chunk(actor=alice, thread_id="live", text="a")
            turns.turn_finish(actor=alice, thread_id="live")
    turns.turn_begin(actor=alice, thread_id="live", question="now")
    login_client(client, alice)
    # session, user, thread, turns, pending chunks, the user's role (context processor)
    with django_assert_num_queries(6):
        client.get("/threads/live/turns/")


def test_the_thread_page_includes_the_live_view(client, alice, thread):
    login_client(client, alice)
    html = client.get("/threads/live/").content.decode()
    # The page loads the panel; the panel polls while no turn is pending and streams while one is.
    assert 'hx-ext="sse"' in html and 'hx-get="/threads/live/turns/" hx-trigger="load"' in html
    assert "django_htmx/ext/hx-sse-2" in html
    idle = client.get("/threads/live/turns/", HTTP_HX_REQUEST="true").content.decode()
    assert 'hx-trigger="every 2s"' in idle and "sse-connect" not in idle
    turn = turns.turn_begin(actor=alice, thread_id="live", question="q")
    turns.turn_append_chunk(actor=alice, thread_id="live", text="one")
    busy = client.get("/threads/live/turns/", HTTP_HX_REQUEST="true").content.decode()
    assert f'sse-connect="/threads/live/turns/stream?turn={turn.pk}&amp;after=0"' in busy and 'sse-close="finished"' in busy
    assert "every 2s" not in busy  # no poll while the stream feeds the panel: no chunk shown twice


# Committed: on PostgreSQL the streams read on a connection of their own.
@pytest.mark.django_db(transaction=True)
def test_the_stream_resumes_after_the_chunks_the_panel_shows(client, alice, thread):
    turn = turns.turn_begin(actor=alice, thread_id="live", question="q")
    for text in ("one", "two", "three"):
        turns.turn_append_chunk(actor=alice, thread_id="live", text=text)
    thread_pk = Thread.objects.get(thread_id=thread).pk

    async def scenario():
        stream = live.turn_events(thread_pk=thread_pk, poll=0.01, heartbeat=60, max_seconds=0.2, resume=(turn.pk, 1))
        return [event async for event in stream if event.startswith("event: chunk")]

    assert run(scenario) == ["event: chunk\nid: 2\ndata: three\n\n"]
    login_client(client, alice)
    assert client.get("/threads/live/turns/stream?turn=x&after=1").status_code == 400


def test_without_javascript_the_turns_link_opens_a_page(client, alice, thread):
    login_client(client, alice)
    page = client.get("/threads/live/turns/").content.decode()
    assert page.lstrip().lower().startswith("<!doctype html>") and "app.css" in page and "No turns yet." in page


@pytest.mark.django_db(transaction=True)
@override_settings(**{**FAST, "MEMORYADMIN_TURN_SSE_MAX_SECONDS": 5})
def test_under_a_wsgi_server_the_stream_is_sent_event_by_event(client, alice, thread):
    """The development server (WSGI) iterates the response in its thread: each event goes out
    as it comes, not the whole stream at its end; closing the response releases the lease."""
    turns.turn_begin(actor=alice, thread_id="live", question="q")
    login_client(client, alice)
    response = client.get("/threads/live/turns/stream")
    buffer = ""
    pieces = iter(response.streaming_content)
    while "retry: 2000" not in buffer:
        buffer += next(pieces).decode()
    turns.turn_append_chunk(actor=alice, thread_id="live", text="now")
    while "data: now" not in buffer:
        buffer += next(pieces).decode()
    assert TurnStreamLease.objects.count() == 1
    response.close()
    assert TurnStreamLease.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_streams_of_one_thread_woken_together_share_one_read_whatever_they_have_sent(alice, thread):
    """Three tabs: two that have sent nothing yet, one resuming after the first two chunks the page
    shows. One read (one statement) serves the three, each with the chunks it has not sent."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    turn = turns.turn_begin(actor=alice, thread_id="live", question="q")
    for text in ("one", "two", "three"):
        turns.turn_append_chunk(actor=alice, thread_id="live", text=text)
    thread_pk = Thread.objects.get(thread_id=thread).pk

    async def scenario():
        tabs = [live.turn_events(thread_pk=thread_pk, poll=0.01, heartbeat=60, max_seconds=5) for _ in range(2)]
        tabs.append(live.turn_events(thread_pk=thread_pk, poll=0.01, heartbeat=60, max_seconds=5, resume=(turn.pk, 1)))
        assert await asyncio.gather(*(anext(tab) for tab in tabs)) == ["retry: 2000\n\n"] * 3
        reads = live.shared_reads().reads
        # All three read at once (their first read): one read for the three of them.
        first = await asyncio.gather(*(anext(tab) for tab in tabs))
        made = live.shared_reads().reads - reads
        for tab in tabs:
            await tab.aclose()
        return first, made

    every = "".join(f"event: chunk\nid: {i}\ndata: {text}\n\n" for i, text in enumerate(("one", "two", "three")))
    with CaptureQueriesContext(connection) as queries:
        first, made = run(scenario)
    # The chunks of one read go out in one write.
    assert first == [every, every, "event: chunk\nid: 2\ndata: three\n\n"]
    assert made == 1
    if connection.vendor == "sqlite":
        # The thread, its pending turn and the chunks: one statement.
        assert len(queries.captured_queries) == 1
