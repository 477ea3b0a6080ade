"""What a checkpoint stores (docs/checkpoints.md, "Storage"): large channel values once per
version, messages inside Send packets and task writes by reference; every checkpoint and
write reads back exactly as it was put, through every read, a replacement, a copy and a
prune; bad markers are 400s, writes that cannot be resolved 412s, and nothing is written."""

from __future__ import annotations

import copy

import pytest

from memoryadmin.errors import Forbidden, InvalidInput, PreconditionFailed
from sessions_app.checkpoints import lifecycle
from sessions_app.checkpoints import selectors as cs
from sessions_app.checkpoints import services as svc
from sessions_app.models import Checkpoint, CheckpointValue, CheckpointWrite

from .test_langgraph_conversation_api import conversation, human

pytestmark = pytest.mark.django_db

DOCUMENTS = [f"a document of the retrieval step, long enough to weigh: {i} " * 4 for i in range(6)]


def lg(checkpoint_id: str, values: dict, versions: dict) -> dict:
    return {"v": 4, "id": checkpoint_id, "ts": "2026-12-01T00:00:00+00:00", "channel_values": values,
            "channel_versions": versions, "versions_seen": {}}


def put(actor, checkpoint_id, values, versions, *, thread_id="st", parent=None, refs=None, messages=None, ns=""):
    data = svc.checkpoint_input(
        checkpoint=lg(checkpoint_id, values, versions), metadata={"step": 1}, parent_checkpoint_id=parent,
        refs=refs, messages=messages, checkpoint_ns=ns,
    )
    return svc.checkpoint_put(actor=actor, thread_id=thread_id, data=data, checkpoint_id=checkpoint_id)


def writes(actor, checkpoint_id, items, *, thread_id="st", task_id="task-1"):
    data = svc.write_input(task_id=task_id, writes=items)
    return svc.checkpoint_put_writes(actor=actor, thread_id=thread_id, checkpoint_id=checkpoint_id, data=data)


def read(actor, checkpoint_id, thread_id="st", ns=""):
    return cs.checkpoint_get(actor=actor, thread_id=thread_id, checkpoint_id=checkpoint_id, checkpoint_ns=ns)


def send(messages):
    """A Send packet of the prebuilt ReAct agent, as MemoryAdminSaver's codec writes it."""
    return {"lc": 2, "type": "constructor", "id": ["langgraph", "types", "Send"],
            "kwargs": {"node": "tools", "arg": {"__type": "tool_call_with_context",
                                                "tool_call": {"name": "multiply", "args": {"a": 6, "b": 7}, "id": "call-1"},
                                                "state": {"messages": messages}}}}


def marker(count, append=(), channel="messages", checkpoint=None):
    inner = {"channel": channel, "count": count, "append": list(append)}
    if checkpoint is not None:
        inner["checkpoint"] = checkpoint
    return {"$messages": inner}


# --- values by version --------------------------------------------------------------------------


def test_a_large_value_is_stored_once_per_version_and_every_checkpoint_reads_it_back(alice):
    put(alice, "c1", {"documents": DOCUMENTS, "n": 1}, {"documents": "1", "n": "1"})
    put(alice, "c2", {"documents": DOCUMENTS, "n": 2}, {"documents": "1", "n": "2"}, parent="c1")
    put(alice, "c3", {"documents": DOCUMENTS[:3], "n": 3}, {"documents": "2", "n": "3"}, parent="c2")
    assert CheckpointValue.objects.count() == 2  # documents@1, documents@2; `n` is small: in the row
    for row in Checkpoint.objects.all():
        assert "documents" not in row.checkpoint["channel_values"] and "n" in row.checkpoint["channel_values"]
    assert read(alice, "c2").checkpoint["channel_values"] == {"documents": DOCUMENTS, "n": 2}
    assert read(alice, "c3").checkpoint["channel_values"] == {"documents": DOCUMENTS[:3], "n": 3}
    listed = cs.checkpoint_list(actor=alice, thread_id="st").checkpoints
    assert [row.checkpoint["channel_values"]["documents"] for row in listed] == [DOCUMENTS[:3], DOCUMENTS, DOCUMENTS]


