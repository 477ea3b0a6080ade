"""`MemoryAdminSaver` reads a thread's latest checkpoint conditionally: the checkpoint it last put
or read, with the server's state tag, answers while the server says 304 (PostgreSQL), and what it
gives is what a saver reading the answer in full gives."""

from __future__ import annotations

import pytest
from langchain_core.messages import HumanMessage

from ..conftest import IS_POSTGRES
from .test_langgraph_conversation import agent
from .test_saver_graph import live_saver

pytestmark = pytest.mark.django_db(transaction=True)
# SQLite takes the general paths, which give no state tag: every read is answered in full there.
UNCHANGED = 304 if IS_POSTGRES else 200


class Reads:
    """The latest reads a saver sends: whether each carried a tag, and what the server answered."""

    def __init__(self, saver):
        self.seen: list[tuple[bool, int | None]] = []
        send = saver.http.send

        def recording(call):
            response = send(call)
            if call.method == "GET" and call.path.endswith("/checkpoints/latest"):
                self.seen.append((bool(call.headers and "If-None-Match" in call.headers), response and response.status_code))
            return response

        saver.http.send = recording


def config(thread_id):
    return {"configurable": {"thread_id": thread_id}}


def same(found, expected):
    assert found.config == expected.config and found.parent_config == expected.parent_config
    assert found.checkpoint == expected.checkpoint and found.metadata == expected.metadata
    assert found.pending_writes == expected.pending_writes


@pytest.fixture
def savers(live_server, alice_key):
    made = []

    def make():
        made.append(live_saver(live_server.url, alice_key))
        return made[-1]

    yield make
    for saver in made:
        saver.close()


@pytest.fixture
def alice_key(alice):
    from memoryadmin.apikeys import apikey_create

    return apikey_create(owner=alice).plaintext


def test_each_turn_s_first_read_is_answered_unchanged_and_gives_what_a_full_read_gives(savers):
    saver, fresh = savers(), savers()
    reads = Reads(saver)
    graph = agent(saver)
    for turn in ("What is 6 times 7?", "And the weather in Lisbon?", "Thanks!"):
        graph.invoke({"messages": [HumanMessage(turn)]}, config("unchanged"))
    # The first turn's read found nothing; each later one the checkpoint the turn before put last.
    assert reads.seen[0] == (False, None)  # a 404: None, as LangGraph reads it
    assert reads.seen[1:] == [(IS_POSTGRES, UNCHANGED)] * 2
    held = saver.get_tuple(config("unchanged"))
    assert reads.seen[-1] == (IS_POSTGRES, UNCHANGED)
    same(held, fresh.get_tuple(config("unchanged")))
    assert [m.content for m in held.checkpoint["channel_values"]["messages"]][-1] == "You are welcome."
    # A checkpoint read in full comes with its tag too: the fresh saver's next read is unchanged.
    Reads(fresh)
    same(fresh.get_tuple(config("unchanged")), held)


def test_a_message_edited_in_place_or_another_writer_s_step_is_read_in_full(savers):
    saver, other = savers(), savers()
    reads = Reads(saver)
    graph = agent(saver)
    graph.invoke({"messages": [HumanMessage("What is 6 times 7?")]}, config("edited"))
    held = saver.get_tuple(config("edited"))
    first = held.checkpoint["channel_values"]["messages"][0]
    first.content = "edited in place"  # the very object the saver holds
    found = saver.get_tuple(config("edited"))
    assert reads.seen[-1] == (False, 200)
    assert found.checkpoint["channel_values"]["messages"][0].content == "What is 6 times 7?"

    # Another saver's step: the tag this one holds no longer holds.
    step = other.get_tuple(config("edited"))
    checkpoint = dict(step.checkpoint, id="1f0c0000-0000-6000-8000-000000000001")
    other.put(step.config, checkpoint, {"source": "update", "step": 99}, {})
    found = saver.get_tuple(config("edited"))
    assert reads.seen[-1] == (IS_POSTGRES, 200)
    assert found.config["configurable"]["checkpoint_id"] == checkpoint["id"] and found.metadata["step"] == 99
