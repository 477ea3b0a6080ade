"""A root LangGraph checkpoint's messages as the thread's blocks, over the API: deltas guarded
by the chain head, ownership, and query counts that do not grow with the conversation."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from sessions_app.checkpoints import services as svc
from sessions_app.models import Block, Checkpoint, Thread

pytestmark = pytest.mark.django_db


def human(i: int) -> dict:
    return {"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", "HumanMessage"],
            "kwargs": {"content": f"question {i}", "type": "human", "id": f"h-{i}"}}


def ai(i: int) -> dict:
    return {"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", "AIMessage"],
            "kwargs": {"content": f"answer {i}", "type": "ai", "id": f"a-{i}", "tool_calls": []}}


def conversation(count: int) -> list[dict]:
    return [human(i) if i % 2 == 0 else ai(i) for i in range(count)]


def body(checkpoint_id: str, messages: list | None, *, parent: str | None = None, delta: dict | None = None) -> dict:
    values = {"branch:to:agent": None}
    if messages is not None:
        values["messages"] = messages
    data = {
        "checkpoint_id": checkpoint_id,
        "parent_checkpoint_id": parent,
        "checkpoint": {"v": 4, "id": checkpoint_id, "ts": "2026-12-01T00:00:00+00:00", "channel_values": values,
                       "channel_versions": {"messages": "1"}, "versions_seen": {}},
        "metadata": {"source": "loop", "step": 1, "parents": {}},
    }
    if delta is not None:
        data["messages"] = delta
    return data


def put(api, thread_id: str, data: dict):
    return api.post(f"/api/v1/threads/{thread_id}/checkpoints", data, format="json")


def test_a_whole_put_keeps_the_messages_as_blocks_and_answers_their_head(alice_api):
    answer = put(alice_api, "lg-1", body("c1", conversation(4)))
    assert answer.status_code == 201, answer.content
    held = answer.json()["messages"]
    assert held["channel"] == "messages" and held["count"] == 4
    thread = Thread.objects.get(thread_id="lg-1")
    assert thread.title == "question 0" and thread.agent_code == "langgraph" and thread.active_count == 4
    assert held["head"] == Block.objects.filter(thread=thread).order_by("-seq").first().chain_hash
    row = Checkpoint.objects.get(thread=thread, checkpoint_id="c1")
    assert "messages" not in row.checkpoint["channel_values"] and row.messages_ref["count"] == 4
    latest = alice_api.get("/api/v1/threads/lg-1/checkpoints/latest").json()
    assert latest["checkpoint"]["channel_values"]["messages"] == conversation(4)
    assert latest["messages"] == held


@pytest.mark.parametrize("role", [["user"], {"k": 1}, 7, "robot"])
def test_a_chat_message_s_role_of_any_kind_is_taken(alice_api, role):
    """A ChatMessage names its own role: one the store knows gives the block's, anything else an assistant's."""
    chat = {"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", "ChatMessage"],
            "kwargs": {"content": "hello", "type": "chat", "role": role}}
    answer = put(alice_api, "lg-chat", body("c1", [human(0), chat]))
    assert answer.status_code == 201, answer.content
    assert list(Block.objects.order_by("seq").values_list("role", flat=True)) == ["user", "assistant"]
    latest = alice_api.get("/api/v1/threads/lg-chat/checkpoints/latest").json()
    assert latest["checkpoint"]["channel_values"]["messages"] == [human(0), chat]


def test_a_delta_appends_and_the_checkpoint_reads_back_whole(alice_api):
    head = put(alice_api, "lg-2", body("c1", conversation(2))).json()["messages"]["head"]
    answer = put(alice_api, "lg-2", body("c2", None, parent="c1", delta={"head": head, "append": conversation(4)[2:]}))
    assert answer.status_code == 201, answer.content
    assert answer.json()["messages"]["count"] == 4
    assert Thread.objects.get(thread_id="lg-2").active_count == 4
    for checkpoint_id, count in (("c1", 2), ("c2", 4)):
        read = alice_api.get(f"/api/v1/threads/lg-2/checkpoints/{checkpoint_id}").json()
        assert read["checkpoint"]["channel_values"]["messages"] == conversation(count)


def test_a_delta_against_another_head_is_a_412_and_writes_nothing(alice_api):
    put(alice_api, "lg-3", body("c1", conversation(2)))
    before = (Checkpoint.objects.count(), Block.objects.count())
    for delta in ({"head": "0" * 64, "append": [human(2)]}, {"head": "0" * 64, "append": []}):
        answer = put(alice_api, "lg-3", body("c2", None, parent="c1", delta=delta))
        assert answer.status_code == 412, answer.content
        # The head travels in the body, not in a header: the answer names that field.
        assert list(answer.json()["errors"]) == ["messages.head"], answer.content
        assert (Checkpoint.objects.count(), Block.objects.count()) == before


def test_bad_deltas_are_400s_naming_the_field(alice_api):
    head = put(alice_api, "lg-4", body("c1", conversation(2))).json()["messages"]["head"]
    cases = [
        ({"head": 3, "append": []}, "messages"),
        ({"head": head, "append": [{"role": "user", "content": "plain"}]}, "messages.append[0]"),
    ]
    for delta, field in cases:
        answer = put(alice_api, "lg-4", body("c2", None, parent="c1", delta=delta))
        assert answer.status_code == 400 and field in answer.json()["errors"], answer.content
    both = body("c2", conversation(3), parent="c1", delta={"head": head, "append": [human(2)]})
    assert put(alice_api, "lg-4", both).status_code == 400
    assert Checkpoint.objects.filter(thread__thread_id="lg-4").count() == 1


def test_another_members_thread_is_a_403_for_a_delta_too(alice_api, bob_api):
    head = put(alice_api, "lg-5", body("c1", conversation(2))).json()["messages"]["head"]
    assert put(bob_api, "lg-5", body("c2", None, parent="c1", delta={"head": head, "append": [human(2)]})).status_code == 403
    assert put(bob_api, "lg-5", body("c2", conversation(3), parent="c1")).status_code == 403
    assert bob_api.get("/api/v1/threads/lg-5/checkpoints/latest").status_code == 403
    assert Block.objects.filter(thread__thread_id="lg-5").count() == 2


def test_an_older_checkpoint_put_again_leaves_the_active_blocks(alice_api):
    put(alice_api, "lg-6", body("c1", conversation(2)))
    put(alice_api, "lg-6", body("c2", conversation(4), parent="c1"))
    assert put(alice_api, "lg-6", body("c1", conversation(2))).status_code == 200
    assert Thread.objects.get(thread_id="lg-6").active_count == 4
    read = alice_api.get("/api/v1/threads/lg-6/checkpoints/c1").json()
    assert read["checkpoint"]["channel_values"]["messages"] == conversation(2)


def _grown(api, thread_id: str, count: int) -> str:
    """A thread of `count` messages; its latest checkpoint's head."""
    return put(api, thread_id, body("base", conversation(count))).json()["messages"]["head"]


