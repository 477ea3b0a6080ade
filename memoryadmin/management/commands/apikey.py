"""`manage.py apikey create|list|revoke`: API keys from the command line."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from memoryadmin import roles
from memoryadmin.apikeys import apikey_create, apikey_revoke
from memoryadmin.audit import audit_record
from memoryadmin.errors import NotFound
from memoryadmin.models import ApiKey


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
        User = get_user_model()
        username = options["user"]
        user = User.objects.filter(username=username).first()
        if user is None:
            if not options["create_user"]:
                raise CommandError(f"no user {username!r}; pass --create-user to make one")
            user = User.objects.create_user(username=username)
            user.set_unusable_password()
            user.save()
            self.stdout.write(f"created user {username}")
        if options["role"]:
            roles.role_set(user, options["role"])
            audit_record(actor=None, action="user.role_set", target=f"user:{username}", detail={"role": options["role"], "via": "cli"})
        elif roles.role_of(user) == "member" and not user.groups.exists():
            roles.role_set(user, "member")
        issued = apikey_create(owner=user, name=options["name"])
        audit_record(actor=None, action="apikey.create", target=f"apikey:{issued.api_key.prefix}", detail={"owner": username, "via": "cli"})
        self.stdout.write(f"key {issued.api_key.prefix} for {username} ({roles.role_of(user)}); it is shown once:")
        self.stdout.write(issued.plaintext)

    def _list(self, options):
        keys = ApiKey.objects.select_related("owner").order_by("owner__username", "-created_at")
        if options.get("user"):
            keys = keys.filter(owner__username=options["user"])
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
            key = apikey_revoke(prefix=options["prefix"])
        except NotFound as exc:
            raise CommandError(exc.message) from exc
        audit_record(actor=None, action="apikey.revoke", target=f"apikey:{key.prefix}", detail={"via": "cli"})
        self.stdout.write(f"revoked {key.prefix}")
