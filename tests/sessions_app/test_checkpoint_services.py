"""Checkpoint services: the saver's rules (docs/checkpoints.md, C1-C5) and LangGraph's on top."""

from __future__ import annotations

import pytest
from langgraph.checkpoint.base import WRITES_IDX_MAP as LANGGRAPH_WRITES_IDX_MAP

from memoryadmin.errors import Conflict, Forbidden, InvalidInput, NotFound
from memoryadmin.models import AuditEvent
from sessions_app.checkpoints import selectors as cs
from sessions_app.checkpoints import services as svc
from sessions_app.models import Checkpoint, CheckpointWrite, Thread
from sessions_app.checkpoints import containment
from sessions_app.checkpoints import lifecycle
from sessions_app.checkpoints import wire

pytestmark = pytest.mark.django_db


def put(actor, thread_id="t1", checkpoint_id=None, state=None, ns="", parent=None, metadata=None, **extra):
    data = svc.checkpoint_input(
        checkpoint={"channel_values": state or {}},
        metadata=metadata or {},
        checkpoint_ns=ns,
        parent_checkpoint_id=parent,
        **extra,
    )
    return svc.checkpoint_put(actor=actor, thread_id=thread_id, data=data, checkpoint_id=checkpoint_id)


def ids(actor, thread_id="t1", **kwargs):
    page = cs.checkpoint_list(actor=actor, thread_id=thread_id, **kwargs)
    return [row.checkpoint_id for row in page.checkpoints]


def write(actor, checkpoint_id, writes, task_id="task-1", thread_id="t1", ns=""):
    return svc.checkpoint_put_writes(
        actor=actor,
        thread_id=thread_id,
        checkpoint_id=checkpoint_id,
        checkpoint_ns=ns,
        data=svc.write_input(task_id=task_id, writes=[{"channel": c, "value": v} for c, v in writes]),
    )


# --- the saver (rules C1-C5) -------------------------------------------------------------------


def test_a_put_without_id_pushes_a_new_latest_checkpoint_and_creates_the_thread(alice):
    first = put(alice, state={"n": 1})
    second = put(alice, state={"n": 2})
    assert first.created and second.created and first.checkpoint_id != second.checkpoint_id
    assert Thread.objects.get(thread_id="t1").owner == alice
    latest = cs.checkpoint_get(actor=alice, thread_id="t1")
    assert latest.checkpoint_id == second.checkpoint_id and latest.checkpoint["channel_values"] == {"n": 2}


def test_replacing_by_id_keeps_the_history_order(alice):
    for name in ("a", "b", "c"):
        put(alice, checkpoint_id=name, state={"v": name})
    data = svc.checkpoint_input(checkpoint={"channel_values": {"v": "b2"}}, metadata={"edited": True})
    result = svc.checkpoint_replace(actor=alice, thread_id="t1", checkpoint_id="b", data=data)
    assert not result.created
    assert ids(alice) == ["c", "b", "a"]
    replaced = cs.checkpoint_get(actor=alice, thread_id="t1", checkpoint_id="b")
    assert replaced.checkpoint == {"channel_values": {"v": "b2"}} and replaced.metadata == {"edited": True}
    assert cs.checkpoint_get(actor=alice, thread_id="t1").checkpoint_id == "c"


def test_replacing_an_unknown_id_is_404_and_writes_nothing(alice):
    put(alice, checkpoint_id="a")
    before = list(Checkpoint.objects.values_list("checkpoint_id", "checkpoint", "updated_at"))
    data = svc.checkpoint_input(checkpoint={"channel_values": {"x": 1}})
    with pytest.raises(NotFound):
        svc.checkpoint_replace(actor=alice, thread_id="t1", checkpoint_id="nope", data=data)
    with pytest.raises(NotFound):
        svc.checkpoint_replace(actor=alice, thread_id="no-such-thread", checkpoint_id="a", data=data)
    assert list(Checkpoint.objects.values_list("checkpoint_id", "checkpoint", "updated_at")) == before
    assert not Thread.objects.filter(thread_id="no-such-thread").exists()


