"""The live view: the turns panel, its event stream (ownership, chunks, heartbeats, the end)."""

from __future__ import annotations

import pytest
from django.test import override_settings

from memoryadmin.models import AuditEvent
from sessions_app.models import Thread
from sessions_app.turns import services as turns
from sessions_app.turns import views
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


def events(response):
    """The stream's events, one string each, as they come."""
    buffer = ""
    for piece in response.streaming_content:
        buffer += piece.decode() if isinstance(piece, bytes) else piece
        while "\n\n" in buffer:
            event, buffer = buffer.split("\n\n", 1)
            yield event


@override_settings(**FAST)
def test_the_stream_sends_new_chunks_escaped_and_ends_when_the_turn_finishes(client, alice, thread):
    turns.turn_begin(actor=alice, thread_id="live", question="q")
    turns.turn_append_chunk(actor=alice, thread_id="live", text="<b>one</b>\ntwo")
    login_client(client, alice)
    response = client.get("/threads/live/turns/stream")
    assert response.status_code == 200 and response["Content-Type"] == "text/event-stream"
    stream = events(response)
    assert next(stream) == "retry: 2000"
    assert next(stream) == "event: chunk\nid: 0\ndata: &lt;b&gt;one&lt;/b&gt;\ndata: two"
    turns.turn_append_chunk(actor=alice, thread_id="live", text=" three")
    following = [next(stream) for _ in range(2)]
    assert "event: chunk\nid: 1\ndata:  three" in following
    turns.turn_finish(actor=alice, thread_id="live")
    rest = list(stream)
    assert rest[-1] == "event: finished\ndata: "


@override_settings(**FAST)
def test_the_stream_sends_heartbeats_and_ends_after_its_time(client, alice, thread):
    login_client(client, alice)
    received = list(events(client.get("/threads/live/turns/stream")))
    assert ": heartbeat" in received
    assert received[-1] == "event: timeout\ndata: "


@override_settings(**FAST)
def test_closing_the_stream_stops_the_generator(client, alice, thread):
    login_client(client, alice)
    response = client.get("/threads/live/turns/stream")
    stream = events(response)
    next(stream)
    response.close()
    with pytest.raises(StopIteration):
        next(iter(response.streaming_content))


@pytest.mark.parametrize("path", ["/threads/live/turns/stream", "/threads/live/turns/"])
def test_another_member_gets_403_on_the_live_view(client, bob, thread, path):
    login_client(client, bob)
    before = AuditEvent.objects.filter(action="access.denied").count()
    assert client.get(path).status_code == 403
    assert AuditEvent.objects.filter(action="access.denied").count() == before + 1


@override_settings(**FAST)
def test_an_operator_may_watch(client, operator, thread):
    login_client(client, operator)
    assert client.get("/threads/live/turns/stream").status_code == 200


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


def test_the_stream_resumes_after_the_chunks_the_panel_shows(client, alice, thread):
    turn = turns.turn_begin(actor=alice, thread_id="live", question="q")
    for text in ("one", "two", "three"):
        turns.turn_append_chunk(actor=alice, thread_id="live", text=text)
    thread_pk = Thread.objects.get(thread_id=thread).pk
    events = views.turn_events(thread_pk=thread_pk, poll=0.01, heartbeat=60, max_seconds=0.2, resume=(turn.pk, 1))
    sent = [event for event in events if event.startswith("event: chunk")]
    assert sent == ["event: chunk\nid: 2\ndata: three\n\n"]
    login_client(client, alice)
    assert client.get("/threads/live/turns/stream?turn=x&after=1").status_code == 400


def test_without_javascript_the_turns_link_opens_a_page(client, alice, thread):
    login_client(client, alice)
    page = client.get("/threads/live/turns/").content.decode()
    assert page.lstrip().lower().startswith("<!doctype html>") and "app.css" in page and "No turns yet." in page
