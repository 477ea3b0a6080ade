"""`manage.py apikey create|list|revoke`: API keys from the command line."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from memoryadmin import roles
from memoryadmin.accounts import account_key_issue, account_key_revoke, account_keys
from memoryadmin.errors import DomainError, NotFound


class Command(BaseCommand):
    help = "Create, list and revoke API keys."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        create = sub.add_parser("create", help="Make a key; it is printed once, alone on the last line.")
        create.add_argument("--user", required=True, help="username that owns the key")
        create.add_argument("--create-user", action="store_true", help="create the user if missing")
        create.add_argument("--role", choices=roles.ROLES, help="set the user's role")
        create.add_argument("--name", default="", help="a label for the key")
        listing = sub.add_parser("list", help="List keys (prefixes only).")
        listing.add_argument("--user", help="only this user's keys")
        revoke = sub.add_parser("revoke", help="Revoke a key by its prefix.")
        revoke.add_argument("prefix")

    def handle(self, *args, **options):
        getattr(self, f"_{options['action']}")(options)

    def _create(self, options):
        username = options["user"]
        existed = get_user_model().objects.filter(username=username).exists()
        try:
            issued = account_key_issue(
                actor=None, username=username, name=options["name"], create_user=options["create_user"], role=options["role"]
            )
        except DomainError as exc:
            hint = "; pass --create-user to make one" if isinstance(exc, NotFound) else ""
            raise CommandError(f"{exc.message}{hint}") from exc
        user = issued.api_key.owner
        if not existed:
            self.stdout.write(f"created user {username}")
        self.stdout.write(f"key {issued.api_key.prefix} for {username} ({roles.role_of(user)}); it is shown once:")
        self.stdout.write(issued.plaintext)

    def _list(self, options):
        keys = account_keys(actor=None, username=options.get("user")).order_by("owner__username", "-created_at")
        self.stdout.write(f"{'PREFIX':10} {'USER':20} {'NAME':20} {'CREATED':20} {'LAST USED':20} STATUS")
        for key in keys:
            self.stdout.write(
                f"{key.prefix:10} {key.owner.username:20} {key.name[:20]:20} "
                f"{key.created_at:%Y-%m-%d %H:%M:%S}  "
                f"{key.last_used_at.strftime('%Y-%m-%d %H:%M:%S') if key.last_used_at else '-':20} "
                f"{'active' if key.is_active else 'revoked'}"
            )

    def _revoke(self, options):
        try:
            key = account_key_revoke(actor=None, prefix=options["prefix"])
        except DomainError as exc:
            raise CommandError(exc.message) from exc
        self.stdout.write(f"revoked {key.prefix}")
