"""The conversation-store rules (docs/architecture.md, S1-S9), at the service layer."""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY

from memoryadmin.errors import Forbidden, InvalidInput
from memoryadmin.models import AuditEvent
from sessions_app.models import Block, Thread
from sessions_app.threads.selectors import thread_agent_state
from sessions_app.threads.services import thread_clear, thread_delete, thread_save_agent_state

from ..conftest import IS_POSTGRES
from .helpers import turns

pytestmark = pytest.mark.django_db


def save(user, context, thread_id="t1", agent_code="bot", **kwargs):
    return thread_save_agent_state(actor=user, thread_id=thread_id, agent_code=agent_code, context=context, **kwargs)


def metric(name: str) -> float:
    return REGISTRY.get_sample_value(name) or 0.0


def active(thread_id="t1"):
    return list(Block.objects.filter(thread__thread_id=thread_id, archived=False).order_by("seq"))


def test_it_creates_the_thread_owned_by_the_caller_with_a_title(alice):
    long_question = "Where should I stay in Lisbon if I want quiet evenings and good trams? " * 2
    result = save(alice, [{"role": "system", "content": "be brief"}, {"role": "user", "content": long_question}])
    thread = Thread.objects.get(thread_id="t1")
    assert thread.owner == alice
    # Cut at a word boundary, with an ellipsis: never mid-word, never reading as the whole question.
    assert thread.title == "Where should I stay in Lisbon if I want quiet…"
    assert len(thread.title) <= 50
    body = result.as_dict()
    assert body.pop("head") == Block.objects.get(thread=thread, seq=2).chain_hash
    assert body == {"thread_id": "t1", "mode": "append", "appended": 2, "archived": 0, "active": 2, "max_seq": 2}


def test_it_appends_only_the_new_tail(alice):
    save(alice, turns(4))
    result = save(alice, turns(6))
    assert (result.mode, result.appended, result.max_seq) == ("append", 2, 6)
    assert [b.seq for b in active()] == [1, 2, 3, 4, 5, 6]
    assert [b.position for b in active()] == [0, 1, 2, 3, 4, 5]


def test_a_retried_identical_save_writes_nothing(alice, django_assert_max_num_queries):
    save(alice, turns(4), extra_state={"plan": 1}, extra_state_given=True)
    before = Thread.objects.get(thread_id="t1").updated_at
    result = save(alice, turns(4))
    assert (result.mode, result.appended, result.archived) == ("noop", 0, 0)
    assert Block.objects.count() == 4
    assert Thread.objects.get(thread_id="t1").updated_at == before


def test_a_second_and_third_compaction_never_collide_on_the_unique_key(alice):
    """Rule S6: a rewrite restarting seq at 1 would collide with archived rows on the second compaction."""
    save(alice, turns(6))
    summary = {"role": "system", "name": "__compaction_summary__", "content": "summary 1"}
    first = save(alice, [summary, *turns(6)[-2:]])
    assert (first.mode, first.archived, first.max_seq) == ("rewrite", 6, 9)
    grown = [summary, *turns(6)[-2:], *turns(4, "n")]
    save(alice, grown)
    second = save(alice, [dict(summary, content="summary 2"), grown[-1]])
    third = save(alice, [dict(summary, content="summary 3")])
    assert (second.mode, third.mode) == ("rewrite", "rewrite")
    seqs = list(Block.objects.values_list("seq", flat=True))
    assert len(seqs) == len(set(seqs)), "a seq was reused"
    assert third.max_seq == max(seqs)
    assert [b.message["content"] for b in active()] == ["summary 3"]
    thread = Thread.objects.get(thread_id="t1")
    assert (thread.rewrite_count, thread.active_count, thread.archived_count) == (3, 1, Block.objects.filter(archived=True).count())


def test_a_compaction_with_an_empty_summary_field_is_detected(alice):
    """Rule S5: a compaction that leaves `summary` empty is still a rewrite (a summary-based check never fires)."""
    save(alice, turns(8), extra_state={"summary": ""}, extra_state_given=True)
    compacted = [{"role": "user", "name": "__compaction_summary__", "content": "what happened"}, *turns(8)[-2:]]
    result = save(alice, compacted, extra_state={"summary": ""}, extra_state_given=True)
    assert result.mode == "rewrite"
    state = thread_agent_state(actor=alice, thread_id="t1")
    assert state.context == compacted
    assert Block.objects.filter(archived=True).count() == 8


