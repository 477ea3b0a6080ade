"""The fast paths of the hottest endpoints (docs/checkpoints.md, "Costs"): on PostgreSQL
a step's put in two round trips, a task's writes in one, the latest read in two; exactly what
the general path gives, and the general path whenever something came between."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, connections

from memoryadmin.errors import Forbidden, PreconditionFailed
from sessions_app.checkpoints import latest
from sessions_app.checkpoints import selectors as cs
from sessions_app.checkpoints import services as svc
from sessions_app.models import Block, Checkpoint, CheckpointWrite, Thread

from ..conftest import IS_POSTGRES
from .test_checkpoint_storage import DOCUMENTS, marker, send
from .test_langgraph_conversation_api import conversation, human

pytestmark = pytest.mark.django_db(transaction=True)
postgres_only = pytest.mark.skipif(not IS_POSTGRES, reason="the fast paths are PostgreSQL's; SQLite takes the general path")


def checkpoint(checkpoint_id: str, step: int, values: dict) -> dict:
    return {"v": 4, "id": checkpoint_id, "ts": "2026-12-01T00:00:00+00:00", "channel_values": values,
            "channel_versions": {"messages": str(step), "documents": "1", "step": str(step)},
            "versions_seen": {"agent": {"step": str(step - 1)}}, "updated_channels": ["messages"]}


def put(actor, thread_id, checkpoint_id, step, *, messages=None, delta=None, parent=None, documents=True):
    values = {"step": step}
    if documents:
        values["documents"] = DOCUMENTS
    if messages is not None:
        values["messages"] = messages
    data = svc.checkpoint_input(checkpoint=checkpoint(checkpoint_id, step, values), metadata={"source": "loop", "step": step},
                                parent_checkpoint_id=parent, messages=delta)
    return svc.checkpoint_put(actor=actor, thread_id=thread_id, data=data, checkpoint_id=checkpoint_id)


def write(actor, thread_id, checkpoint_id, items, task_id="task-1"):
    return svc.checkpoint_put_writes(actor=actor, thread_id=thread_id, checkpoint_id=checkpoint_id,
                                     data=svc.write_input(task_id=task_id, writes=[{"channel": c, "value": v} for c, v in items]))


def grown(actor, thread_id, count):
    """A thread of `count` messages; the chain head of its latest checkpoint."""
    return put(actor, thread_id, "c0", 1, messages=conversation(count)).messages["head"]


def in_another_connection(fn):
    """Run `fn` on a connection of its own, committed before this returns (another request's write)."""
    failure = []

    def run():
        try:
            fn()
        except BaseException as exc:  # pragma: no cover - reported below
            failure.append(exc)
        finally:
            connections.close_all()

    worker = threading.Thread(target=run)
    worker.start()
    worker.join()
    assert not failure, failure


@postgres_only
@pytest.mark.parametrize("count", [2, 300])
def test_a_step_costs_two_round_trips_then_one_its_writes_one_and_the_latest_read_two(alice, count, django_assert_num_queries):
    head = grown(alice, f"f-{count}", count)
    svc.checkpoint_put(actor=alice, thread_id="warm", data=svc.checkpoint_input(checkpoint={}), checkpoint_id="w")
    with django_assert_num_queries(2):
        answer = put(alice, f"f-{count}", "c1", 2, delta={"head": head, "append": [human(count)]}, parent="c0")
    with django_assert_num_queries(1):
        assert write(alice, f"f-{count}", "c1", [("step", 3), ("other", 4)]) == 2
    # The next step: what the first left of the thread row is remembered, so no read.
    with django_assert_num_queries(1):
        answer = put(alice, f"f-{count}", "c2", 3, delta={"head": answer.messages["head"], "append": [human(count + 1)]},
                     parent="c1")
    assert Thread.objects.get(thread_id=f"f-{count}").lg_status == "idle"  # no node left to run, no error
    # An error written: the statement, then the thread's status in a transaction of its own
    # (BEGIN, its row locked, the status read and stored, COMMIT: status.py).
    with django_assert_num_queries(1 + 4):
        assert write(alice, f"f-{count}", "c2", [("step", 3), ("__error__", "boom")]) == 2
    assert Thread.objects.get(thread_id=f"f-{count}").lg_status == "error"
    with django_assert_num_queries(2):
        found = latest.checkpoint_latest(actor=alice, thread_id=f"f-{count}")
    assert answer.messages["count"] == count + 2
    assert found.checkpoint["channel_values"]["messages"] == conversation(count) + [human(count), human(count + 1)]
    assert found.checkpoint["channel_values"]["documents"] == DOCUMENTS
    assert [(w.channel, w.value) for w in found.pending] == [("__error__", "boom"), ("step", 3)]
    row = Checkpoint.objects.get(thread__thread_id=f"f-{count}", checkpoint_id="c1")
    assert (row.node_id, row.messages_ref["count"], row.values_ref is not None) == ("agent", count + 1, True)
    assert Thread.objects.get(thread_id=f"f-{count}").active_count == count + 2


@postgres_only
@pytest.mark.parametrize("count", [2, 300])
def test_writes_holding_messages_by_reference_cost_three_statements_in_a_transaction_and_read_back_exactly(alice, count, django_assert_num_queries):
    """A ReAct agent's tool call: its Send packet carries the agent's messages, by reference."""
    head = grown(alice, f"m-{count}", count)
    put(alice, f"m-{count}", "c1", 2, delta={"head": head, "append": [human(count)]}, parent="c0")
    packet = send(marker(count + 1, [human(count + 1)], checkpoint="c1"))
    items = [{"channel": "messages", "value": [human(count + 1)]}, {"channel": "__pregel_tasks", "value": packet, "refs": True}]
    data = svc.write_input(task_id="task-1", writes=items)
    with django_assert_num_queries(5):  # BEGIN, the thread key-share locked, the referred checkpoint, the writes, COMMIT
        assert svc.checkpoint_put_writes(actor=alice, thread_id=f"m-{count}", checkpoint_id="c1", data=data) == 2
    stored = CheckpointWrite.objects.get(channel="__pregel_tasks")
    assert stored.refers and stored.value["kwargs"]["arg"]["state"]["messages"]["$messages"]["ref"]["count"] == count + 1
    pending = {w.channel: w.value for w in latest.checkpoint_latest(actor=alice, thread_id=f"m-{count}").pending}
    assert pending["__pregel_tasks"] == send(conversation(count) + [human(count), human(count + 1)])
    assert pending["messages"] == [human(count + 1)]


@postgres_only
def test_writes_referring_to_a_checkpoint_not_stored_yet_take_the_general_path_and_its_412(alice):
    grown(alice, "early", 2)
    data = svc.write_input(task_id="t", writes=[{"channel": "x", "value": marker(1, checkpoint="c7"), "refs": True}])
    with pytest.raises(PreconditionFailed):
        svc.checkpoint_put_writes(actor=alice, thread_id="early", checkpoint_id="c7", data=data)
    assert not CheckpointWrite.objects.exists()


def test_the_latest_read_gives_what_the_general_read_gives(alice):
    head = grown(alice, "same", 3)
    put(alice, "same", "c1", 2, delta={"head": head, "append": [human(3)]}, parent="c0")
    write(alice, "same", "c1", [("step", 3), ("__interrupt__", [{"value": "ask", "id": "i1"}])])
    write(alice, "same", "c1", [("step", 99), ("__interrupt__", [{"value": "ask again", "id": "i2"}])])  # special replaced, ordinary kept
    fast = latest.checkpoint_latest(actor=alice, thread_id="same")
    general = cs.checkpoint_get(actor=alice, thread_id="same")
    assert cs.checkpoint_as_dict(fast) == cs.checkpoint_as_dict(general)
    assert cs.checkpoint_etag(fast) == cs.checkpoint_etag(general)
    assert [(w.channel, w.value) for w in fast.pending] == [("__interrupt__", [{"value": "ask again", "id": "i2"}]), ("step", 3)]


def test_another_users_thread_takes_the_general_path_and_its_refusals(alice, bob, admin_user):
    grown(alice, "alices", 2)
    with pytest.raises(Forbidden):
        latest.checkpoint_latest(actor=bob, thread_id="alices")
    with pytest.raises(Forbidden):
        put(bob, "alices", "c9", 9)
    with pytest.raises(Forbidden):
        write(bob, "alices", "c0", [("step", 1)])
    assert not Checkpoint.objects.filter(checkpoint_id="c9").exists() and not CheckpointWrite.objects.exists()
    # An admin reads it through the general path (audited there), the same checkpoint.
    assert latest.checkpoint_latest(actor=admin_user, thread_id="alices").checkpoint_id == "c0"


@postgres_only
def test_a_write_between_the_read_and_the_statement_sends_the_put_to_the_general_path(alice):
    head = grown(alice, "raced", 2)

    fired = []

    def meanwhile(execute, sql, params, many, context):
        if sql.lstrip().startswith("WITH moved AS") and not fired:
            fired.append(sql)
            # Another step of the same thread lands between this put's read and its statement.
            in_another_connection(lambda: put(alice, "raced", "other", 2, delta={"head": head, "append": [human(50)]}, parent="c0"))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(meanwhile), pytest.raises(PreconditionFailed):
        put(alice, "raced", "mine", 2, delta={"head": head, "append": [human(60)]}, parent="c0")
    assert not Checkpoint.objects.filter(checkpoint_id="mine").exists()
    assert list(Block.objects.filter(thread__thread_id="raced").order_by("seq").values_list("seq", flat=True)) == [1, 2, 3]
    assert Thread.objects.get(thread_id="raced").active_count == 3


@postgres_only
def test_the_same_checkpoint_put_at_the_same_moment_is_replaced_not_doubled(alice):
    grown(alice, "twice", 2)

    fired = []

    def meanwhile(execute, sql, params, many, context):
        if sql.lstrip().startswith("WITH moved AS") and not fired:
            fired.append(sql)
            in_another_connection(lambda: put(alice, "twice", "c1", 2, documents=False, parent="c0"))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(meanwhile):
        answer = put(alice, "twice", "c1", 2, parent="c0")
    assert answer.created is False
    rows = Checkpoint.objects.filter(thread__thread_id="twice", checkpoint_id="c1")
    assert rows.count() == 1
    assert cs.checkpoint_get(actor=alice, thread_id="twice", checkpoint_id="c1").checkpoint["channel_values"]["documents"] == DOCUMENTS


def test_a_delta_on_a_stale_head_is_a_412_and_writes_nothing_whichever_path(alice):
    grown(alice, "stale", 2)
    before = (Checkpoint.objects.count(), Block.objects.count(), Thread.objects.get(thread_id="stale").updated_at)
    with pytest.raises(PreconditionFailed):
        put(alice, "stale", "c1", 2, delta={"head": "0" * 64, "append": [human(2)]}, parent="c0")
    assert (Checkpoint.objects.count(), Block.objects.count(), Thread.objects.get(thread_id="stale").updated_at) == before


def _stored(thread_id):
    """A thread as the store keeps it: its row's counts, its blocks, its checkpoints as read back."""
    thread = Thread.objects.get(thread_id=thread_id)
    blocks = list(Block.objects.filter(thread=thread).order_by("seq").values_list(
        "seq", "position", "agent_code", "message", "chain_hash", "archived"))
    rows = [
        (cs.checkpoint_as_dict(cs.checkpoint_get(actor=thread.owner, thread_id=thread_id, checkpoint_id=row.checkpoint_id)),
         row.messages_ref, row.node_id)
        for row in Checkpoint.objects.filter(thread=thread).order_by("pk")
    ]
    for checkpoint_dict, _ref, _node in rows:
        for moment in ("thread_id", "created_at", "updated_at"):
            checkpoint_dict.pop(moment)
    return (thread.title, thread.agent_code, thread.active_count, thread.archived_count, thread.last_seq), blocks, rows


@postgres_only
@pytest.mark.parametrize("count", [2, 300])
def test_a_step_sent_whole_that_extends_the_thread_costs_two_round_trips_then_one_and_is_stored_as_the_general_path_stores_it(
    alice, count, django_assert_num_queries, monkeypatch
):
    """An agent that sends each step's messages whole: the thread's messages and one more, then the same again."""
    for thread_id in ("whole-fast", "whole-general"):
        grown(alice, thread_id, count)
    steps = [("c1", conversation(count) + [human(count)]), ("c2", conversation(count) + [human(count)])]
    answers = {}
    for (checkpoint_id, messages), round_trips in zip(steps, (2, 1), strict=True):
        # The first step reads the thread; the next, remembering what the first left, does not.
        with django_assert_num_queries(round_trips):
            answers[checkpoint_id] = put(alice, "whole-fast", checkpoint_id, 2, messages=messages, parent="c0")
    monkeypatch.setattr(svc.fastpath, "checkpoint_put_fast", lambda **kwargs: None)
    general = {checkpoint_id: put(alice, "whole-general", checkpoint_id, 2, messages=messages, parent="c0")
               for checkpoint_id, messages in steps}
    assert {k: a.messages for k, a in answers.items()} == {k: a.messages for k, a in general.items()}
    assert answers["c2"].messages["count"] == count + 1
    assert _stored("whole-fast") == _stored("whole-general")


@postgres_only
def test_a_step_sent_whole_that_rewrites_the_thread_takes_the_general_path_and_archives(alice):
    grown(alice, "rewritten", 4)
    answer = put(alice, "rewritten", "c1", 2, messages=[human(90)], parent="c0")
    thread = Thread.objects.get(thread_id="rewritten")
    assert (answer.messages["count"], thread.active_count, thread.archived_count) == (1, 1, 4)


def test_a_block_stored_deeper_than_a_read_shows_reads_back_cut(alice):
    """The blocks' messages are read as one JSON array; a message stored deeper than reads show is cut, alone."""
    from memoryadmin.json import DEEP_MARKER
    from memoryadmin.jsoncheck import json_depth

    grown(alice, "odd", 3)
    thread = Thread.objects.get(thread_id="odd")
    deep = human(1)
    deep["kwargs"]["additional_kwargs"] = {"x": __import__("functools").reduce(lambda inner, _: [inner], range(300), "bottom")}
    Block.objects.filter(thread=thread, seq=2).update(message=deep)
    read = latest.checkpoint_latest(actor=alice, thread_id="odd").checkpoint["channel_values"]["messages"]
    assert len(read) == 3 and read[0] == conversation(3)[0] and read[2] == conversation(3)[2]
    assert json_depth(read[1]) == 200 and DEEP_MARKER in str(read[1])


@postgres_only
def test_a_remembered_row_that_no_longer_holds_costs_a_round_trip_more_never_a_wrong_write(alice, django_assert_num_queries):
    from sessions_app.checkpoints import fastpath

    head = grown(alice, "moved", 2)
    first = put(alice, "moved", "c1", 2, delta={"head": head, "append": [human(2)]}, parent="c0")
    key = ("default", connection.settings_dict["NAME"], alice.pk, "moved")
    kept = fastpath.remembered.get(key)
    assert kept is not None and kept.head == first.messages["head"]

    def elsewhere(step):
        # Another process's put: this one's memory is left as it was.
        answers = []
        in_another_connection(lambda: answers.append(step()))
        fastpath.remembered.put(key, kept)
        return answers[0]

    # Another process appended a message: the client sends the new head, which this process's
    # memory does not know; the thread is read, then written, as with nothing remembered.
    other = elsewhere(lambda: put(alice, "moved", "c2", 3, delta={"head": first.messages["head"], "append": [human(3)]}, parent="c1"))
    with django_assert_num_queries(2):
        third = put(alice, "moved", "c3", 4, delta={"head": other.messages["head"], "append": [human(4)]}, parent="c2")
    assert third.created and third.messages["count"] == 5
    # Another process wrote a step without messages: the head is the same but the row moved; the
    # statement writes nothing and answers the row, and the second statement writes.
    kept = fastpath.remembered.get(key)
    elsewhere(lambda: put(alice, "moved", "c4", 5, documents=False, parent="c3"))
    with django_assert_num_queries(2):
        fifth = put(alice, "moved", "c5", 5, delta={"head": third.messages["head"], "append": [human(5)]}, parent="c4")
    assert fifth.messages["count"] == 6
    assert list(Block.objects.filter(thread__thread_id="moved").order_by("seq").values_list("seq", flat=True)) == [1, 2, 3, 4, 5, 6]
    thread = Thread.objects.get(thread_id="moved")
    assert (thread.active_count, thread.last_seq) == (6, 6)
    found = latest.checkpoint_latest(actor=alice, thread_id="moved")
    assert found.checkpoint["channel_values"]["messages"] == conversation(2) + [human(n) for n in range(2, 6)]


@postgres_only
def test_after_a_clear_a_remembered_head_is_a_412_and_writes_nothing(alice, admin_user):
    from sessions_app.threads.services import thread_clear

    head = grown(alice, "cleared", 2)
    first = put(alice, "cleared", "c1", 2, delta={"head": head, "append": [human(2)]}, parent="c0")
    thread_clear(actor=admin_user, thread_id="cleared")
    before = (Checkpoint.objects.count(), Block.objects.count(), Thread.objects.get(thread_id="cleared").updated_at)
    with pytest.raises(PreconditionFailed):
        put(alice, "cleared", "c2", 3, delta={"head": first.messages["head"], "append": [human(3)]}, parent="c1")
    assert (Checkpoint.objects.count(), Block.objects.count(), Thread.objects.get(thread_id="cleared").updated_at) == before


NODES_CASES = [
    # (the parent's versions_seen, or None for no parent stored; this checkpoint's)
    ({"agent": {"step": "1"}, "tools": {"x": 1}}, {"agent": {"step": "2"}, "tools": {"x": 1.0}}),
    ({"a": None}, {"a": None, "b": None, "c": {"k": "v"}}),
    (None, {"z": {}, "Z": {}, "é": {}, "日本": {}, "a": {"1": 2}, "__interrupt__": {"x": "1"}}),
    ({"nested": {"b": 1, "a": 2}}, {"nested": {"a": 2, "b": 1}, "big": {"v": 2**70}}),
    ({}, {f"node-{n:03d}-{'x' * 20}": {"v": n} for n in range(20)}),
]


@postgres_only
@pytest.mark.parametrize("parent_seen, seen", NODES_CASES)
def test_the_nodes_a_step_ran_are_found_in_the_statement_as_langgraph_nodes_run_finds_them(alice, parent_seen, seen):
    from sessions_app.checkpoints.langgraph import nodes_run
    from sessions_app.checkpoints.fastpath import NODE_ID_MAX

    svc.checkpoint_put(actor=alice, thread_id="nodes", data=svc.checkpoint_input(checkpoint={}), checkpoint_id="start")
    parent = None
    if parent_seen is not None:
        parent = "p"
        body = dict(checkpoint("p", 1, {"step": 1}), versions_seen=parent_seen)
        svc.checkpoint_put(actor=alice, thread_id="nodes", data=svc.checkpoint_input(checkpoint=body, parent_checkpoint_id="start"),
                           checkpoint_id="p")
    body = dict(checkpoint("c", 2, {"step": 2}), versions_seen=seen)
    data = svc.checkpoint_input(checkpoint=body, parent_checkpoint_id=parent or "missing")
    assert svc.fastpath.checkpoint_put_fast(actor=alice, thread_id="nodes", data=data, checkpoint_id="c", run_id="") is not None
    stored = Checkpoint.objects.get(thread__thread_id="nodes", checkpoint_id="c").node_id
    assert stored == ",".join(nodes_run(seen, parent_seen))[:NODE_ID_MAX]