def test_a_version_reused_for_another_value_still_reads_back_exactly(alice):
    put(alice, "c1", {"documents": DOCUMENTS}, {"documents": "1"})
    put(alice, "c2", {"documents": DOCUMENTS[::-1]}, {"documents": "1"}, parent="c1")
    assert read(alice, "c1").checkpoint["channel_values"]["documents"] == DOCUMENTS
    assert read(alice, "c2").checkpoint["channel_values"]["documents"] == DOCUMENTS[::-1]


def test_replace_in_place_copy_and_prune_keep_the_values_each_checkpoint_holds(alice, bob):
    put(alice, "c1", {"documents": DOCUMENTS}, {"documents": "1"})
    put(alice, "c2", {"documents": DOCUMENTS}, {"documents": "1"}, parent="c1")
    data = svc.checkpoint_input(checkpoint=lg("c2", {"documents": DOCUMENTS[:2]}, {"documents": "2"}), parent_checkpoint_id="c1")
    svc.checkpoint_replace(actor=alice, thread_id="st", checkpoint_id="c2", data=data)
    assert read(alice, "c2").checkpoint["channel_values"]["documents"] == DOCUMENTS[:2]
    assert read(alice, "c1").checkpoint["channel_values"]["documents"] == DOCUMENTS
    lifecycle.checkpoint_copy_thread(actor=alice, source_thread_id="st", target_thread_id="st-copy")
    assert read(alice, "c1", thread_id="st-copy").checkpoint["channel_values"]["documents"] == DOCUMENTS
    lifecycle.checkpoint_prune(actor=alice, thread_ids=["st"], strategy="keep_latest")
    # documents@1 went with c1; documents@2 stays with c2, and the copy keeps what it holds.
    assert list(CheckpointValue.objects.filter(thread__thread_id="st").values_list("version", flat=True)) == ["2"]
    assert read(alice, "c2").checkpoint["channel_values"]["documents"] == DOCUMENTS[:2]
    assert read(alice, "c1", thread_id="st-copy").checkpoint["channel_values"]["documents"] == DOCUMENTS
    lifecycle.checkpoint_delete_thread(actor=alice, thread_id="st")
    assert not CheckpointValue.objects.filter(thread__thread_id="st").exists()


def test_the_latest_read_costs_the_same_queries_with_values_by_version(alice, django_assert_num_queries):
    for thread_id, count in (("q-few", 2), ("q-many", 40)):
        put(alice, "c1", {"documents": DOCUMENTS * count, "other": DOCUMENTS}, {"documents": "1", "other": "1"}, thread_id=thread_id)
    # thread, checkpoint, writes, values by version
    for thread_id in ("q-few", "q-many"):
        with django_assert_num_queries(4):
            found = cs.checkpoint_get(actor=alice, thread_id=thread_id)
        assert found.checkpoint["channel_values"]["other"] == DOCUMENTS


# --- messages by reference ----------------------------------------------------------------------


def test_a_send_packet_holds_the_checkpoints_own_messages_by_reference(alice):
    messages = conversation(6)
    put(alice, "c1", {"messages": messages, "__pregel_tasks": [send(marker(6)), send(marker(4, [human(9)]))]},
        {"messages": "1", "__pregel_tasks": "1"}, refs=["__pregel_tasks"])
    row = Checkpoint.objects.get(checkpoint_id="c1")
    assert row.refs == ["__pregel_tasks"] and row.messages_ref["count"] == 6
    assert "messages" not in row.checkpoint["channel_values"]
    tasks = read(alice, "c1").checkpoint["channel_values"]["__pregel_tasks"]
    assert tasks == [send(messages), send(messages[:4] + [human(9)])]


