"""The queue's own upkeep: jobs of dead workers go back to the queue (memoryadmin/queue.py)."""

from __future__ import annotations

from procrastinate.contrib.django import app

from memoryadmin import queue


@app.periodic(cron="* * * * *", periodic_id="jobs-retry-stalled")
@app.task(name="jobs_retry_stalled", queue=queue.QUEUE, queueing_lock="jobs-retry-stalled", pass_context=True)
async def jobs_retry_stalled(context, timestamp: int) -> None:
    """Every minute: a job whose worker stopped sending heartbeats is queued again."""
    await queue.jobs_retry_stalled(context.app)
