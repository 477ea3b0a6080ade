"""The thread of a request's synchronous work under ASGI, and letting it go for a long-lived response.

Django's ASGI handler runs a request's synchronous code (the sync middleware, sync
views, the database) on one thread of its own: asgiref's `ThreadSensitiveContext`
makes a one-thread executor per request, started at the first such call (the
`request_started` signal's connection check is one, so every request has it) and
shut down when the response has been sent. A long-lived response, a live-turn
stream of up to MEMORYADMIN_TURN_SSE_MAX_SECONDS, would keep that thread parked,
idle, for its whole life: one thread per open stream (500 streams, 500 threads in
one worker). Making the middleware async would not remove it (the signal's receiver
and Django's middleware mixin run on it all the same), and it would cost every
request two thread switches per middleware.

`RequestThreads` wraps the ASGI application and gives each request that executor
itself (`RequestThread`, through asgiref's own `ThreadSensitiveContext(executor=…)`),
so the chain and the view run exactly as Django runs them. A view whose response
outlives its middleware calls `let_go(request)`: when the response starts (every
middleware has run), the request's thread closes its database connections and ends.
What the response still does in a thread afterwards (a stream's reads and its close)
runs on a few threads the process's long-lived responses share (`SHARED_THREADS`),
each call giving its connection back. Work a long-lived response hands to a task that
may outlive it (reads and renewals shared by several streams) asks `shared_threads()`
for those threads explicitly, since the request's context ends with the request.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from contextvars import ContextVar
from typing import Any

from asgiref.sync import ThreadSensitiveContext
from django.db import connections

# The scope key holding the request's RequestThread.
REQUEST_THREAD = "memoryadmin.request_thread"
# Threads shared by the synchronous work of every long-lived response of this process,
# after their own threads were let go: their reads queue here rather than each holding a thread.
SHARED_THREADS = 2
_shared = ThreadPoolExecutor(max_workers=SHARED_THREADS, thread_name_prefix="memoryadmin-long-lived")
_current: ContextVar[RequestThread | None] = ContextVar("memoryadmin_request_thread", default=None)


class RequestThread(Executor):
    """One request's thread-sensitive executor: one thread, taken at the first call, that
    can be let go once the middleware has run (`let_go`); later calls go to the shared threads.

    The thread is taken from the process's idle request threads (`IDLE_THREADS` at most are
    kept) and given back when the request ends, as a WSGI server's threads serve one request
    after another: no thread is started per request. A request's database connections are
    closed when it ends (Django's `request_finished`), so a thread is handed on with none."""

    def __init__(self):
        self._own: ThreadPoolExecutor | None = None
        self.long_lived = False
        self.released = False

    def submit(self, fn, /, *args, **kwargs) -> Future:
        if self.released:
            return _shared.submit(fn, *args, **kwargs)
        if self._own is None:
            self._own = _take_thread()
        return self._own.submit(fn, *args, **kwargs)

    def release(self) -> None:
        """End the request's own thread once it is idle, its database connections closed first
        (a thread that ends with a connection open would keep it from the pool for good)."""
        self.released = True
        own, self._own = self._own, None
        if own is not None:
            own.submit(connections.close_all)
            own.shutdown(wait=False)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        own, self._own = self._own, None
        if own is None:
            return
        if wait or cancel_futures:
            own.shutdown(wait=wait, cancel_futures=cancel_futures)
        else:
            _give_back(own)


# Idle request threads, each a one-thread executor, taken and given back last in, first out.
IDLE_THREADS = 64
_idle: list[ThreadPoolExecutor] = []
_idle_lock = threading.Lock()


def _take_thread() -> ThreadPoolExecutor:
    with _idle_lock:
        if _idle:
            return _idle.pop()
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="memoryadmin-request")


def _give_back(own: ThreadPoolExecutor) -> None:
    """Keep an idle thread for the next request, or let it end when enough are kept.
    Given back as soon as the request's last call returned, its executor's queue is empty."""
    with _idle_lock:
        if len(_idle) < IDLE_THREADS:
            _idle.append(own)
            return
    own.shutdown(wait=False)


async def on_a_request_thread(fn: Callable[[], Any]) -> Any:
    """`fn()` on one of the process's request threads (taken from the idle ones, given back when
    it has returned), awaited on the event loop: a direct call's synchronous work
    (memoryadmin/direct.py), with none of a Django request's per-request context around it."""
    own = _take_thread()
    future = own.submit(fn)
    future.add_done_callback(lambda _done: _give_back(own))
    return await asyncio.wrap_future(future)


def let_go(request: Any) -> None:
    """Mark the request's response as long-lived: its thread ends when the response starts.

    Harmless where there is no such thread to let go (the development server, the test client)."""
    thread = getattr(request, "scope", {}).get(REQUEST_THREAD)
    if thread is not None:
        thread.long_lived = True


def shared_threads() -> Executor | None:
    """The shared threads when the current request is a long-lived response under RequestThreads;
    None elsewhere (the development server, tests): run the work thread-sensitive, as Django does."""
    thread = _current.get()
    return _shared if thread is not None and thread.long_lived else None


class RequestThreads:
    """An ASGI wrapper: each HTTP request's synchronous work on its own `RequestThread`."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        thread = RequestThread()
        scope = {**scope, REQUEST_THREAD: thread}

        async def sending(message):
            if message["type"] == "http.response.start" and thread.long_lived:
                # The middleware has answered: nothing of the request runs on its thread any more.
                thread.release()
            await send(message)

        token = _current.set(thread)
        try:
            # Django's handler enters a context of its own inside this one, which keeps this one.
            async with ThreadSensitiveContext(executor=thread):
                await self.app(scope, receive, sending)
        finally:
            _current.reset(token)
            # Idle by now (the response is closed): its thread serves the next request.
            thread.shutdown(wait=False)
