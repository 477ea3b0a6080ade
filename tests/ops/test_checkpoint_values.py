"""Channel values stored once per version (`CheckpointValue`) in every preview and removal: the
retention dry run, the erase and bulk previews count their rows and bytes as the removal removes
them, and after every path that removes or replaces checkpoints no value is left that no
checkpoint holds (on SQLite and PostgreSQL alike)."""

from __future__ import annotations

import pytest

from memoryadmin.operations import bulk, erase, retention
from memoryadmin.operations.sizes import payload_bytes
from sessions_app.checkpoints import lifecycle
from sessions_app.checkpoints import services as svc
from sessions_app.checkpoints.removal import values_unheld
from sessions_app.models import Checkpoint, CheckpointValue, Thread
from sessions_app.threads import services as thread_services

from ..sessions_app.test_checkpoint_storage import DOCUMENTS, lg, put, read
from ..sessions_app.test_langgraph_conversation_api import conversation, human
from .helpers import age_archived, age_thread

pytestmark = pytest.mark.django_db


def _history(user, thread_id="st", run_ids=("r1", "r1", "r2")):
    """c1 documents@1, c2 documents@1 (the same row), c3 documents@2: two values by version."""
    for i, (version, run_id) in enumerate(zip(("1", "1", "2"), run_ids), start=1):
        data = svc.checkpoint_input(
            checkpoint=lg(f"c{i}", {"documents": DOCUMENTS if version == "1" else DOCUMENTS[:3]}, {"documents": version}),
            metadata={"step": i, "run_id": run_id}, parent_checkpoint_id=f"c{i - 1}" if i > 1 else None,
        )
        svc.checkpoint_put(actor=user, thread_id=thread_id, data=data, checkpoint_id=f"c{i}")
    assert CheckpointValue.objects.filter(thread__thread_id=thread_id).count() == 2
    return Thread.objects.get(thread_id=thread_id)


def _unheld() -> list[int]:
    return values_unheld(Thread.objects.values_list("pk", flat=True))


def test_the_keep_rule_dry_run_counts_the_values_it_removes_as_the_apply_does(alice):
    thread = _history(alice)
    retention.retention_policy_save(actor=None, agent_code="", keep_checkpoints=1)
    preview = retention.retention_preview().total
    assert (preview.checkpoints, preview.checkpoint_values) == (2, 1)
    run = retention.retention_apply(batch=1)
    assert run.counts["checkpoint_values"] == 1 and run.counts["bytes"] == preview.bytes
    assert list(CheckpointValue.objects.filter(thread=thread).values_list("version", flat=True)) == ["2"]
    assert read(alice, "c3").checkpoint["channel_values"]["documents"] == DOCUMENTS[:3]
    assert _unheld() == []


def test_the_release_rule_counts_every_value_of_the_threads_it_releases(alice):
    _history(alice)
    age_thread("st", 40)
    retention.retention_policy_save(actor=None, agent_code="", release_idle_days=30, keep_checkpoints=1)
    preview = retention.retention_preview().total
    assert (preview.checkpoints, preview.checkpoint_values) == (3, 2)
    run = retention.retention_apply()
    assert (run.counts["checkpoints"], run.counts["checkpoint_values"], run.counts["bytes"]) == (3, 2, preview.bytes)
    assert not CheckpointValue.objects.exists()


def test_the_purge_counts_the_values_of_the_checkpoints_holding_purged_blocks(alice):
    put(alice, "c1", {"messages": conversation(4), "documents": DOCUMENTS}, {"messages": "1", "documents": "1"})
    put(alice, "c2", {"messages": [human(7)], "documents": DOCUMENTS[:2]}, {"messages": "2", "documents": "2"}, parent="c1")
    age_archived("st", 40)
    retention.retention_policy_save(actor=None, agent_code="", purge_archived_days=30)
    preview = retention.retention_preview().total
    assert (preview.checkpoints, preview.checkpoint_values, preview.blocks) == (1, 1, 4)
    run = retention.retention_apply()
    assert (run.counts["checkpoint_values"], run.counts["bytes"]) == (1, preview.bytes)
    assert list(CheckpointValue.objects.values_list("version", flat=True)) == ["2"]


def test_the_erase_preview_and_receipt_count_the_values(alice, admin_user):
    _history(alice)
    count = CheckpointValue.objects.count()
    preview = erase.user_erase_preview(actor=admin_user, username="alice")
    assert preview["checkpoint_values"] == count == 2
    size = CheckpointValue.objects.aggregate(size=payload_bytes("value"))["size"]
    CheckpointValue.objects.filter(version="2").delete()
    smaller = erase.user_erase_preview(actor=admin_user, username="alice")
    assert smaller["checkpoint_values"] == 1 and preview["bytes"] - smaller["bytes"] == size - CheckpointValue.objects.aggregate(
        size=payload_bytes("value"))["size"] > 0
    receipt = erase.user_erase(actor=admin_user, username="alice")
    assert receipt["counts"]["checkpoint_values"] == 1 and not CheckpointValue.objects.exists()