def test_a_put_with_an_existing_id_is_an_idempotent_upsert_in_place(alice):
    put(alice, checkpoint_id="a", state={"v": 1})
    put(alice, checkpoint_id="b", state={"v": 2})
    again = put(alice, checkpoint_id="a", state={"v": 1})
    assert not again.created
    assert ids(alice) == ["b", "a"] and Checkpoint.objects.count() == 2


def test_get_by_id_or_latest_and_404s(alice):
    with pytest.raises(NotFound):
        cs.checkpoint_get(actor=alice, thread_id="t1")
    put(alice, checkpoint_id="a")
    assert cs.checkpoint_get(actor=alice, thread_id="t1", checkpoint_id="a").checkpoint_id == "a"
    with pytest.raises(NotFound):
        cs.checkpoint_get(actor=alice, thread_id="t1", checkpoint_id="zzz")
    with pytest.raises(NotFound):
        cs.checkpoint_get(actor=alice, thread_id="t1", checkpoint_ns="child")


def test_list_is_newest_first_with_limit_and_before(alice):
    for n in range(6):
        put(alice, checkpoint_id=f"c{n}")
    assert ids(alice) == ["c5", "c4", "c3", "c2", "c1", "c0"]
    page = cs.checkpoint_list(actor=alice, thread_id="t1", limit=2)
    assert [r.checkpoint_id for r in page.checkpoints] == ["c5", "c4"] and page.next_before == "c4"
    page = cs.checkpoint_list(actor=alice, thread_id="t1", limit=3, before="c4")
    assert [r.checkpoint_id for r in page.checkpoints] == ["c3", "c2", "c1"] and page.has_more
    page = cs.checkpoint_list(actor=alice, thread_id="t1", limit=3, before="c1")
    assert [r.checkpoint_id for r in page.checkpoints] == ["c0"] and page.next_before is None
    with pytest.raises(NotFound):
        cs.checkpoint_list(actor=alice, thread_id="t1", before="unknown")


def test_release_returns_what_it_removed_and_removes_it(alice, admin_user):
    put(alice, checkpoint_id="a", state={"v": 1})
    put(alice, checkpoint_id="b", state={"v": 2}, parent="a")
    put(alice, checkpoint_id="s", ns="child:1")
    write(alice, "b", [("ch", "x")])
    tag = lifecycle.checkpoint_release(actor=admin_user, thread_id="t1")
    assert tag["thread_id"] == "t1"
    assert [c["checkpoint_id"] for c in tag["checkpoints"]] == ["s", "b", "a"]
    assert tag["checkpoints"][1]["pending_writes"][0]["value"] == "x"
    assert tag["checkpoints"][1]["parent_checkpoint_id"] == "a"
    assert not Checkpoint.objects.exists() and not CheckpointWrite.objects.exists()
    assert Thread.objects.filter(thread_id="t1").exists()
    event = AuditEvent.objects.get(action="checkpoint.release")
    assert event.detail["checkpoints"] == 3 and event.target == "thread:t1"


def test_release_is_for_admins_only(alice, operator):
    put(alice, checkpoint_id="a")
    for actor in (alice, operator):
        with pytest.raises(Forbidden):
            lifecycle.checkpoint_release(actor=actor, thread_id="t1")
    assert Checkpoint.objects.count() == 1


# --- LangGraph's semantics -----------------------------------------------------------------


def test_namespaces_are_separate_histories(alice):
    put(alice, checkpoint_id="root-1")
    put(alice, checkpoint_id="child-1", ns="child:1")
    put(alice, checkpoint_id="same", ns="")
    put(alice, checkpoint_id="same", ns="child:1")
    assert ids(alice, checkpoint_ns="") == ["same", "root-1"]
    assert ids(alice, checkpoint_ns="child:1") == ["same", "child-1"]
    assert len(ids(alice)) == 4
    assert cs.checkpoint_get(actor=alice, thread_id="t1", checkpoint_ns="child:1").checkpoint_id == "same"


