"""Dashboard reads from a PostgreSQL streaming replica (`DATABASE_REPLICA_URL`).

Only the operators' dashboard reads there: a GET or HEAD of a page (never the
API, whose agents must read their own writes at once), for the models of the
apps that hold conversations, checkpoints, store items, graphs and the audit
log. Sessions, users and their role groups stay on the primary, and so does
anything read inside `transaction.atomic` or written anywhere. A user who has
just written through the dashboard reads from the primary for
MEMORYADMIN_REPLICA_PIN_SECONDS, so the page after a form shows the change; a
replica that does not answer is skipped for MEMORYADMIN_REPLICA_RETRY_SECONDS.
"""

from __future__ import annotations

import logging
import time
from contextvars import ContextVar

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections

REPLICA = "replica"
PIN_COOKIE = "ma_read_primary"
REPLICATED_APPS = frozenset({"sessions_app", "store_app", "graphs_app", "memoryadmin", "operations"})
SAFE_METHODS = frozenset({"GET", "HEAD"})

_reading_replica: ContextVar[bool] = ContextVar("memoryadmin_reading_replica", default=False)
_replica_down_until = 0.0
log = logging.getLogger(__name__)


def replica_configured() -> bool:
    return REPLICA in settings.DATABASES


class ReplicaRouter:
    """Reads of the replicated apps go to the replica while a dashboard read is under way."""

    def db_for_read(self, model, **hints):
        if (
            _reading_replica.get()
            and model._meta.app_label in REPLICATED_APPS
            and not connections[DEFAULT_DB_ALIAS].in_atomic_block
        ):
            return REPLICA
        return DEFAULT_DB_ALIAS

    def db_for_write(self, model, **hints):
        return DEFAULT_DB_ALIAS

    def allow_relation(self, obj1, obj2, **hints):
        # The replica holds the same rows as the primary.
        return True

    def allow_migrate(self, db, app_label, **hints):
        return db == DEFAULT_DB_ALIAS


def is_dashboard_read(request) -> bool:
    """A page read the replica may answer: not the API, not an operational endpoint,
    not a sign-in page, and not from a user who wrote a moment ago."""
    if request.method not in SAFE_METHODS or PIN_COOKIE in request.COOKIES:
        return False
    path = request.path
    return not path.startswith(("/api/", "/healthz", "/metrics", "/accounts/", "/static/", "/django-admin/"))


def _replica_answers() -> bool:
    global _replica_down_until
    if time.monotonic() < _replica_down_until:
        return False
    try:
        connections[REPLICA].ensure_connection()
    except DatabaseError as exc:
        _replica_down_until = time.monotonic() + settings.MEMORYADMIN_REPLICA_RETRY_SECONDS
        log.warning("replica unavailable, dashboard reads go to the primary: %s", exc)
        return False
    return True


class ReplicaReadsMiddleware:
    """Scopes dashboard reads to the replica and pins recent writers to the primary."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if not replica_configured():
            return self.get_response(request)
        token = None
        if is_dashboard_read(request) and _replica_answers():
            token = _reading_replica.set(True)
        try:
            response = self.get_response(request)
        finally:
            if token is not None:
                _reading_replica.reset(token)
        if request.method not in SAFE_METHODS and getattr(request, "user", None) is not None and request.user.is_authenticated:
            response.set_cookie(
                PIN_COOKIE,
                "1",
                max_age=settings.MEMORYADMIN_REPLICA_PIN_SECONDS,
                httponly=True,
                samesite="Lax",
                secure=request.is_secure(),
            )
        return response