def test_the_bulk_preview_counts_the_values_and_a_purge_or_release_removes_them(alice, admin_user):
    _history(alice, "b1")
    _history(alice, "b2")
    impact = bulk.bulk_preview(actor=admin_user, action="purge", selection=bulk.Selection(ids=("b1", "b2")))
    assert impact.checkpoint_values == 4 and impact.as_dict()["checkpoint_values"] == 4
    bulk.bulk_run(job_id=bulk.bulk_start(actor=admin_user, action="release", selection=bulk.Selection(ids=("b1",))).pk)
    bulk.bulk_run(job_id=bulk.bulk_start(actor=admin_user, action="purge", selection=bulk.Selection(ids=("b2",))).pk)
    assert not CheckpointValue.objects.exists()


@pytest.mark.parametrize(
    "remove",
    [
        pytest.param(lambda a: lifecycle.checkpoint_delete_thread(actor=a, thread_id="st"), id="delete_thread"),
        pytest.param(lambda a: lifecycle.checkpoint_prune(actor=a, thread_ids=["st"], strategy="delete"), id="prune-delete"),
        pytest.param(lambda a: lifecycle.checkpoint_prune(actor=a, thread_ids=["st"]), id="prune-keep_latest"),
        pytest.param(lambda a: lifecycle.checkpoint_delete_for_runs(actor=a, run_ids=["r1"]), id="delete_for_runs"),
        pytest.param(lambda a: thread_services.thread_delete(actor=a, thread_id="st"), id="thread_delete"),
    ],
)
def test_no_removal_path_leaves_a_value_no_checkpoint_holds(alice, remove):
    _history(alice)
    lifecycle.checkpoint_copy_thread(actor=alice, source_thread_id="st", target_thread_id="st-copy")
    assert not CheckpointValue.objects.filter(thread__thread_id="st-copy").exists()  # the copy holds its values itself
    remove(alice)
    assert _unheld() == []
    for row in Checkpoint.objects.filter(thread__thread_id="st"):
        assert read(alice, row.checkpoint_id).checkpoint["channel_values"]["documents"] in (DOCUMENTS, DOCUMENTS[:3])
    assert read(alice, "c3", thread_id="st-copy").checkpoint["channel_values"]["documents"] == DOCUMENTS[:3]


def test_the_release_removes_every_value(alice, admin_user):
    _history(alice)
    lifecycle.checkpoint_release(actor=admin_user, thread_id="st")
    assert not CheckpointValue.objects.exists()


def test_a_replacement_in_place_drops_the_value_it_no_longer_holds_unless_another_checkpoint_does(alice):
    _history(alice)
    # c3 replaced by a put with its id (LangGraph's upsert): documents@2 is held by nobody now.
    put(alice, "c3", {"documents": DOCUMENTS[:4]}, {"documents": "3"}, parent="c2")
    assert sorted(CheckpointValue.objects.values_list("version", flat=True)) == ["1", "3"]
    # c2 replaced (PUT): documents@1 stays, c1 still holds it.
    data = svc.checkpoint_input(checkpoint=lg("c2", {"documents": DOCUMENTS[:5]}, {"documents": "4"}), parent_checkpoint_id="c1")
    svc.checkpoint_replace(actor=alice, thread_id="st", checkpoint_id="c2", data=data)
    assert sorted(CheckpointValue.objects.values_list("version", flat=True)) == ["1", "3", "4"]
    assert _unheld() == []
    assert read(alice, "c1").checkpoint["channel_values"]["documents"] == DOCUMENTS
    assert read(alice, "c2").checkpoint["channel_values"]["documents"] == DOCUMENTS[:5]


def test_a_retried_put_reads_nothing_more(alice):
    """A put again with the same values (LangGraph's retry) reads nothing to find values it let go:
    it costs a put without values by version and the value's insert (conflicts ignored)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    _history(alice)
    put(alice, "p1", {"n": 1}, {"n": "1"}, thread_id="plain")
    counts = []
    for thread_id, checkpoint_id, values, versions, parent in (
        ("st", "c3", {"documents": DOCUMENTS[:3]}, {"documents": "2"}, "c2"),
        ("plain", "p1", {"n": 1}, {"n": "1"}, None),
    ):
        with CaptureQueriesContext(connection) as queries:
            put(alice, checkpoint_id, values, versions, thread_id=thread_id, parent=parent)
        counts.append(len(queries))
    assert counts[0] == counts[1] + 1
    assert CheckpointValue.objects.count() == 2
