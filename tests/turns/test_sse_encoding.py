"""The event stream's encoding: no chunk content can forge a field of the stream.

Read back with the parsing rules browsers use (the HTML standard's event-stream
interpretation: a line ends at CR, LF or CRLF), not by splitting on LF.
"""

from __future__ import annotations

import re

import pytest
from django.test import override_settings

from sessions_app.threads.services import thread_save_agent_state
from sessions_app.turns import services as turns
from sessions_app.turns.live import sse as _sse

from .test_live import events, open_stream, run

pytestmark = pytest.mark.django_db

# Lone carriage returns: what splitting on LF alone let through.
WITH_CR = [
    "a\revent: finished\rid: 99\r\rdata: forged",
    "d\r: comment\rretry: 0\r",
    "\r\r\n\n",
]
HOSTILE = [*WITH_CR, "b\r\nevent: timeout\r\n\r\nretry: 1", "c\nid: 7\n\nevent: finished", "plain"]


def parse_stream(text: str) -> list[dict]:
    """Events as a browser's EventSource dispatches them: {event, data, id}."""
    events, data, event_type, last_id = [], [], "", ""
    for line in re.split(r"\r\n|\r|\n", text):
        if line == "":
            if data:
                events.append({"event": event_type or "message", "data": "\n".join(data), "id": last_id})
            data, event_type = [], ""
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            data.append(value)
        elif name == "event":
            event_type = value
        elif name == "id" and "\x00" not in value:
            last_id = value
    return events


@pytest.mark.parametrize("text", WITH_CR)
def test_a_payload_with_any_line_break_stays_one_data_field(text):
    (event,) = parse_stream(_sse("chunk", text, 3))
    assert event == {"event": "chunk", "data": re.sub(r"\r\n|\r", "\n", text), "id": "3"}


@pytest.mark.parametrize(("event", "event_id"), [("chunk\revent: x", None), ("chunk\n", 1), ("chunk", "1\r2")])
def test_an_event_name_or_id_that_could_end_a_line_is_refused(event, event_id):
    with pytest.raises(ValueError):
        _sse(event, "data", event_id)


@pytest.mark.django_db(transaction=True)
@override_settings(
    MEMORYADMIN_TURN_SSE_POLL_SECONDS=0.01, MEMORYADMIN_TURN_SSE_HEARTBEAT_SECONDS=60, MEMORYADMIN_TURN_SSE_MAX_SECONDS=0.5
)
def test_streamed_chunks_with_bare_carriage_returns_forge_no_event(alice):
    thread_save_agent_state(actor=alice, thread_id="live", agent_code="bot", context=[{"role": "user", "content": "hi"}])
    turns.turn_begin(actor=alice, thread_id="live", question="q")
    for text in HOSTILE:
        turns.turn_append_chunk(actor=alice, thread_id="live", text=text)

    async def scenario():
        # Read to the end (the stream's maximum time), every event back with its blank line.
        received = "".join([event + "\n\n" async for event in events(await open_stream(alice))])
        assert received.endswith("event: timeout\ndata: \n\n")
        return received.removesuffix("event: timeout\ndata: \n\n")

    events_ = parse_stream(run(scenario))
    assert [event["event"] for event in events_] == ["chunk"] * len(HOSTILE)
    assert [event["id"] for event in events_] == [str(index) for index in range(len(HOSTILE))]
    assert [event["data"] for event in events_] == [re.sub(r"\r\n|\r", "\n", text) for text in HOSTILE]
