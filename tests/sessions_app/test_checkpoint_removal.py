"""Removing checkpoints: one implementation (sessions_app/checkpoints/removal.py), one behaviour.

Release, delete_thread, prune, delete_for_runs, the bulk release, retention and
erasing a user all remove checkpoints through it; keep-newest-N is the same for
prune and retention, and a kept checkpoint whose parent went becomes a root.
"""

from __future__ import annotations

import pytest

from memoryadmin.operations import bulk, erase, retention
from sessions_app.checkpoints import lifecycle, removal
from sessions_app.models import Checkpoint, CheckpointWrite, Thread

from ..ops.helpers import age_thread, broken_parents, checkpoints
from .test_checkpoint_services import put, write

pytestmark = pytest.mark.django_db


def chain(actor, thread_id="t1", names=("a", "b", "c", "d"), ns="", run_ids=None):
    parent = None
    for index, name in enumerate(names):
        metadata = {"run_id": run_ids[index]} if run_ids else None
        put(actor, thread_id=thread_id, checkpoint_id=name, parent=parent, ns=ns, metadata=metadata)
        write(actor, name, [("ch", name)], thread_id=thread_id, ns=ns)
        parent = name


def parents(thread_id="t1", ns=""):
    rows = Checkpoint.objects.filter(thread__thread_id=thread_id, checkpoint_ns=ns).order_by("id")
    return [(row.checkpoint_id, row.parent_checkpoint_id) for row in rows]


def test_prune_keep_latest_repairs_the_parent_of_what_it_keeps(alice):
    chain(alice)
    chain(alice, ns="child:1", names=("x", "y"))
    assert lifecycle.checkpoint_prune(actor=alice, thread_ids=["t1"], strategy="keep_latest")["checkpoints"] == 4
    assert parents() == [("d", "")] and parents(ns="child:1") == [("y", "")]
    assert broken_parents() == []
    assert sorted(CheckpointWrite.objects.values_list("checkpoint_id", flat=True)) == ["d", "y"]


def test_prune_and_retention_keep_the_newest_n_the_same_way(alice):
    """The same chains, pruned by LangGraph's prune and by a keep-1 retention policy, end up equal."""
    for thread_id in ("by-prune", "by-retention"):
        chain(alice, thread_id=thread_id)
        chain(alice, thread_id=thread_id, ns="child:1", names=("x", "y", "z"))
    lifecycle.checkpoint_prune(actor=alice, thread_ids=["by-prune"], strategy="keep_latest")
    Thread.objects.filter(thread_id="by-prune").update(agent_code="not-retained")
    retention.retention_policy_save(actor=None, agent_code="", keep_checkpoints=1)
    retention.retention_policy_save(actor=None, agent_code="not-retained")
    retention.retention_apply(batch=1)

    def state(thread_id):
        rows = Checkpoint.objects.filter(thread__thread_id=thread_id).order_by("checkpoint_ns", "id")
        kept = [(r.checkpoint_ns, r.checkpoint_id, r.parent_checkpoint_id) for r in rows]
        writes = sorted(CheckpointWrite.objects.filter(thread__thread_id=thread_id).values_list("checkpoint_id", flat=True))
        return kept, writes

    assert state("by-prune") == state("by-retention") == ([("", "d", ""), ("child:1", "z", "")], ["d", "z"])


def test_delete_for_runs_repairs_the_chain_it_cuts(alice):
    chain(alice, run_ids=["run-1", "run-2", "run-2", "run-3"])
    assert lifecycle.checkpoint_delete_for_runs(actor=alice, run_ids=["run-2"]) == 2
    # d's parent (c) went with run-2: d is now the root of what follows it; a stays a root.
    assert parents() == [("a", ""), ("d", "")]
    assert broken_parents() == []
    assert sorted(CheckpointWrite.objects.values_list("checkpoint_id", flat=True)) == ["a", "d"]


def test_a_thread_left_without_checkpoints_keeps_no_pending_writes(alice):
    chain(alice, names=("a",), run_ids=["run-1"])
    write(alice, "not-yet-stored", [("ch", "early")])  # a write that arrived before its checkpoint
    assert lifecycle.checkpoint_delete_for_runs(actor=alice, run_ids=["run-1"]) == 1
    assert not CheckpointWrite.objects.exists()


