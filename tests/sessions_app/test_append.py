"""The append-only save (docs/api.md, "Append-only save"): only the new messages travel."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memoryadmin.models import AuditEvent
from sessions_app.models import Block, Thread
from sessions_app.threads.append import thread_append_messages
from sessions_app.threads.messages import ContextHasher
from sessions_app.threads.selectors import thread_agent_state
from sessions_app.threads.services import thread_save_agent_state

from ..conftest import IS_POSTGRES
from .helpers import turns

APPEND = "/api/v1/threads/{}/agent-state/append"
STATE = "/api/v1/threads/{}/agent-state"


def append(actor, messages, thread_id="t1", **guards):
    return thread_append_messages(actor=actor, thread_id=thread_id, agent_code="bot", messages=messages, **guards)


def test_appends_build_the_same_thread_as_full_saves(alice, bob):
    context = turns(9)
    first = append(alice, context[:3])
    assert (first.mode, first.appended, first.active, first.max_seq) == ("append", 3, 3, 3)
    second = append(alice, context[3:4], expect_head=first.head)
    third = append(alice, context[4:], if_match=second.etag)
    assert (third.appended, third.active, third.max_seq) == (5, 9, 9)
    # The same chain as a full save of the whole context, which therefore finds nothing new.
    thread_save_agent_state(actor=bob, thread_id="t2", agent_code="bot", context=context)
    assert list(Block.objects.filter(thread__thread_id="t1").order_by("seq").values_list("chain_hash", flat=True)) == list(
        Block.objects.filter(thread__thread_id="t2").order_by("seq").values_list("chain_hash", flat=True)
    )
    assert third.head == ContextHasher(context).prefix_digest(9)
    assert thread_save_agent_state(actor=alice, thread_id="t1", agent_code="bot", context=context).mode == "noop"
    state = thread_agent_state(actor=alice, thread_id="t1")
    assert state.context == context and state.head == third.head
    thread = Thread.objects.get(thread_id="t1")
    assert (thread.owner, thread.title, thread.agent_code, thread.active_count) == (alice, "m 0", "bot", 9)


def test_seq_continues_after_a_compaction_and_the_chain_restarts_with_the_context(alice):
    append(alice, turns(6))
    compacted = [{"role": "system", "content": "summary", "name": "__compaction_summary__"}]
    rewrite = thread_save_agent_state(actor=alice, thread_id="t1", agent_code="bot", context=compacted)
    assert (rewrite.mode, rewrite.archived) == ("rewrite", 6)
    result = append(alice, turns(2, "n"), expect_head=rewrite.head)
    assert (result.max_seq, result.active) == (9, 3)
    active = list(Block.objects.filter(thread__thread_id="t1", archived=False).order_by("seq").values_list("seq", "position"))
    assert active == [(7, 0), (8, 1), (9, 2)]
    assert result.head == ContextHasher(compacted + turns(2, "n")).prefix_digest(3)
    call_command("verify", "--thread", "t1")


def test_a_moved_thread_answers_412_and_nothing_is_written(alice):
    first = append(alice, turns(2))
    second = append(alice, turns(2, "b"))
    before = Block.objects.count()
    for guards in ({"if_match": first.etag}, {"expect_head": first.head}, {"expect_head": ""}, {"if_none_match": "*"}):
        with pytest.raises(Exception) as caught:
            append(alice, turns(1, "c"), **guards)
        assert getattr(caught.value, "status", None) == 412, guards
    assert Block.objects.count() == before
    assert Thread.objects.get(thread_id="t1").last_seq == second.max_seq
    # A new thread: If-None-Match: * and an empty head both hold.
    assert append(alice, turns(1), thread_id="new", if_none_match="*").appended == 1
    assert append(alice, turns(1), thread_id="new2", expect_head="").appended == 1


def test_extra_state_is_overwritten_when_given_and_kept_when_absent(alice):
    append(alice, turns(2), extra_state={"plan": [1]}, extra_state_given=True)
    append(alice, turns(1, "b"))
    assert Thread.objects.get(thread_id="t1").extra_state == {"plan": [1]}
    result = append(alice, [], extra_state=None, extra_state_given=True)
    assert (result.mode, result.appended) == ("noop", 0)
    assert Thread.objects.get(thread_id="t1").extra_state is None


def test_over_http_with_etags(alice_api):
    created = alice_api.post(APPEND.format("t1"), {"agent_code": "bot", "messages": turns(2)}, format="json",
                             HTTP_IF_NONE_MATCH="*")
    assert created.status_code == 200, created.content
    body = created.json()
    assert (body["mode"], body["appended"], body["active"], body["max_seq"]) == ("append", 2, 2, 2)
    read = alice_api.get(STATE.format("t1"))
    assert read["ETag"] == created["ETag"] and read.json()["head"] == body["head"]
    more = alice_api.post(APPEND.format("t1"), {"agent_code": "bot", "messages": turns(2, "b")}, format="json",
                          HTTP_IF_MATCH=read["ETag"])
    assert more.status_code == 200 and more["ETag"] != read["ETag"]
    stale = alice_api.post(APPEND.format("t1"), {"agent_code": "bot", "messages": turns(1, "c")}, format="json",
                           HTTP_IF_MATCH=read["ETag"])
    assert stale.status_code == 412 and "If-Match" in stale.json()["errors"]
    wrong_head = alice_api.post(APPEND.format("t1"), {"agent_code": "bot", "messages": turns(1, "c"), "head": body["head"]},
                                format="json")
    assert wrong_head.status_code == 412 and list(wrong_head.json()["errors"]) == ["head"], wrong_head.content
    assert alice_api.get(STATE.format("t1")).json()["context"] == turns(2) + turns(2, "b")


@pytest.mark.parametrize(
    "body, headers, field",
    [
        ({"agent_code": "bot", "messages": "hi"}, {}, "messages"),
        ({"agent_code": "bot"}, {}, "messages"),
        ({"agent_code": "bot", "messages": [{"role": "user", "content": "a"}, {"role": "robot", "content": "b"}]}, {},
         "messages[1].role"),
        ({"agent_code": "", "messages": turns(1)}, {}, "agent_code"),
        ({"agent_code": "bot", "messages": turns(1), "extra_state": [1]}, {}, "extra_state"),
        ({"agent_code": "bot", "messages": turns(1), "head": 7}, {}, "head"),
        ({"agent_code": "bot", "messages": turns(1)}, {"HTTP_IF_NONE_MATCH": '"abc"'}, "If-None-Match"),
        ({"agent_code": "bot", "messages": [{"role": "user", "content": 5}]}, {}, "messages[0].content"),
    ],
)
def test_bad_input_names_the_field_and_writes_nothing(alice_api, body, headers, field):
    response = alice_api.post(APPEND.format("t1"), body, format="json", **headers)
    assert response.status_code == 400, response.content
    assert field in response.json()["errors"]
    assert not Thread.objects.exists() and not Block.objects.exists()


def test_the_context_limit_holds_for_appends(alice, settings):
    settings.MEMORYADMIN_MAX_CONTEXT_MESSAGES = 5
    append(alice, turns(4))
    with pytest.raises(Exception) as caught:
        append(alice, turns(2, "b"))
    assert getattr(caught.value, "status", None) == 400 and "messages" in caught.value.fields
    assert Block.objects.count() == 4


def test_another_members_thread_and_an_operator_are_refused(alice, bob_api, operator_api):
    append(alice, turns(2))
    for client in (bob_api, operator_api):
        response = client.post(APPEND.format("t1"), {"agent_code": "bot", "messages": turns(1, "x")}, format="json")
        assert response.status_code == 403
    assert Block.objects.count() == 2
    assert AuditEvent.objects.filter(action="access.denied", target="thread:t1").count() == 2


def test_an_append_costs_the_same_queries_at_any_length(alice):
    counts = []
    for size, thread_id in ((10, "short"), (1000, "long")):
        first = append(alice, turns(size), thread_id=thread_id)
        with CaptureQueriesContext(connection) as queries:
            append(alice, turns(2, "x"), thread_id=thread_id, if_match=first.etag)
        counts.append(len(queries))
    assert counts[0] == counts[1]
    if IS_POSTGRES:
        assert counts[0] == 2  # the head read and the one guarded statement
