"""`manage.py demo_data`: users of each role and living data, written through the services."""

from __future__ import annotations

import importlib

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction

from memoryadmin import roles

DEMO_USERS = (
    ("admin", "admin"),
    ("operator", "operator"),
    ("alice", "member"),
    ("bob", "member"),
)
DEMO_MODULES = ("memoryadmin.demo.threads", "memoryadmin.demo.checkpoints", "memoryadmin.demo.store", "memoryadmin.demo.graphs")


class Command(BaseCommand):
    help = "Load demo users and data (idempotent: existing demo users are kept, their data is added once)."

    def add_arguments(self, parser):
        parser.add_argument("--password", default="memoryadmin", help="password for every demo user")

    def handle(self, *args, password: str, **options):
        User = get_user_model()
        users = {}
        fresh = False
        with transaction.atomic():
            for username, role in DEMO_USERS:
                user, created = User.objects.get_or_create(username=username)
                if created:
                    fresh = True
                    user.set_password(password)
                    # The demo admin also opens Django's own admin (/django-admin/).
                    user.is_staff = user.is_superuser = role == "admin"
                    user.save()
                roles.role_set(user, role)
                users[username] = user
        if not fresh:
            self.stdout.write("demo users exist already; data not loaded again")
            return
        for name in DEMO_MODULES:
            try:
                module = importlib.import_module(name)
            except ModuleNotFoundError as exc:
                if exc.name != name:
                    raise
                continue
            module.load(users)
            self.stdout.write(f"loaded {name}")
        self.stdout.write(
            "demo users: " + ", ".join(f"{u} ({r})" for u, r in DEMO_USERS) + f"; password: {password}"
        )