def test_keeping_the_newest_leaves_writes_whose_checkpoint_may_still_come(alice):
    chain(alice, names=("a", "b"))
    write(alice, "in-flight", [("ch", "early")])
    lifecycle.checkpoint_prune(actor=alice, thread_ids=["t1"], strategy="keep_latest")
    assert sorted(CheckpointWrite.objects.values_list("checkpoint_id", flat=True)) == ["b", "in-flight"]


def test_retention_release_removes_pending_writes_as_a_release_does(alice):
    checkpoints(alice, "idle", 3)
    write(alice, "never-stored", [("ch", "orphan")], thread_id="idle")
    age_thread("idle", 90)
    retention.retention_policy_save(actor=None, agent_code="", release_idle_days=30)
    preview = retention.retention_preview().total
    run = retention.retention_apply(batch=2)
    assert preview.pending_writes == run.counts["pending_writes"] == 4
    assert preview.bytes == run.counts["bytes"]
    assert not CheckpointWrite.objects.filter(thread__thread_id="idle").exists()


def test_every_path_that_removes_checkpoints_goes_through_removal(alice, admin_user, monkeypatch):
    calls = []
    real = removal.checkpoints_remove

    def spy(checkpoints, **kwargs):
        calls.append(1)
        return real(checkpoints, **kwargs)

    monkeypatch.setattr(removal, "checkpoints_remove", spy)  # thread_checkpoints_remove and keep_newest call it
    for module in (lifecycle, retention, erase):
        if hasattr(module, "checkpoints_remove"):
            monkeypatch.setattr(module, "checkpoints_remove", spy)
    for thread_id in ("t1", "t2", "t3", "t4", "t5", "t6"):
        chain(alice, thread_id=thread_id, names=("a", "b"), run_ids=["run-1", "run-2"])
    age_thread("t6", 90)

    def goes_through_removal(run):
        before = len(calls)
        run()
        assert len(calls) > before

    goes_through_removal(lambda: lifecycle.checkpoint_release(actor=admin_user, thread_id="t1"))
    goes_through_removal(lambda: lifecycle.checkpoint_delete_thread(actor=alice, thread_id="t2"))
    goes_through_removal(lambda: lifecycle.checkpoint_prune(actor=alice, thread_ids=["t3"], strategy="keep_latest"))
    goes_through_removal(lambda: lifecycle.checkpoint_prune(actor=alice, thread_ids=["t3"], strategy="delete"))
    goes_through_removal(lambda: lifecycle.checkpoint_delete_for_runs(actor=alice, run_ids=["run-1"]))
    job = bulk.bulk_start(actor=admin_user, action="release", selection=bulk.Selection(ids=("t4",)))
    goes_through_removal(lambda: bulk.bulk_run(job_id=job.pk))
    retention.retention_policy_save(actor=None, agent_code="", keep_checkpoints=1, release_idle_days=30)
    chain(alice, thread_id="t5", names=("c", "d"))
    goes_through_removal(retention.retention_apply)
    assert not Checkpoint.objects.filter(thread__thread_id="t6").exists()  # the release rule, through removal too
    chain(alice, thread_id="t5", names=("e",))
    write(alice, "never-stored", [("ch", "orphan")], thread_id="t5")
    receipt = {}
    goes_through_removal(lambda: receipt.update(erase.user_erase(actor=admin_user, username="alice", batch=1)))
    # The receipt counts every checkpoint and pending write the removals took.
    assert receipt["counts"]["checkpoints"] == 2 and receipt["counts"]["pending_writes"] == 3
    assert not CheckpointWrite.objects.exists()


def test_no_module_deletes_checkpoints_on_its_own():
    """Outside removal.py nothing deletes checkpoint rows itself (a thread's delete takes everything it holds)."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    offenders = []
    for folder in ("memoryadmin", "sessions_app", "store_app", "graphs_app"):
        for path in (root / folder).rglob("*.py"):
            if path.name == "removal.py" or "migrations" in path.parts:
                continue
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if "Checkpoint" in line and ".delete(" in line:
                    offenders.append(f"{path.relative_to(root)}:{number}: {line.strip()}")
    assert offenders == []
