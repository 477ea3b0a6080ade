"""Retention's purge of archived blocks and what holds messages by reference besides a checkpoint's
messages channel: Send packets in a checkpoint (its `refs`) and pending writes with markers
(`refers`). After a fork and a purge, every write and packet left reads back exactly; what
would read back short goes, with the task's other writes, and the dry run counts it alike."""

from __future__ import annotations

import pytest

from memoryadmin.operations import retention
from sessions_app.models import Block, Checkpoint, CheckpointWrite, Thread

from ..sessions_app.test_checkpoint_storage import marker, put, read, send, writes
from ..sessions_app.test_langgraph_conversation_api import conversation, human
from .helpers import age_archived

pytestmark = pytest.mark.django_db


def _forked(alice):
    """c1 (4 messages), c2 (+2), then time travel: c3 forks from c1 with a new question, which
    archives the six blocks of c1 and c2 (switching branches is a rewrite). c3's own Send
    packet refers to its own messages; the writes of c3's task arrived before c3's put and so
    name c1, the checkpoint the fork read; c2 has a task write of its own."""
    messages = conversation(4)
    put(alice, "c1", {"messages": messages}, {"messages": "1"})
    put(alice, "c2", {"messages": conversation(6)}, {"messages": "2"}, parent="c1")
    writes(alice, "c2", [{"channel": "__pregel_tasks", "value": send(marker(6)), "refs": True}], task_id="t2")
    writes(alice, "c3", [
        {"channel": "x", "value": "kept with its task"},
        {"channel": "__pregel_tasks", "value": send(marker(4, [human(9)], checkpoint="c1")), "refs": True},
    ], task_id="t3")
    writes(alice, "c3", [{"channel": "y", "value": "another task"}], task_id="t3b")
    put(alice, "c3", {"messages": [*messages, human(9)], "__pregel_tasks": [send(marker(5))]},
        {"messages": "3", "__pregel_tasks": "3"}, parent="c1", refs=["__pregel_tasks"])
    thread = Thread.objects.get(thread_id="st")
    assert Block.objects.filter(thread=thread, archived=True).count() == 6
    return thread


def test_a_write_referring_to_purged_blocks_goes_with_its_task_and_the_dry_run_counts_it(alice):
    thread = _forked(alice)
    messages = conversation(4)
    # Before the purge, every write reads back exactly, on either branch.
    pending = {(w.task_id, w.channel): w.value for w in read(alice, "c3").pending}
    assert pending[("t3", "__pregel_tasks")] == send([*messages, human(9)])
    age_archived("st", 40)
    retention.retention_policy_save(actor=None, agent_code="", purge_archived_days=30)
    preview = retention.retention_preview().total
    # c1 and c2 hold purged blocks (c2's write goes with c2); c3's task t3 refers to c1's blocks.
    assert (preview.blocks, preview.checkpoints, preview.pending_writes) == (6, 2, 3)

    run = retention.retention_apply(batch=4)
    assert (run.counts["blocks"], run.counts["checkpoints"], run.counts["pending_writes"]) == (6, 2, 3)
    assert set(Checkpoint.objects.filter(thread=thread).values_list("checkpoint_id", flat=True)) == {"c3"}
    # The task whose write could no longer be read whole went whole (it runs again on resume);
    # the other task's write stays, and c3's own packet reads back exactly.
    left = read(alice, "c3")
    assert [(w.task_id, w.channel, w.value) for w in left.pending] == [("t3b", "y", "another task")]
    assert left.checkpoint["channel_values"]["__pregel_tasks"] == [send([*messages, human(9)])]
    assert left.checkpoint["channel_values"]["messages"] == [*messages, human(9)]
    assert retention.retention_preview().total.is_empty


def test_writes_ahead_of_a_checkpoint_that_never_came_go_when_their_blocks_are_purged(alice):
    thread = _forked(alice)
    writes(alice, "c3", [{"channel": "z", "value": send(marker(3)), "refs": True}], task_id="t4")  # refers to c3
    CheckpointWrite.objects.filter(thread=thread, task_id="t3").update(checkpoint_id="c-never")
    age_archived("st", 40)
    retention.retention_policy_save(actor=None, agent_code="", purge_archived_days=30)
    assert retention.retention_preview().total.pending_writes == 3
    retention.retention_apply()
    assert not CheckpointWrite.objects.filter(thread=thread, checkpoint_id="c-never").exists()
    # A write referring to c3's active blocks stays and reads back exactly.
    kept = {w.task_id: w.value for w in read(alice, "c3").pending}
    assert kept["t4"] == send(conversation(3))


def test_a_purge_that_removes_no_write_counts_none(alice):
    """The writes referring to blocks the purge keeps (c3's, active) are neither removed nor counted."""
    put(alice, "c1", {"messages": conversation(4)}, {"messages": "1"})
    writes(alice, "c1", [{"channel": "t", "value": send(marker(4)), "refs": True}])
    put(alice, "c2", {"messages": [human(7)]}, {"messages": "2"}, parent="c1")  # a compaction: c1's blocks archived
    writes(alice, "c2", [{"channel": "t", "value": send(marker(1)), "refs": True}], task_id="t2")
    age_archived("st", 40)
    retention.retention_policy_save(actor=None, agent_code="", purge_archived_days=30)
    preview = retention.retention_preview().total
    assert (preview.checkpoints, preview.pending_writes) == (1, 1)
    retention.retention_apply()
    assert [w.value for w in read(alice, "c2").pending] == [send([human(7)])]