def test_a_task_write_refers_to_a_stored_checkpoint_and_reads_back_exactly(alice):
    messages = conversation(6)
    put(alice, "c1", {"messages": messages}, {"messages": "1"})
    put(alice, "c2", {"messages": messages + [human(6)]}, {"messages": "2"}, parent="c1")
    value = send(marker(6, [human(6), human(7)], checkpoint="c1"))
    writes(alice, "c2", [{"channel": "messages", "value": [human(7)]}, {"channel": "__pregel_tasks", "value": value, "refs": True}])
    stored = CheckpointWrite.objects.get(channel="__pregel_tasks")
    assert stored.refers and "ref" in stored.value["kwargs"]["arg"]["state"]["messages"]["$messages"]
    pending = {write.channel: write.value for write in read(alice, "c2").pending}
    assert pending["__pregel_tasks"] == send(messages + [human(6), human(7)])
    assert pending["messages"] == [human(7)]
    # Whatever becomes of c1, the write still reads back: it names c1's blocks, not c1.
    svc.checkpoint_replace(
        actor=alice, thread_id="st", checkpoint_id="c1",
        data=svc.checkpoint_input(checkpoint=lg("c1", {"messages": [human(0)]}, {"messages": "1"})),
    )
    pending = {write.channel: write.value for write in read(alice, "c2").pending}
    assert pending["__pregel_tasks"] == send(messages + [human(6), human(7)])
    lifecycle.checkpoint_copy_thread(actor=alice, source_thread_id="st", target_thread_id="st-copy")
    copied = {write.channel: write.value for write in read(alice, "c2", thread_id="st-copy").pending}
    assert copied["__pregel_tasks"] == send(messages + [human(6), human(7)])


def test_a_write_referring_to_a_checkpoint_holding_its_messages_itself_is_stored_whole(alice):
    put(alice, "c1", {"messages": conversation(3)}, {"messages": "1"}, ns="sub:1")  # a subgraph: messages in the row
    data = svc.write_input(task_id="t", writes=[{"channel": "x", "value": marker(2, [human(5)]), "refs": True}])
    svc.checkpoint_put_writes(actor=alice, thread_id="st", checkpoint_id="c1", checkpoint_ns="sub:1", data=data)
    stored = CheckpointWrite.objects.get()
    assert not stored.refers and stored.value == conversation(2) + [human(5)]


def test_writes_that_refer_to_what_the_server_lacks_are_a_412_and_write_nothing(alice):
    put(alice, "c1", {"messages": conversation(2)}, {"messages": "1"})
    for items in (
        [{"channel": "x", "value": marker(1, checkpoint="not-yet"), "refs": True}],  # not stored (yet)
        [{"channel": "x", "value": marker(3), "refs": True}],  # more than c1 holds
        [{"channel": "x", "value": marker(1, channel="other"), "refs": True}],  # a channel c1 does not hold
    ):
        with pytest.raises(PreconditionFailed):
            writes(alice, "c1", [{"channel": "ok", "value": 1}, *items])
    assert not CheckpointWrite.objects.exists()


@pytest.mark.parametrize(
    "items, field",
    [
        ([{"channel": "x", "value": marker(1), "refs": "yes"}], "writes[0].refs"),
        ([{"channel": "x", "value": {"$messages": {"channel": "messages", "count": -1, "append": []}}, "refs": True}], "writes[0].value"),
        ([{"channel": "x", "value": {"$messages": {"count": 1}}, "refs": True}], "writes[0].value"),
        ([{"channel": "x", "value": [{"$messages": {"channel": "messages", "count": 1, "append": "no"}}], "refs": True}], "writes[0].value"),
    ],
)
def test_malformed_write_markers_are_a_400_naming_the_field(alice, items, field):
    put(alice, "c1", {"messages": conversation(2)}, {"messages": "1"})
    with pytest.raises(InvalidInput) as refused:
        writes(alice, "c1", items)
    assert field in refused.value.fields
    assert not CheckpointWrite.objects.exists()