def test_writes_are_idempotent_per_task_and_index_and_special_channels_are_upserted(alice):
    put(alice, checkpoint_id="a")
    assert write(alice, "a", [("ch", 1), ("other", 2)]) == 2
    assert write(alice, "a", [("ch", 99), ("other", 98)]) == 0  # a retried task writes nothing twice
    write(alice, "a", [("__error__", "first failure"), ("__interrupt__", {"q": 1})])
    write(alice, "a", [("__error__", "second failure")])
    rows = {(w.idx, w.channel): w.value for w in CheckpointWrite.objects.all()}
    assert rows == {(0, "ch"): 1, (1, "other"): 2, (-1, "__error__"): "second failure", (-3, "__interrupt__"): {"q": 1}}
    write(alice, "a", [("__error__", None), ("__interrupt__", None)])  # replaced by a JSON null, kept as one
    assert {(w.idx, w.value) for w in CheckpointWrite.objects.filter(idx__lt=0)} == {(-1, None), (-3, None)}


def test_the_special_write_indexes_are_langgraphs():
    assert wire.WRITES_IDX_MAP == LANGGRAPH_WRITES_IDX_MAP


def test_writes_may_arrive_before_their_checkpoint(alice):
    # LangGraph's loop sends a task's writes concurrently with the checkpoint's put.
    write(alice, "not-yet", [("ch", "early")], thread_id="fresh")
    put(alice, thread_id="fresh", checkpoint_id="not-yet")
    got = cs.checkpoint_get(actor=alice, thread_id="fresh", checkpoint_id="not-yet")
    assert [(w.channel, w.value) for w in got.pending] == [("ch", "early")]


def test_writes_keep_json_null_and_come_in_replay_order(alice):
    put(alice, checkpoint_id="a")
    write(alice, "a", [("b", None)], task_id="task-b")
    write(alice, "a", [("a1", 1), ("a2", 2)], task_id="task-a")
    got = cs.checkpoint_get(actor=alice, thread_id="t1", checkpoint_id="a")
    assert [(w.task_id, w.idx, w.value) for w in got.pending] == [("task-a", 0, 1), ("task-a", 1, 2), ("task-b", 0, None)]


def test_metadata_filter_is_containment(alice):
    put(alice, checkpoint_id="a", metadata={"source": "input", "step": -1, "tags": ["x", "y"], "writes": {"agent": {"n": 1}}})
    put(alice, checkpoint_id="b", metadata={"source": "loop", "step": 1, "flag": True, "tags": ["y"]})
    put(alice, checkpoint_id="c", metadata={"source": "loop", "step": 2, "flag": 1, "none": None})
    assert ids(alice, metadata={"source": "loop"}) == ["c", "b"]
    assert ids(alice, metadata={"source": "loop", "step": 1}) == ["b"]
    assert ids(alice, metadata={"tags": ["y"]}) == ["b", "a"]
    assert ids(alice, metadata={"tags": ["x"]}) == ["a"]
    assert ids(alice, metadata={"writes": {"agent": {}}}) == ["a"]
    assert ids(alice, metadata={"flag": True}) == ["b"]  # true is not 1, on SQLite as on PostgreSQL
    assert ids(alice, metadata={"flag": 1}) == ["c"]
    assert ids(alice, metadata={"none": None}) == ["c"]
    assert ids(alice, metadata={"step": 1.0}) == ["b"]
    assert ids(alice, metadata={"source": "update"}) == []
    assert ids(alice, metadata={"source": "loop"}, limit=1) == ["c"]


def test_json_contains_follows_postgresql():
    doc = {"a": [1, [2, 3], {"b": True}], "s": "x", "n": None}
    assert containment.json_contains(doc, {"a": [[2]]})
    assert containment.json_contains(doc, {"a": [{"b": True}, 1]})
    assert not containment.json_contains(doc, {"a": [{"b": 1}]})
    assert not containment.json_contains(doc, {"a": 1})
    assert containment.json_contains(doc, {"n": None}) and not containment.json_contains(doc, {"s": None})


def test_delete_thread_removes_every_namespace_and_keeps_the_thread(alice):
    put(alice, checkpoint_id="a")
    put(alice, checkpoint_id="b", ns="child:1")
    write(alice, "a", [("ch", 1)])
    assert lifecycle.checkpoint_delete_thread(actor=alice, thread_id="t1") == 2
    assert not Checkpoint.objects.exists() and not CheckpointWrite.objects.exists()
    assert Thread.objects.filter(thread_id="t1").exists()