def test_put_latest_read_and_page_cost_the_same_queries_for_few_and_many_messages(alice, alice_api):
    page = Client()
    page.force_login(alice)
    costs = []
    for thread_id, count in (("few", 4), ("many", 400)):
        head = _grown(alice_api, thread_id, count)
        delta = {"head": head, "append": [human(count), ai(count + 1)]}
        with CaptureQueriesContext(connection) as put_cost:
            assert put(alice_api, thread_id, body("next", None, parent="base", delta=delta)).status_code == 201
        with CaptureQueriesContext(connection) as read_cost:
            assert len(alice_api.get(f"/api/v1/threads/{thread_id}/checkpoints/latest").json()["checkpoint"]["channel_values"]["messages"]) == count + 2
        with CaptureQueriesContext(connection) as page_cost:
            assert page.get(f"/threads/{thread_id}/").status_code == 200
        costs.append((len(put_cost), len(read_cost), len(page_cost)))
    assert costs[0] == costs[1], costs


def test_the_service_put_costs_the_same_queries_for_few_and_many_messages(alice, alice_api, django_assert_num_queries):
    counts = []
    for thread_id, count in (("s-warm", 2), ("s-few", 4), ("s-many", 400)):
        head = _grown(alice_api, thread_id, count)
        data = svc.checkpoint_input(**{k: v for k, v in body("next", None, parent="base").items() if k in ("checkpoint", "metadata", "parent_checkpoint_id")},
                                    messages={"head": head, "append": [human(count)]})
        with CaptureQueriesContext(connection) as cost:
            svc.checkpoint_put(actor=alice, thread_id=thread_id, data=data, checkpoint_id="next")
        counts.append(len(cost))
    counts = counts[1:]  # the first put of the test also reads the actor's role
    assert counts[0] == counts[1]
    head = _grown(alice_api, "s-third", 40)
    data = svc.checkpoint_input(**{k: v for k, v in body("next", None, parent="base").items() if k in ("checkpoint", "metadata", "parent_checkpoint_id")},
                                messages={"head": head, "append": [human(40)]})
    with django_assert_num_queries(counts[0]):
        svc.checkpoint_put(actor=alice, thread_id="s-third", data=data, checkpoint_id="next")


def test_verify_names_a_checkpoint_whose_messages_are_gone(alice_api):
    import io

    from django.core.management import call_command

    put(alice_api, "lg-7", body("c1", conversation(3)))
    out = io.StringIO()
    call_command("verify", stdout=out)
    assert "0 problem(s)" in out.getvalue()
    Block.objects.filter(thread__thread_id="lg-7", seq=2).delete()  # as a purge of archived blocks by SQL would
    read = alice_api.get("/api/v1/threads/lg-7/checkpoints/c1")
    assert read.status_code == 200  # a read never fails on it
    err = io.StringIO()
    with pytest.raises(SystemExit):
        call_command("verify", stdout=out, stderr=err)
    assert "missing_messages: thread:lg-7//c1" in out.getvalue()
