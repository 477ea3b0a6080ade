"""The passes of a running event loop, counted (the tests of the client's turns)."""

from __future__ import annotations

import asyncio


class LoopPasses:
    """A callback queued again at each pass of the running loop counts them, from `start()` to `stop()`."""

    def __init__(self) -> None:
        self.count = 0
        self._counting = False

    def start(self) -> None:
        self._counting = True
        asyncio.get_running_loop().call_soon(self._tick)

    def stop(self) -> None:
        self._counting = False

    def _tick(self) -> None:  # runs once per pass of the loop
        self.count += 1
        if self._counting:
            asyncio.get_running_loop().call_soon(self._tick)
