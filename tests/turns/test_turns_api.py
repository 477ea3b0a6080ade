"""The turn endpoints: the turn rules of docs/turns.md over HTTP, state in the database."""

from __future__ import annotations

import pytest
from django.test import override_settings

from memoryadmin.models import AuditEvent
from sessions_app.models import Turn, TurnChunk
from sessions_app.threads.services import thread_save_agent_state

pytestmark = pytest.mark.django_db


def base(thread_id: str = "t1") -> str:
    return f"/api/v1/threads/{thread_id}/turns"


@pytest.fixture
def thread(alice):
    thread_save_agent_state(actor=alice, thread_id="t1", agent_code="bot", context=[{"role": "user", "content": "hi"}])
    return "t1"


def ask(api, question, chunks, thread_id="t1"):
    assert api.post(base(thread_id), {"question": question}, format="json").status_code == 201
    for chunk in chunks:
        assert api.post(base(thread_id) + "/pending/chunks", {"text": chunk}, format="json").status_code == 200
    return api.post(base(thread_id) + "/pending/finish", format="json")


def test_it_builds_turns_from_streamed_chunks(alice_api, thread):
    answer = ask(alice_api, " What is 2+2? ", ["It ", "is", " 4."])
    assert answer.json() == {"finished": True, "dropped": False, "truncated": False, "evicted": 0}
    body = alice_api.get(base()).json()
    assert body["turns"] == [{"question": "What is 2+2?", "answer": "It is 4."}]
    assert body["pending"] is None
    assert body["rendered"] == "User: What is 2+2?\nAssistant: It is 4."
    assert TurnChunk.objects.count() == 0


def test_it_shows_the_pending_turn_with_its_chunks_so_far(alice_api, thread):
    alice_api.post(base(), {"question": "q"}, format="json")
    first = alice_api.post(base() + "/pending/chunks", {"text": "a"}, format="json").json()
    second = alice_api.post(base() + "/pending/chunks", {"text": " b"}, format="json").json()
    assert (first["index"], second["index"]) == (0, 1)
    pending = alice_api.get(base()).json()["pending"]
    assert pending["question"] == "q" and pending["answer"] == "a b" and pending["chunks"] == 2


def test_it_ignores_a_blank_question_and_writes_nothing(alice_api, thread):
    response = alice_api.post(base(), {"question": "  \n "}, format="json")
    assert response.status_code == 200 and response.json() == {"ignored": True}
    assert Turn.objects.count() == 0


def test_it_ignores_an_empty_chunk_but_keeps_a_space(alice_api, thread):
    alice_api.post(base(), {"question": "q"}, format="json")
    assert alice_api.post(base() + "/pending/chunks", {"text": ""}, format="json").json() == {"ignored": True, "index": None}
    assert alice_api.post(base() + "/pending/chunks", {"text": " "}, format="json").json()["index"] == 0
    assert TurnChunk.objects.count() == 1


def test_it_drops_a_turn_whose_answer_is_blank(alice_api, thread):
    response = ask(alice_api, "q", ["  ", "\n"])
    assert response.json()["dropped"] is True and response.json()["finished"] is False
    assert Turn.objects.count() == 0 and TurnChunk.objects.count() == 0


@override_settings(MEMORYADMIN_TURN_MAX_ANSWER_CHARS=10)
def test_it_cuts_a_long_answer_to_the_configured_length(alice_api, thread):
    response = ask(alice_api, "q", ["0123456789", "abcdef"])
    assert response.json()["truncated"] is True
    answer = alice_api.get(base()).json()["turns"][0]["answer"]
    assert answer == "012345678…" and len(answer) == 10


@override_settings(MEMORYADMIN_TURN_MAX_ANSWER_CHARS=10)
def test_it_keeps_an_answer_of_exactly_the_maximum(alice_api, thread):
    assert ask(alice_api, "q", ["0123456789"]).json()["truncated"] is False
    assert alice_api.get(base()).json()["turns"][0]["answer"] == "0123456789"


@override_settings(MEMORYADMIN_TURN_WINDOW=3)
def test_the_sliding_window_keeps_the_last_turns(alice_api, thread):
    evicted = [ask(alice_api, f"q{i}", [f"a{i}"]).json()["evicted"] for i in range(5)]
    assert evicted == [0, 0, 0, 1, 1]
    body = alice_api.get(base()).json()
    assert [t["question"] for t in body["turns"]] == ["q2", "q3", "q4"]
    assert Turn.objects.count() == 3


def test_a_new_question_replaces_an_unfinished_turn(alice_api, thread):
    alice_api.post(base(), {"question": "old"}, format="json")
    alice_api.post(base() + "/pending/chunks", {"text": "x"}, format="json")
    alice_api.post(base(), {"question": "new"}, format="json")
    pending = alice_api.get(base()).json()["pending"]
    assert pending["question"] == "new" and pending["answer"] == "" and TurnChunk.objects.count() == 0


def test_discard_drops_the_pending_turn_only(alice_api, thread):
    ask(alice_api, "kept", ["yes"])
    alice_api.post(base(), {"question": "dropped"}, format="json")
    alice_api.post(base() + "/pending/chunks", {"text": "x"}, format="json")
    assert alice_api.delete(base() + "/pending").json() == {"discarded": True}
    body = alice_api.get(base()).json()
    assert body["pending"] is None and body["turns"] == [{"question": "kept", "answer": "yes"}]
    assert alice_api.delete(base() + "/pending").json() == {"discarded": False}


