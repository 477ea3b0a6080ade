"""`manage.py verify` finds each broken invariant and exits 1; clean data exits 0."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from sessions_app.models import Block, Checkpoint, Thread
from sessions_app.threads.services import thread_save_agent_state

pytestmark = pytest.mark.django_db


def turns(count: int) -> list[dict]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i}"} for i in range(count)]


def run_verify() -> tuple[int, str]:
    out, err = StringIO(), StringIO()
    try:
        call_command("verify", stdout=out, stderr=err)
    except SystemExit as exc:
        return exc.code, out.getvalue() + err.getvalue()
    return 0, out.getvalue()


@pytest.fixture
def saved(alice):
    thread_save_agent_state(actor=alice, thread_id="t1", agent_code="bot", context=turns(6))
    thread_save_agent_state(actor=alice, thread_id="t1", agent_code="bot", context=turns(2))
    thread_save_agent_state(actor=alice, thread_id="t1", agent_code="bot", context=turns(5))
    return Thread.objects.get(thread_id="t1")


def test_clean_data_passes(saved):
    code, output = run_verify()
    assert code == 0 and "0 problem(s)" in output


def test_it_finds_a_broken_hash_chain(saved):
    block = Block.objects.filter(thread=saved, archived=False).order_by("seq")[2]
    Block.objects.filter(pk=block.pk).update(message={"role": "user", "content": "edited behind our back"})
    code, output = run_verify()
    assert code == 1 and "chain_hash" in output


def test_it_finds_wrong_counters_and_gaps(saved):
    Thread.objects.filter(pk=saved.pk).update(active_count=99)
    Block.objects.filter(thread=saved, archived=False, position=1).delete()
    code, output = run_verify()
    assert code == 1 and "counts" in output and "positions" in output


def test_it_finds_a_seq_above_last_seq(saved):
    Thread.objects.filter(pk=saved.pk).update(last_seq=1)
    code, output = run_verify()
    assert code == 1 and "seq_above_last_seq" in output


def test_it_finds_a_checkpoint_whose_parent_is_missing(saved):
    Checkpoint.objects.create(thread=saved, checkpoint_id="c2", parent_checkpoint_id="c1", checkpoint={})
    code, output = run_verify()
    assert code == 1 and "missing_parent" in output and "c1" in output


def test_it_finds_pending_writes_without_their_checkpoint(saved):
    from sessions_app.models import CheckpointWrite

    CheckpointWrite.objects.create(thread=saved, checkpoint_id="gone", task_id="t", idx=0, channel="c", value={})
    code, output = run_verify()
    assert code == 1 and "orphan_writes" in output and "gone" in output


def test_it_finds_store_items_with_invalid_namespaces(alice):
    from store_app.models import StoreItem

    StoreItem.objects.create(owner=alice, namespace_path="users..x", depth=3, key="k", value={})
    code, output = run_verify()
    assert code == 1 and "store_namespace" in output


def _deep(depth: int) -> dict:
    value: dict = {"leaf": "bottom"}
    for _ in range(depth - 1):
        value = {"k": value}
    return value


def test_a_thread_that_cannot_be_processed_is_reported_and_the_others_still_checked(alice):
    # Checked in id order: the unreadable thread comes first, so the check must go on past it.
    unreadable = Thread.objects.create(thread_id="u1", owner=alice, agent_code="bot", last_seq=2, active_count=2)
    Block.objects.create(thread=unreadable, agent_code="bot", seq=1, position=0, role="user", content="x",
                         message={"role": "user", "content": "x"}, chain_hash="0" * 64)
    # Nested deeper than any serialiser writes (stored by the model layer, as older data may be).
    Block.objects.create(thread=unreadable, agent_code="bot", seq=2, position=1, role="user", content="deep",
                         message={"role": "user", "content": "deep", "v": _deep(600)}, chain_hash="0" * 64)
    # A big integer and a double that jsonb used to turn into one: clean after a save.
    good = [{"role": "user", "content": "n", "big": 10**20, "double": 1e20, "zero": -0.0}, {"role": "assistant", "content": "ok"}]
    thread_save_agent_state(actor=alice, thread_id="g1", agent_code="bot", context=good)
    thread_save_agent_state(actor=alice, thread_id="c1", agent_code="bot", context=turns(3))
    corrupt = Block.objects.get(thread__thread_id="c1", position=1)
    Block.objects.filter(pk=corrupt.pk).update(message={"role": "assistant", "content": "changed behind our back"})

    code, output = run_verify()
    assert code == 1
    lines = output.splitlines()
    unreadable_lines = [line for line in lines if line.startswith("unreadable: thread:u1/bot: a message cannot be hashed")]
    assert len(unreadable_lines) == 1 and "nested deeper than 254 levels" in unreadable_lines[0]
    assert "chain_hash: thread:c1/bot#" in output
    assert "thread:g1" not in output
    assert "checked 3 threads and 0 store items: 2 problem(s)" in output

