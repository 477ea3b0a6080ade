"""The job queue: procrastinate on PostgreSQL, the job run in place on SQLite.

docs/operations.md, "Jobs". On PostgreSQL a job is a row of `procrastinate_jobs`,
written through Django's own connection, so it commits (or rolls back) with the
transaction that asks for it: a bulk job's row and its queue entry exist together
or not at all. Workers (`manage.py jobs_worker`) take jobs with `SELECT … FOR UPDATE
SKIP LOCKED` and wake on `LISTEN/NOTIFY`, on a connection of their own
(`DATABASE_WORKER_URL`, for when the application's goes through a transaction pooler).

SQLite has no queue: `job_enqueue` runs the task in the same process once the
transaction commits, which is what a development server on a file database can
honestly offer (and `manage.py bulk_jobs run` finishes a job interrupted there).
procrastinate's Django app closes a task's database connections around it, as Django
does around a request.
"""

from __future__ import annotations

import datetime
import logging
from typing import Any, Iterable

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connection, connections, transaction
from procrastinate import PsycopgConnector
from procrastinate.contrib.django import app
from procrastinate.contrib.django.utils import connector_params
from prometheus_client.core import GaugeMetricFamily

logger = logging.getLogger(__name__)

QUEUE = "jobs"
QUEUE_APP_LABEL = "procrastinate"


def is_queued() -> bool:
    """True where jobs go to the queue (PostgreSQL); False where they run in place (SQLite)."""
    return settings.MEMORYADMIN_JOBS_QUEUE


class QueueRouter:
    """The queue's migrations (PostgreSQL functions, types, triggers) run on PostgreSQL only.

    On SQLite `migrate` records them as applied and runs nothing, so `/healthz` still
    finds every app's latest migration.
    """

    def allow_migrate(self, db, app_label, **hints):
        if app_label != QUEUE_APP_LABEL:
            return None
        return db == DEFAULT_DB_ALIAS and connections[db].vendor == "postgresql"


def job_enqueue(name: str, **kwargs: Any) -> int | None:
    """Queue the task named `name` with `kwargs` in the current transaction.

    Returns the queue's job id, or None where the task ran in place (SQLite): there it
    runs after the surrounding transaction commits, so it sees what the caller wrote,
    exactly as a worker would. Tasks are named, not imported, so a service can queue a
    task defined in the module that imports it (the app's `tasks.py`).
    """
    if is_queued():
        return app.configure_task(name, allow_unknown=False).defer(**kwargs)
    task = app.tasks[name]
    transaction.on_commit(lambda: task(**kwargs))
    return None


def worker_connector() -> PsycopgConnector:
    """The worker's own connection pool: DATABASE_WORKER_URL, else the application's database."""
    params = connector_params(DEFAULT_DB_ALIAS)
    params.pop("pool", None)
    direct = settings.MEMORYADMIN_WORKER_DATABASE
    if direct:
        for key, name in (("dbname", "NAME"), ("user", "USER"), ("password", "PASSWORD"), ("host", "HOST"), ("port", "PORT")):
            if direct.get(name):
                params[key] = direct[name]
    return PsycopgConnector(kwargs=params)


async def jobs_retry_stalled(app) -> list[int]:
    """Put back in the queue the jobs of workers that stopped sending heartbeats.

    A worker killed mid-job leaves its job `doing`; the work it had not committed was
    rolled back with its connection, so running the job again resumes where the last
    committed batch left it.
    """
    seconds = settings.PROCRASTINATE_WORKER_DEFAULTS["stalled_worker_timeout"]
    retried = []
    for job in await app.job_manager.get_stalled_jobs(seconds_since_heartbeat=seconds):
        await app.job_manager.retry_job(job)
        retried.append(job.id)
        logger.warning("job %s (%s) of a stalled worker is queued again", job.id, job.task_name)
    return retried


QUEUE_STATS_SQL = """
SELECT job.queue_name, job.status, count(*) AS jobs,
       coalesce(extract(epoch FROM now() - min(deferred.at)), 0) AS oldest
  FROM procrastinate_jobs job
  LEFT JOIN LATERAL (
       SELECT min(event.at) AS at FROM procrastinate_events event
        WHERE event.job_id = job.id AND event.type = 'deferred'
  ) deferred ON true
 WHERE job.status IN ('todo', 'doing')
   AND (job.status = 'doing' OR job.scheduled_at IS NULL OR job.scheduled_at <= now())
 GROUP BY job.queue_name, job.status
"""


def queue_stats() -> list[dict[str, Any]]:
    """Jobs waiting (`todo`, due now) and running (`doing`) per queue, with the age of the oldest.

    One statement; empty where there is no queue (SQLite).
    """
    if not is_queued():
        return []
    with connection.cursor() as cursor:
        cursor.execute(QUEUE_STATS_SQL)
        return [
            {"queue": queue, "status": status, "jobs": jobs, "oldest_seconds": float(oldest)}
            for queue, status, jobs, oldest in cursor.fetchall()
        ]


class QueueCollector:
    """Prometheus gauges read from the queue at scrape time (the same for every process)."""

    def collect(self) -> Iterable[GaugeMetricFamily]:
        depth = GaugeMetricFamily("jobs_queue_depth", "Jobs waiting (todo) or running (doing).", labels=["queue", "status"])
        age = GaugeMetricFamily(
            "jobs_queue_oldest_seconds",
            "Age of the oldest waiting (todo) or running (doing) job, from when it was queued.",
            labels=["queue", "status"],
        )
        rows = {(row["queue"], row["status"]): row for row in queue_stats()}
        if is_queued():
            for status in ("todo", "doing"):
                rows.setdefault((QUEUE, status), {"jobs": 0, "oldest_seconds": 0.0})
        for (queue, status), row in sorted(rows.items()):
            depth.add_metric([queue, status], row["jobs"])
            age.add_metric([queue, status], row["oldest_seconds"])
        yield depth
        yield age


def timestamp_datetime(timestamp: int) -> datetime.datetime:
    """A periodic job's scheduled instant (seconds since the epoch) as an aware datetime."""
    return datetime.datetime.fromtimestamp(timestamp, tz=datetime.timezone.utc)
