"""The clock and the progress of work done in batches, each its own short transaction (retention)."""

from __future__ import annotations

import time
from typing import Any, Callable


class Stats:
    """Counts batches and tells the caller after each one (the command's --verbose progress)."""

    def __init__(self, step: str, progress: Callable[[str, Any], None] | None):
        self.batches = 0
        self.step = step
        self.progress = progress

    def tick(self, impact: Any) -> None:
        self.batches += 1
        if self.progress is not None:
            self.progress(self.step, impact)


class Clock:
    """A deadline checked between batches: once it has passed, `stopped` stays true (a partial run)."""

    def __init__(self, deadline: float | None):
        self.deadline = deadline
        self.stopped = False

    @classmethod
    def after(cls, seconds: float | None) -> "Clock":
        return cls(time.monotonic() + seconds if seconds else None)

    def out_of_time(self) -> bool:
        if self.deadline is not None and time.monotonic() >= self.deadline:
            self.stopped = True
        return self.stopped