def test_an_in_place_edit_with_the_same_count_is_a_rewrite(alice):
    """The case a count check misses: same length, an earlier message changed."""
    save(alice, turns(5))
    edited = turns(5)
    edited[1] = {**edited[1], "content": "redacted"}
    result = save(alice, edited)
    assert (result.mode, result.archived, result.appended) == ("rewrite", 5, 5)
    assert thread_agent_state(actor=alice, thread_id="t1").context == edited


def test_an_edit_of_an_earlier_message_plus_new_messages_is_a_rewrite(alice):
    save(alice, turns(4))
    edited = turns(6)
    edited[0] = {**edited[0], "content": "changed"}
    assert save(alice, edited).mode == "rewrite"


def test_key_order_does_not_count_as_an_edit(alice):
    save(alice, [{"role": "user", "content": "a", "id": "1"}])
    assert save(alice, [{"id": "1", "content": "a", "role": "user"}]).mode == "noop"


def test_messages_come_back_exactly_as_posted(alice):
    odd = [
        {"role": "human", "content": [{"type": "text", "text": "hi"}, {"type": "image_url", "image_url": {"url": "data:,"}}], "id": "u1", "metadata": {"n": 1.5, "deep": [None, True]}},
        {"role": "ai", "content": None, "tool_calls": [{"id": "c1", "name": "search", "args": {"q": "ü"}}]},
        {"role": "tool", "content": "{\"ok\": true}", "tool_call_id": "c1", "name": "search"},
    ]
    save(alice, odd)
    assert thread_agent_state(actor=alice, thread_id="t1").context == odd
    roles = [b.role for b in active()]
    assert roles == ["user", "assistant", "tool"]
    assert [b.block_type for b in active()] == ["message", "tool_call", "tool_result"]


def test_switching_agent_code_updates_the_thread(alice):
    save(alice, turns(2), agent_code="planner")
    result = save(alice, turns(2), agent_code="executor")
    thread = Thread.objects.get(thread_id="t1")
    assert thread.agent_code == "executor"
    # The new agent's context starts afresh; seq still continues thread-wide.
    assert (result.mode, result.appended, result.max_seq) == ("append", 2, 4)
    assert thread_agent_state(actor=alice, thread_id="t1").context == turns(2)


def test_extra_state_is_overwritten_when_given_and_kept_when_omitted(alice):
    save(alice, turns(1), extra_state={"summary": "a", "plan": [1]}, extra_state_given=True)
    save(alice, turns(2))
    assert Thread.objects.get().extra_state == {"summary": "a", "plan": [1]}
    save(alice, turns(2), extra_state={"summary": "b"}, extra_state_given=True)
    assert Thread.objects.get().extra_state == {"summary": "b"}
    save(alice, turns(2), extra_state=None, extra_state_given=True)
    assert Thread.objects.get().extra_state is None


def test_it_refuses_another_owners_thread_and_writes_nothing(alice, bob):
    save(alice, turns(2))
    with pytest.raises(Forbidden):
        save(bob, turns(4), extra_state={"x": 1}, extra_state_given=True)
    thread = Thread.objects.get()
    assert Block.objects.count() == 2 and thread.extra_state is None and thread.owner == alice


def test_operators_and_admins_cannot_write_into_someone_elses_thread(alice, operator, admin_user):
    save(alice, turns(2))
    for user in (operator, admin_user):
        with pytest.raises(Forbidden):
            save(user, turns(3))
    assert Block.objects.count() == 2


def test_operators_write_nothing_at_all(operator):
    with pytest.raises(Forbidden):
        save(operator, turns(1), thread_id="own")
    assert not Thread.objects.exists()


