"""Turns of the event loop for the client's own CPU work in the async calls.

When twenty agents' answers come back together, each of their tasks wakes in the same pass
of the event loop and does its Python work there: reading its answer (HTTP, JSON), then, in
the saver, encoding the next step and writing it. Back to back, that work holds every timer
and every other task of the loop back for all twenty. Here a pass is counted (in the thread's
CPU time) from the first turn taken in it, and once it has spent `TURN_BUDGET` the next task
asking for a turn waits for the following pass, so that timers and other tasks run in between.
A task takes a turn before each such piece of work (`wire.AsyncPool` before it reads what came
back, the saver before it encodes a step); a piece of work runs whole once begun.

    await take_turn()
    ...                    # parse, encode: a fraction of a millisecond
"""

from __future__ import annotations

import asyncio
import time
import weakref
from typing import Any

# The CPU a pass of the event loop may have spent before a task's turn waits for the next pass.
TURN_BUDGET = 0.001

# Per loop: [thread CPU time when its pass's first turn began, that pass still open].
_loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, list[Any]] = weakref.WeakKeyDictionary()


async def take_turn() -> None:
    """Returns at once while the running loop's pass has spent less than `TURN_BUDGET` of CPU
    since its first turn; otherwise once a following pass has come."""
    loop = asyncio.get_running_loop()
    passing = _loops.get(loop)
    if passing is None:
        passing = _loops[loop] = [0.0, False]
    while passing[1] and time.thread_time() - passing[0] >= TURN_BUDGET:
        await asyncio.sleep(0)  # queued behind the pass's end (`_pass_over`)
    if not passing[1]:
        passing[0], passing[1] = time.thread_time(), True
        loop.call_soon(_pass_over, passing)  # runs at the start of the loop's next pass


def _pass_over(passing: list[Any]) -> None:
    passing[1] = False


class Turn:
    """`async with Turn():` around a piece of CPU work on the loop: `take_turn()` first."""

    async def __aenter__(self) -> None:
        await take_turn()

    async def __aexit__(self, *exc_info: Any) -> None:
        return None


__all__ = ["TURN_BUDGET", "Turn", "take_turn"]