def test_prune_keep_latest_keeps_one_per_namespace_with_its_writes(alice):
    for name in ("a", "b", "c"):
        put(alice, checkpoint_id=name)
    put(alice, checkpoint_id="x", ns="child:1")
    put(alice, checkpoint_id="y", ns="child:1")
    write(alice, "a", [("ch", "old")])
    write(alice, "c", [("ch", "kept")])
    result = lifecycle.checkpoint_prune(actor=alice, thread_ids=["t1", "missing"], strategy="keep_latest")
    assert result == {"threads": 1, "checkpoints": 3}
    assert sorted(Checkpoint.objects.values_list("checkpoint_id", flat=True)) == ["c", "y"]
    assert list(CheckpointWrite.objects.values_list("checkpoint_id", "value")) == [("c", "kept")]


def test_prune_delete_and_its_ownership(alice, bob, admin_user, operator):
    put(alice, checkpoint_id="a")
    put(bob, thread_id="bobs", checkpoint_id="b")
    with pytest.raises(Forbidden):
        lifecycle.checkpoint_prune(actor=alice, thread_ids=["t1", "bobs"], strategy="delete")
    assert Checkpoint.objects.count() == 2  # nothing pruned, not even alice's own
    with pytest.raises(Forbidden):
        lifecycle.checkpoint_prune(actor=operator, thread_ids=["t1"], strategy="delete")
    with pytest.raises(InvalidInput) as bad:
        lifecycle.checkpoint_prune(actor=alice, thread_ids=["t1"], strategy="everything")
    assert "strategy" in bad.value.fields
    assert lifecycle.checkpoint_prune(actor=admin_user, thread_ids=["t1", "bobs"], strategy="delete")["checkpoints"] == 2


def test_delete_for_runs_touches_only_the_actors_threads(alice, bob):
    put(alice, checkpoint_id="a", metadata={"run_id": "run-1"})
    put(alice, checkpoint_id="b", metadata={"run_id": "run-2"})
    put(alice, checkpoint_id="c", ns="child:1", metadata={"run_id": "run-1"})
    put(bob, thread_id="bobs", checkpoint_id="d", metadata={"run_id": "run-1"})
    write(alice, "a", [("ch", 1)])
    assert lifecycle.checkpoint_delete_for_runs(actor=alice, run_ids=["run-1"]) == 2
    assert sorted(Checkpoint.objects.values_list("checkpoint_id", flat=True)) == ["b", "d"]
    assert not CheckpointWrite.objects.exists()


def test_copy_thread_copies_history_writes_and_metadata(alice, bob):
    lifecycle.thread_create(actor=alice, thread_id="src", metadata={"graph_id": "agent"})
    put(alice, thread_id="src", checkpoint_id="a", state={"v": 1}, metadata={"step": 0})
    put(alice, thread_id="src", checkpoint_id="b", state={"v": 2}, parent="a")
    put(alice, thread_id="src", checkpoint_id="s", ns="child:1")
    write(alice, "b", [("ch", "w")], thread_id="src")
    target = lifecycle.checkpoint_copy_thread(actor=alice, source_thread_id="src", target_thread_id="dst")
    assert target.owner == alice and target.metadata == {"graph_id": "agent"}
    assert ids(alice, "dst") == ids(alice, "src") == ["s", "b", "a"]
    copied = cs.checkpoint_get(actor=alice, thread_id="dst", checkpoint_id="b")
    assert copied.parent_checkpoint_id == "a" and [w.value for w in copied.pending] == ["w"]
    with pytest.raises(Conflict):
        lifecycle.checkpoint_copy_thread(actor=alice, source_thread_id="src", target_thread_id="dst")
    with pytest.raises(Forbidden):
        lifecycle.checkpoint_copy_thread(actor=bob, source_thread_id="src", target_thread_id="bobs-copy")
    with pytest.raises(NotFound):
        lifecycle.checkpoint_copy_thread(actor=alice, source_thread_id="nope", target_thread_id="dst2")
    assert not Thread.objects.filter(thread_id__in=["bobs-copy", "dst2"]).exists()


