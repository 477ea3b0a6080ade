"""The store's periodic job on the queue: the TTL sweep (MEMORYADMIN_STORE_SWEEP_SCHEDULE)."""

from __future__ import annotations

from django.conf import settings
from procrastinate.contrib.django import app

from memoryadmin import queue
from store_app.services import store_item_sweep


def store_sweep(timestamp: int) -> None:
    """Expired items deleted as of the scheduled instant, in batches (store_app.services)."""
    store_item_sweep(now=queue.timestamp_datetime(timestamp))


if settings.MEMORYADMIN_STORE_SWEEP_SCHEDULE:
    app.periodic(cron=settings.MEMORYADMIN_STORE_SWEEP_SCHEDULE, periodic_id="store-sweep")(
        app.task(name="store_sweep", queue=queue.QUEUE, queueing_lock="store-sweep")(store_sweep)
    )
