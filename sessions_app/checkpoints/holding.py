"""Which checkpoints hold given blocks: a root LangGraph checkpoint keeps its messages channel as
the thread's blocks and holds them by reference (conversation.py, `messages_ref`).

A checkpoint whose reference is `{"agent": A, "upto": U, "count": C}` holds the blocks that
reading it gives back (`conversation.checkpoints_hydrate`): agent A's blocks with seq up to U,
newest first, while their positions go down and stay below C, at most C of them. A block that
such a checkpoint holds cannot be deleted without the checkpoint reading back short, so
whatever deletes blocks (retention's purge of archived blocks, docs/operations.md) removes the
checkpoints holding them with them.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import defaultdict

from django.db.models import QuerySet

from sessions_app.threads.models import Block

from .models import Checkpoint


def _held_low(seqs: list[int], positions: list[int], upto: int, count: int) -> int | None:
    """The lowest seq of the blocks a reference (upto, count) holds among one agent's blocks
    (seq order), or None when it holds none."""
    end = bisect_right(seqs, upto) - 1
    if count <= 0 or end < 0 or positions[end] >= count:
        return None
    low, below, taken = end, positions[end], 1
    while taken < count and low > 0 and positions[low - 1] < below:
        low -= 1
        below = positions[low]
        taken += 1
    return seqs[low]


def checkpoints_holding(blocks: QuerySet[Block]) -> list[int]:
    """Primary keys of the checkpoints that hold one of `blocks` (evaluated before they go).

    Reads the referencing checkpoints of the blocks' threads, the blocks' (thread, agent, seq),
    and the (seq, position) of every block of the agents those checkpoints name: threads
    without a LangGraph conversation cost one query and nothing more.
    """
    referencing = list(
        Checkpoint.objects.filter(thread__in=blocks.values("thread_id"), messages_ref__isnull=False).values_list(
            "pk", "thread_id", "messages_ref"
        )
    )
    wanted: dict[tuple[int, str], list[tuple[int, int, int]]] = defaultdict(list)
    for pk, thread_pk, ref in referencing:
        if isinstance(ref, dict) and isinstance(ref.get("agent"), str):
            upto, count = ref.get("upto"), ref.get("count")
            if isinstance(upto, int) and isinstance(count, int) and count > 0:
                wanted[(thread_pk, ref["agent"])].append((pk, upto, count))
    if not wanted:
        return []
    going: dict[tuple[int, str], list[int]] = defaultdict(list)
    for thread_pk, agent, seq in blocks.filter(thread_id__in={thread for thread, _ in wanted}).values_list(
        "thread_id", "agent_code", "seq"
    ):
        if (thread_pk, agent) in wanted:
            going[(thread_pk, agent)].append(seq)
    holding: list[int] = []
    for key, seqs_going in going.items():
        seqs_going.sort()
        rows = list(
            Block.objects.filter(thread_id=key[0], agent_code=key[1]).order_by("seq").values_list("seq", "position")
        )
        seqs = [seq for seq, _ in rows]
        positions = [position for _, position in rows]
        for pk, upto, count in wanted[key]:
            low = _held_low(seqs, positions, upto, count)
            if low is not None and bisect_left(seqs_going, low) < bisect_right(seqs_going, upto):
                holding.append(pk)
    return holding
