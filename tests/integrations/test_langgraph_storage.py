"""A ReAct agent's storage per turn is constant: its `Send` packets and its tasks' writes hold
the thread's messages by reference (docs/checkpoints.md, "Send packets and task writes"),
and every checkpoint and write still reads back exactly as it was put."""

from __future__ import annotations

import copy
import io
import warnings

import pytest
from django.core.management import call_command
from langchain_core.messages import AIMessage, HumanMessage

from memoryadmin.apikeys import apikey_create
from memoryadmin.json import db_text
from sessions_app.models import Block, Checkpoint, CheckpointValue, CheckpointWrite

from .test_langgraph_conversation import ToolCallingFake, multiply
from .test_saver_graph import live_saver

pytestmark = pytest.mark.django_db(transaction=True)

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from langgraph.prebuilt import create_react_agent

TURNS = 8
# Long enough that a turn copying the conversation once more would show at once.
FILLER = "All the words of a long answer about the weather, repeated to weigh. " * 8


def script(turns: int) -> list[AIMessage]:
    out = []
    for i in range(turns):
        out.append(AIMessage("", id=f"ai-{i}-call", tool_calls=[{"name": "multiply", "args": {"a": i, "b": 7}, "id": f"call-{i}"}]))
        out.append(AIMessage(f"{i} x 7 is {i * 7}. {FILLER}", id=f"ai-{i}-answer"))
    return out


class Recorder:
    """Every checkpoint and write exactly as LangGraph handed them to the saver."""

    def __init__(self, saver):
        self.saver, self.checkpoints, self.writes = saver, {}, {}
        put, put_writes = saver.put, saver.put_writes

        def recording_put(config, checkpoint, metadata, new_versions):
            self.checkpoints[checkpoint["id"]] = copy.deepcopy(checkpoint)
            return put(config, checkpoint, metadata, new_versions)

        def recording_writes(config, writes, task_id, task_path=""):
            key = config["configurable"]["checkpoint_id"]
            self.writes.setdefault(key, {})[task_id] = copy.deepcopy(list(writes))
            return put_writes(config, writes, task_id, task_path)

        saver.put, saver.put_writes = recording_put, recording_writes

    def assert_reads_back(self, thread_id: str) -> None:
        for checkpoint_id, put in self.checkpoints.items():
            found = self.saver.get_tuple({"configurable": {"thread_id": thread_id, "checkpoint_ns": "", "checkpoint_id": checkpoint_id}})
            assert found is not None and found.checkpoint == put, checkpoint_id
            by_task: dict[str, list] = {}
            for task_id, channel, value in found.pending_writes:
                by_task.setdefault(task_id, []).append((channel, value))
            for task_id, writes in self.writes.get(checkpoint_id, {}).items():
                assert by_task.get(task_id) == [tuple(write) for write in writes], (checkpoint_id, task_id)


def stored_bytes() -> int:
    """The JSON the thread's rows hold (checkpoints, writes, blocks, values by version), as the database stores it."""
    size = 0
    for row in Checkpoint.objects.values_list("checkpoint", "metadata", "messages_ref", "refs"):
        size += sum(len(db_text(part)) for part in row if part is not None)
    for (value,) in CheckpointWrite.objects.values_list("value"):
        size += len(db_text(value))
    for (message,) in Block.objects.values_list("message"):
        size += len(db_text(message))
    for (value,) in CheckpointValue.objects.values_list("value"):
        size += len(db_text(value))
    return size


def turns(saver, thread_id: str, count: int) -> list[tuple[int, int, int]]:
    """(bytes, checkpoint rows, write rows) added by each turn."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph = create_react_agent(ToolCallingFake(messages=iter(script(count))), [multiply], checkpointer=saver)
    config = {"configurable": {"thread_id": thread_id}}
    grown, before = [], (stored_bytes(), Checkpoint.objects.count(), CheckpointWrite.objects.count())
    for i in range(count):
        graph.invoke({"messages": [HumanMessage(f"What is {i} x 7? {FILLER}", id=f"h-{i}")]}, config)
        now = (stored_bytes(), Checkpoint.objects.count(), CheckpointWrite.objects.count())
        grown.append(tuple(b - a for a, b in zip(before, now)))
        before = now
    return grown


@pytest.fixture
def recorder(live_server, alice):
    saver = live_saver(live_server.url, apikey_create(owner=alice).plaintext)
    yield Recorder(saver)
    saver.close()


def test_a_react_agent_stores_the_same_bytes_every_turn(recorder):
    grown = turns(recorder.saver, "react-storage", TURNS)
    sizes = [size for size, _, _ in grown]
    # The same rows every turn ...
    assert len({(checkpoints, writes) for _, checkpoints, writes in grown[1:]}) == 1
    # ... and the same bytes, but for counters that gain a digit (steps, seqs): the conversation,
    # about 1.2 kB a turn, is never stored again.
    assert max(sizes[1:]) - min(sizes[1:]) < 200, sizes
    # The Send packets went by reference, and so did the agent's writes after the first turn (a
    # new thread has no checkpoint with messages yet when its first task writes).
    assert Checkpoint.objects.filter(refs__isnull=False).count() == TURNS
    assert CheckpointWrite.objects.filter(refers=True).count() == TURNS - 1
    recorder.assert_reads_back("react-storage")
    out = io.StringIO()
    call_command("verify", stdout=out)
    assert "0 problem(s)" in out.getvalue()


def test_without_references_every_turn_stores_the_conversation_again(recorder, monkeypatch):
    """The other side of the test above: the same agent with its messages copied into its
    Send packets and writes (what a client that sends no reference stores) grows every turn."""
    from memoryadmin_client.langgraph import codec

    monkeypatch.setattr(codec.MessageRefs, "prefix", lambda self, value: 0)
    sizes = [size for size, _, _ in turns(recorder.saver, "react-copied", TURNS)]
    assert all(later > earlier + 1000 for earlier, later in zip(sizes[1:], sizes[2:])), sizes
    assert not Checkpoint.objects.filter(refs__isnull=False).exists()
    recorder.assert_reads_back("react-copied")