@pytest.mark.parametrize(
    ("context", "field"),
    [
        ("not a list", "context"),
        ([{"content": "no role"}], "context[0].role"),
        ([{"role": "wizard", "content": "x"}], "context[0].role"),
        ([{"role": "user", "content": 42}], "context[0].content"),
        ([{"role": "user", "content": {"a": 1}}], "context[0].content"),
        ([{"role": "user"}], "context[0].content"),
        (["just text"], "context[0]"),
        ([{"role": "user", "content": "ok"}, {"role": "user", "content": [1, 2]}], "context[1].content"),
        ([{"role": "user", "content": "big", "n": 10**100}], "context[0]"),
        ([{"role": "user", "content": "nul \x00 inside"}], "context[0]"),
        ([{"role": "user", "content": "x", "meta": {"k\x00": 1}}], "context[0]"),
        ([{"role": "user", "content": "lone \ud800 surrogate"}], "context[0]"),
        ([{"role": "user", "content": "x", "score": float("nan")}], "context[0]"),
    ],
)
def test_bad_messages_are_refused_naming_the_field(alice, context, field):
    with pytest.raises(InvalidInput) as caught:
        save(alice, context)
    assert field in caught.value.fields
    assert not Thread.objects.exists()


@pytest.mark.parametrize("extra_state", [[1], "text", {"a": "\x00"}, {"a": float("inf")}])
def test_bad_extra_state_is_refused(alice, extra_state):
    with pytest.raises(InvalidInput) as caught:
        save(alice, turns(1), extra_state=extra_state, extra_state_given=True)
    assert "extra_state" in caught.value.fields
    assert not Thread.objects.exists()


@pytest.mark.parametrize("thread_id", ["", "x" * 65, "has space", "slash/no", "semi;colon", "ünï"])
def test_bad_thread_ids_are_refused(alice, thread_id):
    with pytest.raises(InvalidInput) as caught:
        save(alice, turns(1), thread_id=thread_id)
    assert "thread_id" in caught.value.fields


@pytest.mark.parametrize("agent_code", [None, "", "   ", "a" * 65, 7])
def test_bad_agent_codes_are_refused(alice, agent_code):
    with pytest.raises(InvalidInput) as caught:
        save(alice, turns(1), agent_code=agent_code)
    assert "agent_code" in caught.value.fields


def test_the_store_counters_count_rewrites_archives_and_failures(alice, bob):
    truncates, archives, fails = (metric("block_truncate_count_total"), metric("block_archive_write_count_total"), metric("block_persist_fail_total"))
    save(alice, turns(4))
    save(alice, turns(2))
    with pytest.raises(Forbidden):
        save(bob, turns(1))
    assert metric("block_truncate_count_total") == truncates + 1
    assert metric("block_archive_write_count_total") == archives + 4
    assert metric("block_persist_fail_total") == fails + 1


def test_clear_archives_everything_and_drops_extra_state(alice, admin_user):
    save(alice, turns(4), extra_state={"a": 1}, extra_state_given=True)
    result = thread_clear(actor=admin_user, thread_id="t1")
    assert result == {"archived": 4, "active_blocks": 0, "archived_blocks": 4}
    thread = Thread.objects.get()
    assert (thread.active_count, thread.archived_count, thread.extra_state) == (0, 4, None)
    assert Block.objects.filter(archived=False).count() == 0
    # The agent's next save starts a fresh context and seq goes on.
    assert save(alice, turns(1)).max_seq == 5
    assert AuditEvent.objects.filter(action="thread.clear", target="thread:t1").exists()


def test_only_admins_clear(alice, operator):
    save(alice, turns(2))
    for user in (alice, operator):
        with pytest.raises(Forbidden):
            thread_clear(actor=user, thread_id="t1")
    assert Block.objects.filter(archived=False).count() == 2


def test_delete_by_owner_or_admin_removes_everything(alice, bob, admin_user):
    save(alice, turns(2), thread_id="a1")
    save(alice, turns(2), thread_id="a2")
    with pytest.raises(Forbidden):
        thread_delete(actor=bob, thread_id="a1")
    thread_delete(actor=alice, thread_id="a1")
    thread_delete(actor=admin_user, thread_id="a2")
    assert not Thread.objects.exists() and not Block.objects.exists()
    assert AuditEvent.objects.filter(action="thread.delete").count() == 2


