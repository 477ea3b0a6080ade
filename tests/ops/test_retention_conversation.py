"""Retention's purge of archived blocks on a LangGraph thread: the checkpoints that still hold a
purged message go with it (counted alike by the dry run), the others read back whole."""

from __future__ import annotations

import pytest

from memoryadmin.operations import retention
from sessions_app.checkpoints.holding import checkpoints_holding
from sessions_app.models import Block, Checkpoint, CheckpointWrite, Thread

from ..sessions_app.test_langgraph_conversation_api import ai, body, conversation, human, put
from .helpers import age_archived

pytestmark = pytest.mark.django_db


def _step(api, thread_id, checkpoint_id, parent, previous, *, messages=None, append=None):
    data = body(checkpoint_id, messages, parent=parent, delta=None if append is None else {"head": previous, "append": append})
    answer = put(api, thread_id, data)
    assert answer.status_code == 201, answer.content
    return answer.json()["messages"]["head"]


def _compacted_thread(api, thread_id="lg-ret"):
    """c1 (4 messages), c2 (+2), c3 a compaction keeping the last two and a new question (the 6
    earlier blocks archived), c4 (+1): c1 and c2 hold archived blocks, c3 and c4 active ones."""
    head = _step(api, thread_id, "c1", None, "", messages=conversation(4))
    head = _step(api, thread_id, "c2", "c1", head, append=conversation(6)[4:])
    head = _step(api, thread_id, "c3", "c2", head, messages=[*conversation(6)[4:], human(6)])
    _step(api, thread_id, "c4", "c3", head, append=[ai(7)])
    api.post(f"/api/v1/threads/{thread_id}/checkpoints/c2/writes", {"task_id": "t", "writes": [{"channel": "x", "value": 1}]}, format="json")
    return Thread.objects.get(thread_id=thread_id)


def _read(api, thread_id, checkpoint_id):
    return api.get(f"/api/v1/threads/{thread_id}/checkpoints/{checkpoint_id}").json()["checkpoint"]["channel_values"]["messages"]


def test_the_holding_checkpoints_are_those_whose_messages_are_archived(alice_api):
    thread = _compacted_thread(alice_api)
    archived = Block.objects.filter(thread=thread, archived=True)
    assert archived.count() == 6
    names = set(Checkpoint.objects.filter(pk__in=checkpoints_holding(archived)).values_list("checkpoint_id", flat=True))
    assert names == {"c1", "c2"}
    # Only the first two messages: c1 and c2 both hold them.
    first = Block.objects.filter(thread=thread, archived=True, position__lt=2)
    assert set(Checkpoint.objects.filter(pk__in=checkpoints_holding(first)).values_list("checkpoint_id", flat=True)) == {"c1", "c2"}
    # The messages c2 added: c1 does not hold them.
    added = Block.objects.filter(thread=thread, archived=True, position__gte=4)
    assert set(Checkpoint.objects.filter(pk__in=checkpoints_holding(added)).values_list("checkpoint_id", flat=True)) == {"c2"}
    assert checkpoints_holding(Block.objects.filter(thread=thread, archived=False)) != []  # c3 and c4 hold the active ones


def test_a_purge_removes_the_checkpoints_holding_purged_messages_and_the_dry_run_says_so(alice_api):
    thread = _compacted_thread(alice_api)
    age_archived("lg-ret", 40)
    retention.retention_policy_save(actor=None, agent_code="", purge_archived_days=30)
    preview = retention.retention_preview().total
    assert (preview.blocks, preview.checkpoints, preview.pending_writes) == (6, 2, 1)

    run = retention.retention_apply(batch=4)  # batches smaller than the archived blocks
    assert run.counts["blocks"] == 6 and run.counts["checkpoints"] == 2 and run.counts["pending_writes"] == 1
    assert set(Checkpoint.objects.filter(thread=thread).values_list("checkpoint_id", flat=True)) == {"c3", "c4"}
    assert not CheckpointWrite.objects.filter(thread=thread).exists()
    assert Checkpoint.objects.get(thread=thread, checkpoint_id="c3").parent_checkpoint_id == ""
    # What stays reads back whole, and nothing archived is left.
    assert _read(alice_api, "lg-ret", "c3") == [*conversation(6)[4:], human(6)]
    assert _read(alice_api, "lg-ret", "c4") == [*conversation(6)[4:], human(6), ai(7)]
    assert not Block.objects.filter(thread=thread, archived=True).exists()
    assert retention.retention_preview().total.is_empty


def test_a_purge_of_a_later_compaction_only_keeps_checkpoints_that_hold_none_of_it(alice_api):
    thread = _compacted_thread(alice_api)
    age_archived("lg-ret", 40)
    # A second compaction, recent: c3 and c4's blocks archived now, kept by a 30-day rule.
    head = alice_api.get("/api/v1/threads/lg-ret/checkpoints/latest").json()["messages"]["head"]
    assert head
    _step(alice_api, "lg-ret", "c5", "c4", head, messages=[human(8)])
    retention.retention_policy_save(actor=None, agent_code="", purge_archived_days=30)
    assert retention.retention_preview().total.checkpoints == 2
    retention.retention_apply()
    assert set(Checkpoint.objects.filter(thread=thread).values_list("checkpoint_id", flat=True)) == {"c3", "c4", "c5"}
    assert _read(alice_api, "lg-ret", "c4") == [*conversation(6)[4:], human(6), ai(7)]
    assert _read(alice_api, "lg-ret", "c5") == [human(8)]


def test_checkpoints_removed_by_the_keep_rule_are_not_counted_twice(alice_api):
    _compacted_thread(alice_api)
    age_archived("lg-ret", 40)
    retention.retention_policy_save(actor=None, agent_code="", keep_checkpoints=3, purge_archived_days=30)
    preview = retention.retention_preview().total
    run = retention.retention_apply()
    assert preview.checkpoints == run.counts["checkpoints"] == 2  # c1 by the keep rule, c2 by the purge
    assert preview.pending_writes == run.counts["pending_writes"] == 1


def test_a_plain_conversation_thread_costs_the_holding_check_two_queries(alice, django_assert_num_queries):
    from sessions_app.threads.services import thread_save_agent_state

    thread_save_agent_state(actor=alice, thread_id="plain", agent_code="bot", context=[{"role": "user", "content": "hi"}])
    # The checkpoints holding messages by reference, the writes holding markers: none.
    with django_assert_num_queries(2):
        assert checkpoints_holding(Block.objects.filter(thread__thread_id="plain")) == []
