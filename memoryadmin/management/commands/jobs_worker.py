"""`manage.py jobs_worker`: run the job queue's worker (PostgreSQL).

    python manage.py jobs_worker                  # until SIGTERM or Ctrl-C
    python manage.py jobs_worker --concurrency 4
    python manage.py jobs_worker --one-shot       # run what is due, then exit

procrastinate's worker, on its own connection (DATABASE_WORKER_URL, else
DATABASE_URL): it waits on LISTEN/NOTIFY for new jobs, takes each with
`SELECT … FOR UPDATE SKIP LOCKED` (so any number of workers share a queue), defers
the periodic jobs (retention, the store sweep) and sends a heartbeat. At start it
first puts back the jobs of workers whose heartbeat stopped (a worker killed
mid-job), as its periodic `jobs_retry_stalled` does every minute.
SIGTERM (or SIGINT) stops it after the running jobs end.
"""

from __future__ import annotations

import asyncio

from django.core.management.base import BaseCommand, CommandError
from procrastinate.contrib.django import app

from memoryadmin import queue


class Command(BaseCommand):
    help = "Run the job queue's worker: bulk jobs, retention, erase, and the periodic jobs."

    def add_arguments(self, parser):
        parser.add_argument(
            "--concurrency", type=int, default=None, help="jobs run at once (default MEMORYADMIN_WORKER_CONCURRENCY)"
        )
        parser.add_argument("--one-shot", action="store_true", help="run the jobs that are due, then exit")
        parser.add_argument("--name", default=None, help="the worker's name in logs")

    def handle(self, *args, **options):
        if not queue.is_queued():
            raise CommandError(
                "the job queue needs PostgreSQL (DATABASE_URL=postgres://…); on SQLite jobs run where they "
                "are started, and `manage.py bulk_jobs run` finishes interrupted ones."
            )
        worker = {"queues": [queue.QUEUE], "wait": not options["one_shot"], "install_signal_handlers": True}
        if options["concurrency"] is not None:
            if options["concurrency"] < 1:
                raise CommandError("--concurrency must be at least 1")
            worker["concurrency"] = options["concurrency"]
        if options["name"]:
            worker["name"] = options["name"]
        with app.replace_connector(queue.worker_connector()) as worker_app:
            asyncio.run(_run(worker_app, worker))


async def _run(worker_app, options) -> None:
    async with worker_app.open_async():
        await queue.jobs_retry_stalled(worker_app)
        # PROCRASTINATE_WORKER_DEFAULTS (settings) supply concurrency, heartbeat and clean-up.
        await worker_app.run_worker_async(**options)
