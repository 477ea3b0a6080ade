"""A worker that stops ends its long-lived responses first (memoryadmin/worker.py).

An ASGI server stopping — gunicorn's SIGTERM at a deploy, a worker recycled after
max_requests — stops accepting and waits for every response in progress to end. A
live-turn stream (sessions_app/turns/live.py) ends only after
MEMORYADMIN_TURN_SSE_MAX_SECONDS, so the worker would wait on it until it is killed.
`stop()` tells this event loop's streams to end now: each checks `stopping()` when it
wakes, and the callbacks registered with `on_stop` wake them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

_stopping: set[asyncio.AbstractEventLoop] = set()
_callbacks: list[Callable[[], None]] = []


def on_stop(callback: Callable[[], None]) -> None:
    """Call `callback` (on the stopping event loop) when `stop()` is called."""
    _callbacks.append(callback)


def stopping() -> bool:
    """True when the running event loop's server is stopping: a long-lived response ends."""
    try:
        return asyncio.get_running_loop() in _stopping
    except RuntimeError:
        return False


def stop() -> None:
    """The running event loop's server stops: its long-lived responses end at their next wake-up,
    which the registered callbacks bring now."""
    loop = asyncio.get_running_loop()
    for ended in [other for other in _stopping if other.is_closed()]:
        _stopping.discard(ended)
    _stopping.add(loop)
    for callback in _callbacks:
        callback()
