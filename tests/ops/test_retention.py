"""Retention: policies, the dry run (writes nothing, matches the apply), batches, parent chains."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from memoryadmin.errors import Forbidden, InvalidInput
from memoryadmin.models import AuditEvent
from memoryadmin.operations import retention
from memoryadmin.operations.models import RetentionPolicy, RetentionRun
from sessions_app.models import Block, Checkpoint, CheckpointWrite, Thread
from store_app.models import StoreItem

from .helpers import (
    age_archived,
    age_item,
    age_thread,
    broken_parents,
    checkpoints,
    compacted,
    save,
    store_item,
    table_counts,
    turns,
)

pytestmark = pytest.mark.django_db


def policy(agent_code="", **rules):
    return retention.retention_policy_save(actor=None, agent_code=agent_code, **rules)


@pytest.fixture
def estate(alice, bob):
    """Threads of two agents with old and fresh data, checkpoints, archived blocks and store items."""
    compacted(alice, "old-chat", 6)
    checkpoints(alice, "old-chat", 5)
    age_archived("old-chat", 40)
    age_thread("old-chat", 40)

    compacted(alice, "busy-chat", 4)
    checkpoints(alice, "busy-chat", 8)
    checkpoints(alice, "busy-chat", 4, ns="sub:1")
    age_archived("busy-chat", 5)

    compacted(bob, "support-1", 8, agent="support")
    checkpoints(bob, "support-1", 6)
    age_archived("support-1", 20)

    store_item(alice, ["users", "alice", "prefs"], "stale")
    age_item(["users", "alice", "prefs"], "stale", 100)
    store_item(alice, ["users", "alice", "prefs"], "fresh")
    store_item(bob, ["users", "bob"], "short", ttl=1)
    StoreItem.objects.filter(key="short").update(expires_at=timezone.now() - timezone.timedelta(minutes=5))

    policy("", keep_checkpoints=3, release_idle_days=30, purge_archived_days=30, store_ttl_days=60)
    policy("support", keep_checkpoints=2, purge_archived_days=10)


def test_the_dry_run_writes_nothing(estate):
    before = table_counts()
    report = retention.retention_preview()
    assert table_counts() == before
    assert not report.total.is_empty


def test_the_dry_run_matches_what_apply_then_removes(estate):
    now = timezone.now()
    report = retention.retention_preview(now=now)
    before = table_counts()
    run = retention.retention_apply(now=now, batch=2)
    after = table_counts()
    assert run.status == "done"
    assert run.counts == report.total.as_dict()
    assert [item["impact"] for item in run.policies] == [item.impact.as_dict() for item in report.policies]
    assert before["checkpoints"] - after["checkpoints"] == report.total.checkpoints
    assert before["writes"] - after["writes"] == report.total.pending_writes
    assert before["blocks"] - after["blocks"] == report.total.blocks
    assert before["items"] - after["items"] == report.total.items
    assert report.total.bytes > 0
    # Nothing is left to do at the same instant.
    assert retention.retention_preview(now=now).total.is_empty


def test_each_rule_removes_what_it_names(estate):
    retention.retention_apply()
    # old-chat was idle for 40 days: released, blocks kept but its 40-day-old archive purged.
    old = Thread.objects.get(thread_id="old-chat")
    assert Checkpoint.objects.filter(thread=old).count() == 0
    assert CheckpointWrite.objects.filter(thread=old).count() == 0
    assert Block.objects.filter(thread=old, archived=True).count() == 0 and old.archived_count == 0
    assert Block.objects.filter(thread=old, archived=False).count() == old.active_count == 1
    # busy-chat keeps its newest 3 per namespace, writes of kept checkpoints stay; its 5-day archive stays.
    busy = Thread.objects.get(thread_id="busy-chat")
    assert list(Checkpoint.objects.filter(thread=busy, checkpoint_ns="").order_by("id").values_list("checkpoint_id", flat=True)) == [
        "root-0005", "root-0006", "root-0007"
    ]
    assert Checkpoint.objects.filter(thread=busy, checkpoint_ns="sub:1").count() == 3
    assert CheckpointWrite.objects.filter(thread=busy).count() == 6
    assert busy.archived_count == 4 == Block.objects.filter(thread=busy, archived=True).count()
    # support follows its own policy: keep 2, purge archives older than 10 days.
    support = Thread.objects.get(thread_id="support-1")
    assert Checkpoint.objects.filter(thread=support).count() == 2
    assert support.archived_count == 0
    # The store: the stale item and the expired one go, the fresh one stays.
    assert list(StoreItem.objects.values_list("key", flat=True)) == ["fresh"]


def test_the_oldest_kept_checkpoint_becomes_a_root(estate):
    retention.retention_apply()
    busy = Thread.objects.get(thread_id="busy-chat")
    kept = list(Checkpoint.objects.filter(thread=busy, checkpoint_ns="").order_by("id"))
    assert [c.parent_checkpoint_id for c in kept] == ["", "root-0005", "root-0006"]
    assert broken_parents() == []


def test_batches_never_leave_a_broken_parent_chain(alice):
    for i in range(3):
        checkpoints(alice, f"t{i}", 7)
        checkpoints(alice, f"t{i}", 5, ns="child")
    checkpoints(alice, "idle", 6)
    age_thread("idle", 90)
    policy("", keep_checkpoints=2, release_idle_days=30)
    seen = []

    def after_batch(step, impact):
        seen.append(impact.checkpoints)
        assert broken_parents() == [], f"broken chain after batch {len(seen)}"

    run = retention.retention_apply(batch=2, progress=after_batch)
    assert run.batches == len(seen) > 10
    assert run.counts["checkpoints"] == 6 + 3 * (5 + 3)
    assert Checkpoint.objects.filter(thread__thread_id="idle").count() == 0


def test_purged_archives_keep_seq_numbers_unique(alice):
    compacted(alice, "t1", 4)
    age_archived("t1", 60)
    policy("", purge_archived_days=30)
    retention.retention_apply()
    thread = Thread.objects.get(thread_id="t1")
    assert thread.archived_count == 0 and thread.last_seq == 5
    result = save(alice, "t1", turns(2, "again"))
    assert result.mode == "rewrite" and result.max_seq == 7
    assert list(Block.objects.filter(thread=thread).values_list("seq", flat=True).order_by("seq")) == [5, 6, 7]


def test_an_agent_policy_replaces_the_default_for_that_agent(alice):
    checkpoints(alice, "a", 5)
    save(alice, "b", turns(1), agent="special")
    checkpoints(alice, "b", 5)
    policy("", keep_checkpoints=1)
    policy("special")  # every rule empty: keep everything
    retention.retention_apply()
    assert Checkpoint.objects.filter(thread__thread_id="a").count() == 1
    assert Checkpoint.objects.filter(thread__thread_id="b").count() == 5


def test_without_policies_nothing_goes(alice):
    compacted(alice, "t1")
    checkpoints(alice, "t1", 3)
    age_archived("t1", 1000)
    before = table_counts()
    run = retention.retention_apply()
    assert run.status == "done" and run.counts == retention.Impact().as_dict()
    after = table_counts()
    assert after["runs"] == before["runs"] + 1 and after["audit"] == before["audit"] + 1
    assert {k: v for k, v in after.items() if k not in ("runs", "audit")} == {
        k: v for k, v in before.items() if k not in ("runs", "audit")
    }


def test_an_apply_is_recorded_as_a_run_and_an_audit_event(estate, admin_user):
    run = retention.retention_apply(actor=admin_user, via="web")
    assert run.actor == admin_user and run.finished_at is not None and run.batches > 0
    event = AuditEvent.objects.get(action="retention.apply")
    assert event.actor_name == "adam" and event.target == f"retention-run:{run.pk}"
    assert event.detail["removed"] == run.counts and event.detail["status"] == "done"


def test_policies_are_validated(db):
    with pytest.raises(InvalidInput) as error:
        policy("bot", store_ttl_days=10)
    assert "store_ttl_days" in error.value.fields
    for bad in (0, -1, "x", 10**9):
        with pytest.raises(InvalidInput):
            policy("", purge_archived_days=bad)
    with pytest.raises(InvalidInput):
        policy("x" * 65)
    assert RetentionPolicy.objects.count() == 0


def test_saving_a_policy_is_audited_with_before_and_after(admin_user):
    retention.retention_policy_save(actor=admin_user, agent_code="bot", keep_checkpoints=5)
    retention.retention_policy_save(actor=admin_user, agent_code="bot", keep_checkpoints=7)
    events = list(AuditEvent.objects.filter(action="retention.policy_save").order_by("id"))
    assert events[0].detail["before"] is None
    assert events[1].detail["before"]["keep_checkpoints"] == 5 and events[1].detail["after"]["keep_checkpoints"] == 7


@pytest.mark.parametrize("who", ["alice", "operator"])
def test_members_and_operators_cannot_edit_preview_or_apply(estate, who, request):
    actor = request.getfixturevalue(who)
    before = table_counts()
    with pytest.raises(Forbidden):
        retention.retention_policy_save(actor=actor, agent_code="bot", keep_checkpoints=1)
    with pytest.raises(Forbidden):
        retention.retention_apply(actor=actor)
    with pytest.raises(Forbidden):
        retention.retention_preview(actor=actor)
    assert table_counts() == before


def test_the_command_previews_and_applies(estate):
    out = StringIO()
    before = table_counts()
    call_command("retention", "apply", "--dry-run", "--json", stdout=out)
    preview = json.loads(out.getvalue())
    assert table_counts() == before and preview["dry_run"] is True
    out = StringIO()
    call_command("retention", "apply", "--batch", "3", "--json", stdout=out)
    applied = json.loads(out.getvalue())
    assert applied["status"] == "done"
    assert {k: v for k, v in applied["total"].items() if k != "bytes"} == {
        k: v for k, v in preview["total"].items() if k != "bytes"
    }
    out = StringIO()
    call_command("retention", "apply", "--dry-run", stdout=out)
    assert "TOTAL" in out.getvalue() and "nothing was written" in out.getvalue()


def test_the_command_edits_and_lists_policies(db):
    out = StringIO()
    call_command("retention", "set", "--agent", "bot", "--keep-checkpoints", "4", stdout=out)
    call_command("retention", "policies", stdout=out)
    assert "bot" in out.getvalue()
    with pytest.raises(CommandError):
        call_command("retention", "set", "--agent", "bot", "--store-ttl-days", "4", stdout=out)
    call_command("retention", "delete", "--agent", "bot", stdout=out)
    assert RetentionPolicy.objects.count() == 0


def test_a_scheduled_apply_is_one_run_per_instant_and_continues_an_unfinished_one(estate):
    now = timezone.now()
    # Left `running` by a worker that died in the middle of the scheduled apply.
    stale = RetentionRun.objects.create(via="schedule", cutoff_now=now, actor_name="system")
    run = retention.retention_scheduled_apply(now=now)
    assert run.pk == stale.pk and run.status == "done" and run.counts["checkpoints"] > 0
    again = retention.retention_scheduled_apply(now=now)  # the same instant, deferred twice
    assert again.pk == stale.pk and again.counts == run.counts and RetentionRun.objects.count() == 1
