"""`manage.py bulk_jobs list|run`: bulk jobs from the command line (the queue's worker runs them too).

    python manage.py bulk_jobs list
    python manage.py bulk_jobs run            # finish every pending or running job
    python manage.py bulk_jobs run --job 12
"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from memoryadmin.errors import DomainError
from memoryadmin.operations.bulk import BATCH, bulk_run
from memoryadmin.operations.models import BulkJob


class Command(BaseCommand):
    help = "List bulk jobs, or run unfinished ones to their end (each batch its own transaction)."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        sub.add_parser("list", help="The latest jobs.")
        run = sub.add_parser("run", help="Process unfinished jobs.")
        run.add_argument("--job", type=int, help="only this job")
        run.add_argument("--batch", type=int, default=BATCH, help="threads per transaction")

    def handle(self, *args, **options):
        if options["action"] == "list":
            for job in BulkJob.objects.order_by("-id")[:50]:
                self.stdout.write(
                    f"{job.pk:6} {job.action:8} {job.status:8} {job.processed}/{job.total} by {job.actor_name} {job.created_at:%Y-%m-%d %H:%M}"
                )
            return
        jobs = BulkJob.objects.filter(status__in=[BulkJob.Status.PENDING, BulkJob.Status.RUNNING]).order_by("pk")
        if options["job"]:
            jobs = BulkJob.objects.filter(pk=options["job"])
            if not jobs.exists():
                raise CommandError(f"no bulk job {options['job']}")
        for job_id in list(jobs.values_list("pk", flat=True)):
            try:
                job = bulk_run(job_id=job_id, batch=options["batch"])
            except DomainError as exc:
                raise CommandError(f"job {job_id}: {exc.message}") from exc
            self.stdout.write(f"job {job.pk}: {job.status}, {job.counts}")