def test_restart_reopens_the_last_finished_turn_with_its_question(alice_api, thread):
    ask(alice_api, "first", ["1"])
    ask(alice_api, "second", ["2"])
    response = alice_api.post(base() + "/restart", format="json").json()
    assert response["restarted"] is True and response["question"] == "second"
    body = alice_api.get(base()).json()
    assert body["turns"] == [{"question": "first", "answer": "1"}]
    assert body["pending"]["question"] == "second" and body["pending"]["answer"] == ""
    alice_api.post(base() + "/pending/chunks", {"text": "two, after feedback"}, format="json")
    alice_api.post(base() + "/pending/finish", format="json")
    assert alice_api.get(base()).json()["turns"][-1] == {"question": "second", "answer": "two, after feedback"}


def test_restart_without_finished_turns_changes_nothing(alice_api, thread):
    alice_api.post(base(), {"question": "p"}, format="json")
    assert alice_api.post(base() + "/restart", format="json").json() == {"restarted": False}
    assert alice_api.get(base()).json()["pending"]["question"] == "p"


def test_append_and_finish_without_a_pending_turn_are_conflicts(alice_api, thread):
    assert alice_api.post(base() + "/pending/chunks", {"text": "x"}, format="json").status_code == 409
    assert alice_api.post(base() + "/pending/finish", format="json").status_code == 409
    assert Turn.objects.count() == 0


def test_it_answers_404_for_an_unknown_thread(alice_api, thread):
    assert alice_api.get(base("nope")).status_code == 404
    assert alice_api.post(base("nope"), {"question": "q"}, format="json").status_code == 404
    assert alice_api.post(base("nope"), {"question": " "}, format="json").status_code == 404


@pytest.mark.parametrize(
    "path, body, field",
    [
        ("", {"question": 5}, "question"),
        ("", {}, "question"),
        ("", {"question": "a\x00b"}, "question"),
        ("", {"question": "x" * 100_001}, "question"),
        ("/pending/chunks", {"text": ["x"]}, "text"),
        ("/pending/chunks", {}, "text"),
    ],
)
def test_it_rejects_bad_input_naming_the_field(alice_api, thread, path, body, field):
    alice_api.post(base(), {"question": "q"}, format="json")
    before = (Turn.objects.count(), TurnChunk.objects.count(), Turn.objects.get().question)
    response = alice_api.post(base() + path, body, format="json")
    assert response.status_code == 400
    assert field in response.json()["errors"]
    assert (Turn.objects.count(), TurnChunk.objects.count(), Turn.objects.get().question) == before


def test_it_rejects_a_body_that_is_not_an_object(alice_api, thread):
    response = alice_api.post(base(), ["q"], format="json")
    assert response.status_code == 400 and "body" in response.json()["errors"]


def test_it_rejects_a_bad_thread_id(alice_api):
    response = alice_api.get(base("bad id!"))
    assert response.status_code in (400, 404)


WRITES = [
    ("post", "", {"question": "q"}),
    ("post", "", {"question": " "}),
    ("post", "/pending/chunks", {"text": "x"}),
    ("post", "/pending/finish", None),
    ("delete", "/pending", None),
    ("post", "/restart", None),
]


@pytest.mark.parametrize("method, path, body", WRITES)
@pytest.mark.parametrize("who", ["bob_api", "operator_api", "admin_api"])
def test_only_the_owner_writes_turns(request, alice_api, thread, method, path, body, who):
    ask(alice_api, "mine", ["answer"])
    alice_api.post(base(), {"question": "pending"}, format="json")
    alice_api.post(base() + "/pending/chunks", {"text": "so far"}, format="json")
    before = list(Turn.objects.order_by("pk").values_list("status", "question", "answer"))
    chunks = TurnChunk.objects.count()
    audits = AuditEvent.objects.filter(action="access.denied", target="thread:t1").count()
    api = request.getfixturevalue(who)
    response = getattr(api, method)(base() + path, body, format="json")
    assert response.status_code == 403
    assert list(Turn.objects.order_by("pk").values_list("status", "question", "answer")) == before
    assert TurnChunk.objects.count() == chunks
    assert AuditEvent.objects.filter(action="access.denied", target="thread:t1").count() == audits + 1


def test_another_member_cannot_read_turns(bob_api, thread):
    assert bob_api.get(base()).status_code == 403


@pytest.mark.parametrize("who", ["operator_api", "admin_api"])
def test_operators_and_admins_read_turns(request, alice_api, thread, who):
    ask(alice_api, "q", ["a"])
    assert request.getfixturevalue(who).get(base()).json()["turns"] == [{"question": "q", "answer": "a"}]


def test_anonymous_callers_are_refused(anon_api, thread):
    assert anon_api.get(base()).status_code in (401, 403)


@override_settings(MEMORYADMIN_TURN_WINDOW=50)
@pytest.mark.parametrize("count", [1, 20])
def test_reading_turns_costs_the_same_queries_whatever_their_number(alice_api, thread, count, django_assert_num_queries):
    for i in range(count):
        ask(alice_api, f"q{i}", ["a", "b"])
    alice_api.post(base(), {"question": "live"}, format="json")
    for i in range(count):
        alice_api.post(base() + "/pending/chunks", {"text": str(i)}, format="json")
    # API key with its user, thread, turns, pending turn's chunks
    with django_assert_num_queries(4):
        response = alice_api.get(base())
    assert len(response.json()["turns"]) == count


def test_turn_state_is_shared_through_the_database_not_process_memory(alice, alice_api, thread):
    from sessions_app.turns import services as turns

    turns.turn_begin(actor=alice, thread_id="t1", question="from one process")
    turns.turn_append_chunk(actor=alice, thread_id="t1", text="chunk")
    # A fresh read of the rows, as another server process would do it.
    assert alice_api.get(base()).json()["pending"]["answer"] == "chunk"