def test_node_ids_are_read_from_a_langgraph_checkpoint(alice):
    first = {"channel_values": {"__start__": {"x": 1}}, "channel_versions": {"__start__": 1}, "versions_seen": {"__input__": {}}}
    svc.checkpoint_put(actor=alice, thread_id="t1", checkpoint_id="a", data=svc.checkpoint_input(checkpoint=first))
    second = {
        "channel_values": {"x": 1, "branch:to:agent": None},
        "channel_versions": {"__start__": 2, "x": 2, "branch:to:agent": 2},
        "versions_seen": {"__input__": {}, "__start__": {"__start__": 1}},
    }
    svc.checkpoint_put(
        actor=alice, thread_id="t1", checkpoint_id="b", data=svc.checkpoint_input(checkpoint=second, parent_checkpoint_id="a")
    )
    rows = {row.checkpoint_id: (row.node_id, row.next_node_id) for row in Checkpoint.objects.all()}
    assert rows == {"a": ("__input__", "__start__"), "b": ("__start__", "agent")}
    # Given explicitly (a saver that is not LangGraph), they are kept as given.
    put(alice, checkpoint_id="c", node_id="plan", next_node_id="act")
    assert Checkpoint.objects.get(checkpoint_id="c").next_node_id == "act"


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"checkpoint": None}, "checkpoint"),
        ({"checkpoint": [1]}, "checkpoint"),
        ({"checkpoint": {"channel_values": [1]}}, "checkpoint.channel_values"),
        ({"checkpoint": {}, "metadata": "x"}, "metadata"),
        ({"checkpoint": {}, "checkpoint_ns": 5}, "checkpoint_ns"),
        ({"checkpoint": {}, "checkpoint_ns": "x" * 600}, "checkpoint_ns"),
        ({"checkpoint": {}, "parent_checkpoint_id": "has space"}, "parent_checkpoint_id"),
        ({"checkpoint": {}, "node_id": 3}, "node_id"),
        ({"checkpoint": {"channel_values": {"k": "a\x00b"}}}, "checkpoint"),
    ],
)
def test_bad_checkpoint_input_names_the_field(kwargs, field):
    with pytest.raises(InvalidInput) as bad:
        svc.checkpoint_input(**kwargs)
    assert field in bad.value.fields


@pytest.mark.parametrize("checkpoint_id", ["", "a/b", "latest", "x" * 129, 5])
def test_bad_checkpoint_ids_are_refused(alice, checkpoint_id):
    with pytest.raises(InvalidInput):
        put(alice, checkpoint_id=checkpoint_id or "has space")
    assert not Checkpoint.objects.exists()


def test_thread_create_and_metadata_update(alice, bob, operator):
    thread, created = lifecycle.thread_create(actor=alice, metadata={"graph_id": "agent"})
    assert created and len(thread.thread_id) == 36 and thread.metadata == {"graph_id": "agent"}
    with pytest.raises(Conflict):
        lifecycle.thread_create(actor=alice, thread_id=thread.thread_id)
    same, created = lifecycle.thread_create(actor=alice, thread_id=thread.thread_id, if_exists="do_nothing")
    assert same.pk == thread.pk and not created
    with pytest.raises(Forbidden):
        lifecycle.thread_create(actor=bob, thread_id=thread.thread_id, if_exists="do_nothing")
    with pytest.raises(Forbidden):
        lifecycle.thread_create(actor=operator, thread_id="ops")
    updated = lifecycle.thread_update_metadata(actor=alice, thread_id=thread.thread_id, metadata={"topic": "x"})
    assert updated.metadata == {"graph_id": "agent", "topic": "x"}
    with pytest.raises(Forbidden):
        lifecycle.thread_update_metadata(actor=bob, thread_id=thread.thread_id, metadata={"topic": "y"})
    thread.refresh_from_db()
    assert thread.metadata == {"graph_id": "agent", "topic": "x"}


def test_thread_delete_cascades_to_checkpoints_and_writes(alice):
    from sessions_app.threads.services import thread_delete

    put(alice, checkpoint_id="a")
    write(alice, "a", [("ch", 1)])
    thread_delete(actor=alice, thread_id="t1")
    assert not Checkpoint.objects.exists() and not CheckpointWrite.objects.exists()
