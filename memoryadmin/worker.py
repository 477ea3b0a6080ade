"""The production server's worker class (gunicorn.conf.py): uvicorn's gunicorn worker, stopping cleanly
with live-turn streams open.

A uvicorn worker stops when gunicorn tells it to (SIGTERM at a deploy or a scale-down) or by itself
after max_requests. It then closes its sockets and waits for every response in progress to end
before it exits — and meanwhile its loop no longer tells gunicorn that it is alive. A live-turn
stream is a response that lasts up to MEMORYADMIN_TURN_SSE_MAX_SECONDS: with streams open, the
worker waited on them until gunicorn took it for stuck and killed it after `timeout` seconds,
breaking every stream it held and leaving their leases to expire (meanwhile they count against
the stream limits, docs/turns.md).

`Worker` stops in this order instead:

1. its streams end at once (memoryadmin/draining.py): each sends `event: timeout`, which the
   dashboard answers by reading its panel again and opening a new stream, on another worker;
   their leases are released as any stream's are;
2. uvicorn's own shutdown: no new connection, the responses in progress finish;
3. meanwhile the worker still tells gunicorn it is alive, and the wait is bounded by gunicorn's
   `graceful_timeout` (past it, the requests still running are cancelled).
"""

from __future__ import annotations

import asyncio
import sys

from gunicorn.arbiter import Arbiter
from uvicorn.server import Server
from uvicorn_worker import UvicornWorker

from memoryadmin import draining


class StoppingServer(Server):
    """uvicorn's server whose shutdown ends the long-lived responses first and keeps the worker's
    heartbeat going until it is done."""

    def __init__(self, config, heartbeat):
        super().__init__(config=config)
        self._heartbeat = heartbeat

    async def shutdown(self, sockets=None) -> None:
        draining.stop()
        beating = asyncio.get_running_loop().create_task(self._beat())
        try:
            await super().shutdown(sockets=sockets)
        finally:
            beating.cancel()

    async def _beat(self) -> None:
        while True:
            self._heartbeat()
            await asyncio.sleep(1)


class Worker(UvicornWorker):
    """gunicorn's uvicorn worker with `StoppingServer`, its shutdown bounded by graceful_timeout."""

    async def _serve(self) -> None:
        self.config.app = self.wsgi
        self.config.timeout_graceful_shutdown = self.cfg.graceful_timeout
        server = StoppingServer(self.config, self.notify)
        self._install_sigquit_handler()
        await server.serve(sockets=self.sockets)
        if not server.started:
            sys.exit(Arbiter.WORKER_BOOT_ERROR)
