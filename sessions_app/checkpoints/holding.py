"""Which checkpoints and pending writes hold given blocks: a root LangGraph checkpoint keeps its
messages channel as the thread's blocks and holds them by reference (conversation.py,
`messages_ref`), and a pending write's messages markers are stored as references to the blocks
of the checkpoint they named (references.py, `writes_resolve`).

A reference `{"agent": A, "upto": U, "count": C}` holds the blocks that reading it gives back
(`conversation.checkpoints_hydrate`): agent A's blocks with seq up to U, newest first, while
their positions go down and stay below C, at most C of them. A write's marker `{"ref", "count":
K}` holds the first K of those. A block so held cannot be deleted without the checkpoint or the
write reading back short, so whatever deletes blocks (retention's purge of archived blocks,
docs/operations.md) removes what holds them with them: the checkpoints (with their writes, as
removal.py removes any), and the writes, each with the other writes of its task against the
same checkpoint (LangGraph replays a finished task's output only whole: without it, the task
runs again when the graph resumes).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import defaultdict
from dataclasses import dataclass, field

from django.db.models import Exists, OuterRef, QuerySet

from sessions_app.threads.models import Block

from .models import Checkpoint, CheckpointWrite
from .references import stored_markers


def _held_range(seqs: list[int], positions: list[int], upto: int, count: int, take: int) -> tuple[int, int] | None:
    """The (lowest, highest) seq of the first `take` blocks a reference (upto, count) holds among
    one agent's blocks (seq order), or None when it holds none."""
    end = bisect_right(seqs, upto) - 1
    if count <= 0 or take <= 0 or end < 0 or positions[end] >= count:
        return None
    low, below, taken = end, positions[end], 1
    while taken < count and low > 0 and positions[low - 1] < below:
        low -= 1
        below = positions[low]
        taken += 1
    return seqs[low], seqs[min(end, low + take - 1)]


def _ref_parts(ref) -> tuple[str, int, int] | None:
    if isinstance(ref, dict) and isinstance(ref.get("agent"), str):
        upto, count = ref.get("upto"), ref.get("count")
        if isinstance(upto, int) and isinstance(count, int) and count > 0:
            return ref["agent"], upto, count
    return None


@dataclass
class Holders:
    """Primary keys of the checkpoints and of the pending writes holding given blocks."""

    checkpoints: list[int] = field(default_factory=list)
    writes: list[int] = field(default_factory=list)


def blocks_holders(blocks: QuerySet[Block]) -> Holders:
    """The checkpoints and the pending writes that hold one of `blocks` (evaluated before they go).

    Reads the referencing checkpoints and the writes with markers of the blocks' threads, the
    blocks' (thread, agent, seq), and the (seq, position) of every block of the agents named:
    threads without a LangGraph conversation cost two queries and nothing more.
    """
    threads = blocks.values("thread_id")
    # (kind, pk) holding, per (thread, agent): (upto, count, take).
    wanted: dict[tuple[int, str], list[tuple[str, int, int, int, int]]] = defaultdict(list)
    for pk, thread_pk, ref in Checkpoint.objects.filter(thread__in=threads, messages_ref__isnull=False).values_list(
        "pk", "thread_id", "messages_ref"
    ):
        parts = _ref_parts(ref)
        if parts is not None:
            wanted[(thread_pk, parts[0])].append(("checkpoint", pk, parts[1], parts[2], parts[2]))
    marked = CheckpointWrite.objects.filter(thread__in=threads, refers=True).values_list("pk", "thread_id", "value")
    for pk, thread_pk, value in marked.iterator(chunk_size=500):
        for marker in stored_markers(value):
            parts, take = _ref_parts(marker.get("ref")), marker.get("count")
            if parts is not None and type(take) is int:
                wanted[(thread_pk, parts[0])].append(("write", pk, parts[1], parts[2], take))
    found = Holders()
    if not wanted:
        return found
    going: dict[tuple[int, str], list[int]] = defaultdict(list)
    for thread_pk, agent, seq in blocks.filter(thread_id__in={thread for thread, _ in wanted}).values_list(
        "thread_id", "agent_code", "seq"
    ):
        if (thread_pk, agent) in wanted:
            going[(thread_pk, agent)].append(seq)
    checkpoints, writes = set(), set()
    for key, seqs_going in going.items():
        seqs_going.sort()
        rows = list(
            Block.objects.filter(thread_id=key[0], agent_code=key[1]).order_by("seq").values_list("seq", "position")
        )
        seqs = [seq for seq, _ in rows]
        positions = [position for _, position in rows]
        for kind, pk, upto, count, take in wanted[key]:
            held = _held_range(seqs, positions, upto, count, take)
            if held is not None and bisect_left(seqs_going, held[0]) < bisect_right(seqs_going, held[1]):
                (checkpoints if kind == "checkpoint" else writes).add(pk)
    found.checkpoints, found.writes = sorted(checkpoints), sorted(writes)
    return found


def checkpoints_holding(blocks: QuerySet[Block]) -> list[int]:
    """Primary keys of the checkpoints that hold one of `blocks`."""
    return blocks_holders(blocks).checkpoints


def tasks_writes(writes: list[int]) -> QuerySet[CheckpointWrite]:
    """These pending writes with every other write of their task against the same checkpoint."""
    same_task = CheckpointWrite.objects.filter(
        pk__in=writes,
        thread=OuterRef("thread"),
        checkpoint_ns=OuterRef("checkpoint_ns"),
        checkpoint_id=OuterRef("checkpoint_id"),
        task_id=OuterRef("task_id"),
    )
    threads = CheckpointWrite.objects.filter(pk__in=writes).values("thread_id")
    return CheckpointWrite.objects.filter(thread__in=threads).filter(Exists(same_task))