@pytest.mark.parametrize(
    "values, refs, field",
    [
        ({"messages": conversation(2), "t": [marker(1)]}, "t", "refs"),  # not a list
        ({"messages": conversation(2), "t": [marker(1)]}, ["nope"], "refs"),  # a channel not held
        ({"messages": conversation(2), "t": [marker(3)]}, ["t"], "checkpoint.channel_values.t"),  # too many
        ({"messages": conversation(2), "t": [marker(1, channel="t")]}, ["t"], "checkpoint.channel_values.t"),  # itself
        ({"messages": conversation(2), "t": [marker(1, checkpoint="c0")]}, ["t"], "checkpoint.channel_values.t"),  # named
        ({"messages": conversation(2), "t": {"$messages": [], "x": 1}}, ["t"], "checkpoint.channel_values.t"),
    ],
)
def test_malformed_checkpoint_markers_are_a_400_naming_the_field(alice, values, refs, field):
    with pytest.raises(InvalidInput) as refused:
        put(alice, "c1", values, {"messages": "1", "t": "1"}, refs=refs)
    assert field in refused.value.fields
    assert not Checkpoint.objects.exists() and not CheckpointValue.objects.exists()


def test_a_value_shaped_like_a_marker_is_kept_as_it_is_unless_named(alice):
    value = [marker(1)]
    put(alice, "c1", {"messages": conversation(2), "t": copy.deepcopy(value)}, {"messages": "1", "t": "1"})
    assert read(alice, "c1").checkpoint["channel_values"]["t"] == value
    writes(alice, "c1", [{"channel": "x", "value": copy.deepcopy(value)}])
    assert read(alice, "c1").pending[0].value == value


def test_another_members_writes_with_references_are_a_403_and_write_nothing(alice, bob):
    put(alice, "c1", {"messages": conversation(2)}, {"messages": "1"})
    with pytest.raises(Forbidden):
        writes(bob, "c1", [{"channel": "x", "value": marker(2), "refs": True}])
    assert not CheckpointWrite.objects.exists()


def test_reading_writes_with_references_costs_no_more_queries_for_more_messages(alice, django_assert_num_queries):
    for thread_id, count in (("w-few", 4), ("w-many", 200)):
        put(alice, "c1", {"messages": conversation(count)}, {"messages": "1"}, thread_id=thread_id)
        put(alice, "c2", {"messages": conversation(count) + [human(1)]}, {"messages": "2"}, thread_id=thread_id, parent="c1")
        writes(alice, "c2", [{"channel": "t", "value": send(marker(count, checkpoint="c1")), "refs": True}], thread_id=thread_id)
    # thread, checkpoint, writes, blocks (the checkpoint's messages and the writes' together)
    for thread_id, count in (("w-few", 4), ("w-many", 200)):
        with django_assert_num_queries(4):
            found = cs.checkpoint_get(actor=alice, thread_id=thread_id)
        assert found.pending[0].value == send(conversation(count))


def test_verify_is_clean_and_names_a_value_by_version_that_is_gone(alice):
    import io

    from django.core.management import call_command

    put(alice, "c1", {"documents": DOCUMENTS}, {"documents": "1"})
    out = io.StringIO()
    call_command("verify", stdout=out)
    assert "0 problem(s)" in out.getvalue()
    CheckpointValue.objects.all()._raw_delete(CheckpointValue.objects.db)
    out = io.StringIO()
    with pytest.raises(SystemExit):
        call_command("verify", stdout=out)
    assert "missing_value" in out.getvalue() and "c1" in out.getvalue()
    # A read still answers, without the value it no longer has.
    assert read(alice, "c1").checkpoint["channel_values"] == {}
