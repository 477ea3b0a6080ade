"""`manage.py verify` on what checkpoints hold by reference (docs/operations.md, "Reliability"):
values by version (missing, orphaned), messages by reference, markers of Send packets and pending
writes. Each finding is shown by breaking the data behind the services' back; the checks read in
batches (the same findings at any batch size) and their queries do not grow with the data."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from sessions_app.models import Block, Checkpoint, CheckpointValue, CheckpointWrite, Thread

from ..sessions_app.test_checkpoint_storage import DOCUMENTS, marker, put, send, writes
from ..sessions_app.test_langgraph_conversation_api import conversation, human

pytestmark = pytest.mark.django_db


def verify(*args: str) -> tuple[int, list[dict]]:
    out = StringIO()
    try:
        call_command("verify", "--json", *args, stdout=out, stderr=StringIO())
    except SystemExit as exc:
        return exc.code, [json.loads(line) for line in out.getvalue().splitlines() if line.startswith("{")]
    return 0, []


def thread_with_everything(alice, thread_id="vr", steps=2):
    """A LangGraph thread: values by version, messages by reference, a Send packet in a
    checkpoint and a task write with markers, for `steps` steps."""
    parent = None
    for i in range(steps):
        cid = f"c{i}"
        messages = conversation(2 + i)
        put(alice, cid, {"messages": messages, "documents": DOCUMENTS[: 2 + i % 4], "__pregel_tasks": [send(marker(2 + i))]},
            {"messages": str(i), "documents": str(i), "__pregel_tasks": str(i)}, parent=parent, refs=["__pregel_tasks"],
            thread_id=thread_id)
        writes(alice, cid, [{"channel": "t", "value": send(marker(2 + i, [human(99)])), "refs": True}], thread_id=thread_id)
        parent = cid
    return Thread.objects.get(thread_id=thread_id)


def kinds(problems):
    return sorted({p["kind"] for p in problems})


def test_clean_references_pass(alice):
    thread_with_everything(alice, steps=4)
    assert verify() == (0, [])
    assert verify("--batch", "1") == (0, [])


def test_it_finds_a_value_by_version_no_checkpoint_holds(alice):
    thread = thread_with_everything(alice)
    CheckpointValue.objects.create(thread=thread, checkpoint_ns="", channel="documents", version="9", digest="0" * 64, value=[1])
    code, problems = verify()
    assert code == 1 and kinds(problems) == ["orphan_value"] and "documents@9" in problems[0]["where"]


def test_it_finds_a_value_by_version_that_is_gone(alice):
    thread_with_everything(alice)
    CheckpointValue.objects.filter(version="1")._raw_delete(CheckpointValue.objects.db)
    code, problems = verify()
    assert code == 1 and kinds(problems) == ["missing_value"] and problems[0]["where"].endswith("/c1")


def test_it_finds_messages_by_reference_whose_blocks_are_gone(alice):
    thread = thread_with_everything(alice)
    Block.objects.filter(thread=thread, seq=1)._raw_delete(Block.objects.db)
    code, problems = verify()
    found = {(p["kind"], p["where"].rsplit("/", 2)[-2] if "writes" in p["where"] else p["where"].split("/")[-1]) for p in problems}
    # Both checkpoints lost their first message, so did their packets' and their writes' markers.
    assert ("missing_messages", "c0") in found and ("missing_messages", "c1") in found
    assert "unresolved_marker" in kinds(problems)


def test_it_finds_a_checkpoints_marker_counting_more_than_its_messages(alice):
    thread_with_everything(alice)
    row = Checkpoint.objects.get(checkpoint_id="c1")
    row.checkpoint["channel_values"]["__pregel_tasks"] = [send(marker(50))]
    Checkpoint.objects.filter(pk=row.pk).update(checkpoint=row.checkpoint)
    code, problems = verify()
    assert code == 1 and kinds(problems) == ["unresolved_marker"]
    assert problems[0]["where"].endswith("/c1/__pregel_tasks")


def test_it_finds_a_write_whose_marker_refers_to_blocks_no_longer_there(alice):
    thread = thread_with_everything(alice)
    write = CheckpointWrite.objects.get(thread=thread, checkpoint_id="c1")
    write.value["kwargs"]["arg"]["state"]["messages"]["$messages"]["count"] = 40
    CheckpointWrite.objects.filter(pk=write.pk).update(value=write.value)
    code, problems = verify()
    assert code == 1 and kinds(problems) == ["unresolved_marker"] and "/c1/writes/task-1#0" in problems[0]["where"]


def test_every_finding_is_found_at_any_batch_size(alice):
    thread = thread_with_everything(alice, steps=5)
    CheckpointValue.objects.filter(version="3")._raw_delete(CheckpointValue.objects.db)
    CheckpointValue.objects.create(thread=thread, checkpoint_ns="", channel="x", version="1", digest="0" * 64, value=[1])
    CheckpointValue.objects.create(thread=thread, checkpoint_ns="", channel="y", version="1", digest="0" * 64, value=[1])
    Block.objects.filter(thread=thread, seq=2)._raw_delete(Block.objects.db)
    everything = verify()
    assert everything[0] == 1 and len(everything[1]) > 4
    for batch in ("1", "2", "3"):
        assert sorted(map(str, verify("--batch", batch)[1])) == sorted(map(str, everything[1]))
    assert sorted(map(str, verify("--thread", "vr")[1])) == sorted(map(str, everything[1]))


def _queries(*args) -> int:
    with CaptureQueriesContext(connection) as queries:
        verify(*args)
    return len(queries)


def test_the_reference_checks_cost_the_same_queries_for_more_data(alice):
    thread_with_everything(alice, "small", steps=2)
    small = _queries()
    Thread.objects.all().delete()
    thread_with_everything(alice, "large", steps=12)
    assert _queries() == small > 10
