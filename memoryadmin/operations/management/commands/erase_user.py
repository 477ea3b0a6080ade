"""`manage.py erase_user USERNAME`: delete all of one user's data and print the receipt.

    python manage.py erase_user alice --dry-run          # counts only; writes nothing
    python manage.py erase_user alice --revoke-access    # deactivate and revoke keys first, then erase
"""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from memoryadmin.errors import DomainError
from memoryadmin.operations.erase import BATCH, user_erase, user_erase_preview


class Command(BaseCommand):
    help = "Erase every thread, block, checkpoint and store item of one user (data-protection requests)."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--dry-run", action="store_true", help="print what would be deleted; write nothing")
        parser.add_argument("--revoke-access", action="store_true", help="deactivate the account and revoke its API keys first")
        parser.add_argument("--batch", type=int, default=BATCH, help="rows per transaction")
        parser.add_argument("--yes", action="store_true", help="do not ask for confirmation")

    def handle(self, *args, username: str, dry_run: bool, revoke_access: bool, batch: int, yes: bool, **options):
        try:
            preview = user_erase_preview(actor=None, username=username)
            if dry_run:
                self.stdout.write(json.dumps({"dry_run": True, **preview}, indent=2))
                return
            if not yes and options.get("interactive", True):
                answer = input(
                    f"Erase {preview['threads']} threads, {preview['blocks']} blocks, {preview['checkpoints']} checkpoints, "
                    f"{preview['store_items']} store items and {preview['graph_definitions']} graph definitions of {username}? "
                    "Type the username to confirm: "
                )
                if answer.strip() != username:
                    raise CommandError("not confirmed; nothing was erased")
            receipt = user_erase(actor=None, username=username, revoke_access=revoke_access, batch=batch)
        except DomainError as exc:
            raise CommandError(exc.message) from exc
        self.stdout.write(json.dumps(receipt, indent=2))