def test_an_append_fills_in_the_title_once_a_user_speaks(alice):
    system = {"role": "system", "content": "be brief"}
    save(alice, [system])
    assert Thread.objects.get(thread_id="t1").title == ""
    save(alice, [system, {"role": "user", "content": "  Trains   from Porto?  "}])
    save(alice, [system, {"role": "user", "content": "Trains from Porto?"}, {"role": "user", "content": "And buses?"}])
    assert Thread.objects.get(thread_id="t1").title == "Trains from Porto?"


def test_an_append_keeps_extra_state_unless_given(alice):
    save(alice, turns(2), extra_state={"plan": 1}, extra_state_given=True)
    save(alice, turns(4))
    assert Thread.objects.get(thread_id="t1").extra_state == {"plan": 1}
    save(alice, turns(6), extra_state={"plan": 2, "nested": {"k": [1, "two"]}}, extra_state_given=True)
    assert Thread.objects.get(thread_id="t1").extra_state == {"plan": 2, "nested": {"k": [1, "two"]}}
    save(alice, turns(8), extra_state=None, extra_state_given=True)
    assert Thread.objects.get(thread_id="t1").extra_state is None


@pytest.mark.skipif(not IS_POSTGRES, reason="the one-statement append is PostgreSQL's; SQLite saves under its write lock")
def test_a_save_that_raced_between_its_read_and_its_write_falls_back_to_the_locked_path(alice, monkeypatch):
    """Another replica appends the same turn after this save read the chain head: the
    conditional update matches nothing, nothing is inserted twice, and the locked path
    finds the context already stored."""
    import sessions_app.threads.services as services

    save(alice, turns(4))
    real_parse = services.parse_messages
    raced = []

    def parse_then_let_the_other_replica_save(context, start):
        if not raced:
            raced.append(None)
            raced[0] = save(alice, turns(6))
        return real_parse(context, start)

    monkeypatch.setattr(services, "parse_messages", parse_then_let_the_other_replica_save)
    result = save(alice, turns(6))
    assert raced[0].mode == "append" and raced[0].appended == 2
    assert (result.mode, result.appended, result.max_seq) == ("noop", 0, 6)
    assert [b.seq for b in active()] == [1, 2, 3, 4, 5, 6]
    assert Thread.objects.get(thread_id="t1").active_count == 6


@pytest.mark.postgres
@pytest.mark.skipif(not IS_POSTGRES, reason="the one-statement save is PostgreSQL's")
@pytest.mark.parametrize("how", ["whole", "append"])
def test_a_remembered_row_another_process_moved_costs_a_read_and_loses_nothing(alice, admin_user, how, django_assert_num_queries):
    """A process remembers the row its last save left; another process saves meanwhile (its
    memory is another's), or an admin clears the thread: the save reads the row and is right."""
    from sessions_app.threads import remembered
    from sessions_app.threads.append import thread_append_messages

    def step(context, new):
        if how == "whole":
            return save(alice, context)
        return thread_append_messages(actor=alice, thread_id="t1", agent_code="bot", messages=new)

    save(alice, turns(2))
    step(turns(4), turns(4)[2:])  # through the one statement: remembered from here
    key = remembered.saves.key(alice, "t1", "bot")
    kept = remembered.saves.get(key)
    assert kept is not None and kept[3] == 4  # last_seq
    step(turns(6), turns(6)[4:])  # "another process": its save moves the row ...
    remembered.saves.put(key, kept)  # ... and this process's memory is as it was
    # The statement made from what was remembered writes nothing; then the read, and the statement.
    with django_assert_num_queries(3):
        result = step(turns(8), turns(8)[6:])
    assert (result.mode, result.appended, result.max_seq) == ("append", 2, 8)
    assert [b.content for b in active()] == [m["content"] for m in turns(8)]
    thread_clear(actor=admin_user, thread_id="t1")
    result = step(turns(10), turns(10)[8:])
    thread = Thread.objects.get(thread_id="t1")
    assert thread.active_count == (10 if how == "whole" else 2) and thread.last_seq == 8 + result.appended
    assert Block.objects.filter(thread=thread, archived=True).count() == 8
