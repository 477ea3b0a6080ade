"""The live turns section of the thread page in a real browser (CSP on: no inline script)."""

from __future__ import annotations

import pytest
from django.test import override_settings
from playwright.sync_api import expect

from sessions_app.turns import services as turns
from sessions_app.threads.services import thread_save_agent_state

from ..conftest import make_user
from .conftest import shot, sign_in

pytestmark = pytest.mark.django_db(transaction=True)


@override_settings(MEMORYADMIN_TURN_SSE_POLL_SECONDS=0.1, MEMORYADMIN_TURN_SSE_MAX_SECONDS=5)
def test_a_streamed_answer_appears_on_the_thread_page(page, live_server):
    alice = make_user("alice", password="memoryadmin")
    thread_save_agent_state(actor=alice, thread_id="live", agent_code="bot", context=[{"role": "user", "content": "hi"}])
    turns.turn_begin(actor=alice, thread_id="live", question="Plan a day in Kyoto")
    sign_in(page, live_server, "alice")
    page.goto(f"{live_server.url}/threads/live/")
    expect(page.locator(".turn.pending .turn-q")).to_contain_text("Plan a day in Kyoto")
    turns.turn_append_chunk(actor=alice, thread_id="live", text="Morning: <Fushimi Inari>")
    expect(page.locator("#pending-answer")).to_contain_text("Morning: <Fushimi Inari>")
    turns.turn_finish(actor=alice, thread_id="live")
    expect(page.locator("ol.turns .turn-a")).to_contain_text("Morning: <Fushimi Inari>")
    expect(page.locator(".turn.pending")).to_have_count(0)
    shot(page, "thread-turns-live")
    assert not [e for e in page.errors if "Content Security Policy" in e or "Refused" in e], page.errors
