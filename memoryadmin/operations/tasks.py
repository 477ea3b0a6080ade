"""The operations' jobs on the queue (memoryadmin/queue.py, docs/operations.md "Jobs").

Each job is a loop over batches, and each batch is one transaction that also records
the job's progress, so a worker killed mid-batch loses exactly that batch (rolled back
with its connection) and the job, taken again, resumes after the last committed one.
"""

from __future__ import annotations

from django.conf import settings
from procrastinate.contrib.django import app

from memoryadmin import queue
from memoryadmin.operations import bulk, erase, export, retention


@app.task(name="bulk_job_run", queue=queue.QUEUE)
def bulk_job_run(job_id: int, batch: int = bulk.BATCH) -> None:
    """A bulk job to its end. Two of these on one job share it batch by batch (the job row is locked)."""
    bulk.bulk_run(job_id=job_id, batch=batch)


@app.task(name="retention_run", queue=queue.QUEUE)
def retention_run(run_id: int) -> None:
    """An apply asked for from the page, recorded as its RetentionRun when it was asked."""
    retention.retention_run_queued(run_id=run_id)


@app.task(name="user_erase_run", queue=queue.QUEUE)
def user_erase_run(job_id: int) -> None:
    """An erase too large for the page's request (memoryadmin/operations/erase.py)."""
    erase.user_erase_job_run(job_id=job_id)


@app.task(name="bulk_export_run", queue=queue.QUEUE)
def bulk_export_run(job_id: int) -> None:
    """A bulk export too large to stream in one request, written to a file (memoryadmin/operations/export.py)."""
    export.export_job_run(job_id=job_id)


def retention_scheduled(timestamp: int) -> None:
    """The policies applied at the scheduled instant (MEMORYADMIN_RETENTION_SCHEDULE), as the system."""
    retention.retention_scheduled_apply(now=queue.timestamp_datetime(timestamp))


if settings.MEMORYADMIN_RETENTION_SCHEDULE:
    app.periodic(cron=settings.MEMORYADMIN_RETENTION_SCHEDULE, periodic_id="retention")(
        app.task(name="retention_scheduled", queue=queue.QUEUE, queueing_lock="retention-scheduled")(
            retention_scheduled
        )
    )
