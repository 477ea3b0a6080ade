"""Input checks that mean what they say: whole-string ids, reserved path steps, keys.

Each refusal is a 400 naming the field (401 for a key that is no key), and the row
counts before and after show that nothing was written.
"""

from __future__ import annotations

import pytest

from memoryadmin.apikeys import apikey_authenticate, apikey_create
from sessions_app.models import Checkpoint, Thread
from sessions_app.threads.services import thread_save_agent_state

pytestmark = pytest.mark.django_db

CONTEXT = [{"role": "user", "content": "hi"}]


def counts() -> tuple[int, int]:
    return Thread.objects.count(), Checkpoint.objects.count()


def refused(response, field: str) -> None:
    assert response.status_code == 400, response.content
    assert field in response.json()["errors"], response.json()


@pytest.fixture
def thread(alice):
    thread_save_agent_state(actor=alice, thread_id="t1", agent_code="bot", context=CONTEXT)
    return "t1"


# --- thread ids -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "thread_id",
    ["x%0A", "t1%0A", "x" * 64 + "%0A", ".", ".."],
    ids=["trailing-newline", "existing-plus-newline", "maximal-plus-newline", "dot", "dot-dot"],
)
def test_a_thread_id_is_the_whole_string_in_the_path(alice_api, thread, thread_id):
    before = counts()
    response = alice_api.put(f"/api/v1/threads/{thread_id}/agent-state", {"agent_code": "bot", "context": CONTEXT}, format="json")
    refused(response, "thread_id")
    assert counts() == before


@pytest.mark.parametrize("thread_id", ["ok\n", "x" * 64 + "\n", ".", ".."])
def test_a_thread_id_in_a_body_is_the_whole_string(alice_api, thread, thread_id):
    before = counts()
    refused(alice_api.post("/api/v1/threads", {"thread_id": thread_id}, format="json"), "thread_id")
    refused(alice_api.post("/api/v1/threads/t1/copy", {"thread_id": thread_id}, format="json"), "thread_id")
    assert counts() == before


@pytest.mark.parametrize("thread_id", ["t1\n", ".", ".."])
def test_thread_id_lists_refuse_the_same_ids_by_index(alice_api, thread, thread_id):
    before = counts()
    response = alice_api.post("/api/v1/checkpoints/prune", {"thread_ids": ["t1", thread_id]}, format="json")
    refused(response, "thread_ids[1]")
    assert counts() == before


def test_the_dotted_ids_refused_are_only_the_path_steps(alice_api):
    for thread_id in ("...", ".a", "a.", "a..b"):
        response = alice_api.post("/api/v1/threads", {"thread_id": thread_id}, format="json")
        assert response.status_code == 201, (thread_id, response.content)
    for thread_id in (".", ".."):
        refused(alice_api.post("/api/v1/threads", {"thread_id": thread_id}, format="json"), "thread_id")
    assert Thread.objects.count() == 4


# --- checkpoint ids ---------------------------------------------------------------------------


@pytest.mark.parametrize("checkpoint_id", ["cp%0A", "c" * 128 + "%0A", ".", ".."])
def test_a_checkpoint_id_is_the_whole_string_in_the_path(alice_api, thread, checkpoint_id):
    before = counts()
    response = alice_api.put(f"/api/v1/threads/t1/checkpoints/{checkpoint_id}", {"checkpoint": {"v": 1}}, format="json")
    refused(response, "checkpoint_id")
    assert counts() == before


@pytest.mark.parametrize("checkpoint_id", ["cp\n", "c" * 128 + "\n", ".", ".."])
def test_a_checkpoint_id_in_a_body_is_the_whole_string(alice_api, thread, checkpoint_id):
    before = counts()
    response = alice_api.post(
        "/api/v1/threads/t1/checkpoints", {"checkpoint": {"v": 1}, "checkpoint_id": checkpoint_id}, format="json"
    )
    refused(response, "checkpoint_id")
    response = alice_api.post(
        "/api/v1/threads/t1/checkpoints", {"checkpoint": {"v": 1}, "parent_checkpoint_id": checkpoint_id}, format="json"
    )
    refused(response, "parent_checkpoint_id")
    assert counts() == before


# --- API keys ---------------------------------------------------------------------------------


@pytest.mark.parametrize("prefix", ["ab\x00cd", "abcd\n", "ab cd", "é" * 4])
def test_a_key_whose_prefix_cannot_be_a_prefix_is_no_key_and_no_query(anon_api, alice, prefix, django_assert_num_queries):
    issued = apikey_create(owner=alice)
    lookalike = f"ma_{prefix}_{issued.plaintext.rsplit('_', 1)[1]}"
    with django_assert_num_queries(0):
        assert apikey_authenticate(lookalike) is None
    anon_api.credentials(HTTP_AUTHORIZATION=f"Bearer {lookalike}")
    assert anon_api.get("/api/v1/threads").status_code == 401
    assert apikey_authenticate(issued.plaintext) is not None
