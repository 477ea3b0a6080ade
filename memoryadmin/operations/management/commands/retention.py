"""`manage.py retention apply [--dry-run]`: apply the retention policies (cron-able).

    python manage.py retention apply --dry-run     # what would go; writes nothing
    python manage.py retention apply               # remove it, in batches; exit 0 when done
    python manage.py retention policies            # the policies in force
    python manage.py retention set --agent support-bot --keep-checkpoints 20 --purge-archived-days 90
"""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError
from django.template.defaultfilters import filesizeformat

from memoryadmin.errors import DomainError
from memoryadmin.operations import retention
from memoryadmin.operations.models import RetentionPolicy

COLUMNS = ("threads_released", "threads_pruned", "threads_purged", "checkpoints", "pending_writes", "checkpoint_values", "blocks", "items", "bytes")


class Command(BaseCommand):
    help = "Apply retention policies (in batches), preview them with --dry-run, or edit them."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        apply = sub.add_parser("apply", help="Remove what the policies say is past keeping.")
        apply.add_argument("--dry-run", action="store_true", help="only count what would go; write nothing")
        apply.add_argument("--batch", type=int, default=retention.DEFAULT_BATCH, help="rows per transaction")
        apply.add_argument("--max-seconds", type=float, default=None, help="stop between batches after this long")
        apply.add_argument("--json", action="store_true", help="print the result as JSON")
        sub.add_parser("policies", help="List the policies.")
        setp = sub.add_parser("set", help="Create or replace one agent's policy (empty rules keep forever).")
        setp.add_argument("--agent", default="", help="agent_code; omit for the default policy")
        setp.add_argument("--keep-checkpoints", type=int)
        setp.add_argument("--release-idle-days", type=int)
        setp.add_argument("--purge-archived-days", type=int)
        setp.add_argument("--store-ttl-days", type=int)
        delete = sub.add_parser("delete", help="Remove one agent's policy.")
        delete.add_argument("--agent", default="")

    def handle(self, *args, **options):
        try:
            getattr(self, f"_{options['action']}")(options)
        except DomainError as exc:
            raise CommandError(exc.message) from exc

    def _table(self, rows: list[tuple[str, dict]]) -> None:
        self.stdout.write(f"{'POLICY':20} " + " ".join(f"{name:>16}" for name in COLUMNS))
        for label, counts in rows:
            cells = [filesizeformat(counts.get(name, 0)) if name == "bytes" else str(counts.get(name, 0)) for name in COLUMNS]
            self.stdout.write(f"{label[:20]:20} " + " ".join(f"{cell:>16}" for cell in cells))

    def _apply(self, options):
        if options["dry_run"]:
            report = retention.retention_preview()
            if options["json"]:
                body = {
                    "dry_run": True,
                    "now": report.now.isoformat(),
                    "policies": [item.as_dict() for item in report.policies],
                    "total": report.total.as_dict(),
                }
                self.stdout.write(json.dumps(body, indent=2))
                return
            rows = [(item.policy["agent_code"] or "(default)", item.impact.as_dict()) for item in report.policies]
            self._table([*rows, ("TOTAL", report.total.as_dict())])
            self.stdout.write("dry run: nothing was written")
            return
        run = retention.retention_apply(batch=options["batch"], max_seconds=options["max_seconds"], via="cli")
        if options["json"]:
            body = {"run": run.pk, "status": run.status, "batches": run.batches, "policies": run.policies, "total": run.counts}
            self.stdout.write(json.dumps(body, indent=2))
        else:
            rows = [(item["policy"]["agent_code"] or "(default)", item["impact"]) for item in run.policies]
            self._table([*rows, ("TOTAL", run.counts)])
            self.stdout.write(f"run {run.pk}: {run.status} in {run.batches} batches")
        if run.status == "partial":
            raise CommandError(f"run {run.pk} stopped at --max-seconds; run it again to continue")

    def _policies(self, options):
        policies = list(RetentionPolicy.objects.order_by("agent_code"))
        if not policies:
            self.stdout.write("no retention policy: everything is kept")
            return
        self.stdout.write(f"{'AGENT':20} {'KEEP CKPTS':>10} {'RELEASE IDLE':>12} {'PURGE ARCH.':>12} {'STORE TTL':>10}")
        for p in policies:
            cells = [p.keep_checkpoints, p.release_idle_days, p.purge_archived_days, p.store_ttl_days]
            shown = ["-" if value is None else str(value) for value in cells]
            self.stdout.write(
                f"{(p.agent_code or '(default)')[:20]:20} {shown[0]:>10} {shown[1] + 'd' if cells[1] else '-':>12} "
                f"{shown[2] + 'd' if cells[2] else '-':>12} {shown[3] + 'd' if cells[3] else '-':>10}"
            )

    def _set(self, options):
        policy = retention.retention_policy_save(
            actor=None,
            agent_code=options["agent"],
            keep_checkpoints=options["keep_checkpoints"],
            release_idle_days=options["release_idle_days"],
            purge_archived_days=options["purge_archived_days"],
            store_ttl_days=options["store_ttl_days"],
        )
        self.stdout.write(f"saved policy {policy}")

    def _delete(self, options):
        retention.retention_policy_delete(actor=None, agent_code=options["agent"])
        self.stdout.write(f"deleted policy {options['agent'] or '(default)'}")
