"""A LangGraph thread with its messages as blocks, large values by version and messages markers in
Send packets and pending writes costs the same number of queries on its pages and LangGraph's
endpoints whatever the number of its messages and checkpoints."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.conftest import login_client

from .test_checkpoint_storage import DOCUMENTS, marker, put, send, writes
from .test_langgraph_conversation_api import conversation, human

pytestmark = pytest.mark.django_db


def _thread(alice, thread_id: str, steps: int, per_step: int) -> None:
    """`steps` checkpoints, each `per_step` messages more than its parent, with a large value by
    version changing every other step, a Send packet of the whole conversation in the checkpoint
    and a task write with a marker of it, then a compaction, so archived blocks exist too."""
    parent = None
    for i in range(steps):
        messages = conversation(per_step * (i + 1))
        put(alice, f"c{i}", {"messages": messages, "documents": DOCUMENTS[: 2 + i % 2] * 3, "__pregel_tasks": [send(marker(len(messages)))]},
            {"messages": str(i), "documents": str(i // 2), "__pregel_tasks": str(i)}, parent=parent, refs=["__pregel_tasks"],
            thread_id=thread_id)
        writes(alice, f"c{i}", [{"channel": "t", "value": send(marker(len(messages), [human(99)])), "refs": True},
                                {"channel": "__interrupt__", "value": [{"value": "approve?"}]}], thread_id=thread_id)
        parent = f"c{i}"
    put(alice, "summary", {"messages": [human(1000)], "documents": DOCUMENTS}, {"messages": "s", "documents": "s"}, parent=parent,
        thread_id=thread_id)
    writes(alice, "summary", [{"channel": "t", "value": send(marker(1)), "refs": True}], thread_id=thread_id)


READS = [
    ("page active", lambda c, t: c.get(f"/threads/{t}/")),
    ("page archived", lambda c, t: c.get(f"/threads/{t}/?tab=archived")),
    ("page state", lambda c, t: c.get(f"/threads/{t}/?tab=state")),
    ("branches", lambda c, t: c.get(f"/threads/{t}/checkpoints/branches")),
    ("timeline", lambda c, t: c.get(f"/threads/{t}/checkpoints/")),
    ("timeline one", lambda c, t: c.get(f"/threads/{t}/checkpoints/", {"checkpoint": "c1"})),
    ("list", lambda c, t: c.get("/threads/")),
]
API = [
    ("state", lambda a, t: a.get(f"/api/v1/threads/{t}/state")),
    ("state by id", lambda a, t: a.get(f"/api/v1/threads/{t}/state/c1")),
    ("thread", lambda a, t: a.get(f"/api/v1/threads/{t}")),
    ("history", lambda a, t: a.post(f"/api/v1/threads/{t}/history", {"limit": 5}, format="json")),
    ("search", lambda a, t: a.post("/api/v1/threads/search", {"limit": 5}, format="json")),
    ("checkpoints", lambda a, t: a.get(f"/api/v1/threads/{t}/checkpoints?limit=5")),
    ("latest", lambda a, t: a.get(f"/api/v1/threads/{t}/checkpoints/latest")),
]


def _counts(run, reads, thread_id) -> dict[str, int]:
    counts = {}
    for name, read in reads:
        with CaptureQueriesContext(connection) as queries:
            answer = read(run, thread_id)
        assert answer.status_code == 200, (name, answer.status_code)
        counts[name] = len(queries)
    return counts


def test_pages_and_endpoints_cost_the_same_queries_for_more_messages_and_checkpoints(client, alice, alice_api):
    _thread(alice, "small", steps=2, per_step=2)
    login_client(client, alice)
    alice_api.get("/api/v1/threads/small")  # the key's first use of the window records it (one UPDATE)
    small = (_counts(client, READS, "small"), _counts(alice_api, API, "small"))
    _thread(alice, "large", steps=12, per_step=25)
    large = (_counts(client, READS, "large"), _counts(alice_api, API, "large"))
    assert large == small
    state = alice_api.get("/api/v1/threads/large/state/c1").json()
    assert len(state["values"]["messages"]) == 50 and state["values"]["documents"] == DOCUMENTS[:3] * 3


def test_search_and_the_list_cost_the_same_queries_for_more_langgraph_threads(client, alice, alice_api):
    """The latest checkpoints' tasks read their metadata: it is read with them, never row by row."""
    _thread(alice, "t0", steps=2, per_step=2)
    login_client(client, alice)
    alice_api.get("/api/v1/threads/t0")
    reads = [read for read in (*READS, *API) if read[0] in ("list", "search")]
    few = _counts(client, reads[:1], "t0"), _counts(alice_api, reads[1:], "t0")
    for i in range(1, 6):
        _thread(alice, f"t{i}", steps=2, per_step=2)
    assert (_counts(client, reads[:1], "t0"), _counts(alice_api, reads[1:], "t0")) == few
    found = alice_api.post("/api/v1/threads/search", {"limit": 10}, format="json").json()
    assert len(found) == 6 and all(thread["values"]["documents"] == DOCUMENTS for thread in found)
