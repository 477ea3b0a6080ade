"""`manage.py store_sweep`: delete expired store items. Safe to run from cron at any interval.

Reads already hide expired items, so how often this runs changes disk use, not
answers. Example crontab line: `*/10 * * * * cd /srv/memoryadmin && .venv/bin/python manage.py store_sweep`.
"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from store_app.services import SWEEP_BATCH, store_item_sweep


class Command(BaseCommand):
    help = "Delete store items whose TTL has run out."

    def add_arguments(self, parser):
        parser.add_argument("--batch", type=int, default=SWEEP_BATCH, help="rows deleted per transaction")

    def handle(self, *args, **options):
        if options["batch"] < 1:
            raise CommandError("--batch must be at least 1")
        deleted = store_item_sweep(batch=options["batch"])
        self.stdout.write(f"swept {deleted} expired store item{'s' if deleted != 1 else ''}")
