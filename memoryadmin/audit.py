"""The audit log: every write to it goes through `audit_record` (or `audit_record_once`,
which adds an event only when the same one was not recorded within a window).

The log is append-only: this module only adds events, and `AuditEvent` refuses
updates and deletes (memoryadmin/models.py). Nothing in the application can
edit or remove an event; the database owner can, and that is outside the app.

Where an event comes from: `audit_record` takes the request when the caller has
it. Selectors deep in a read path do not, so the client address of the request
being served is also kept in a context variable, set when Django starts handling
a request (the `request_started` signal carries the WSGI environ or ASGI scope)
and cleared when it finishes.
"""

from __future__ import annotations

from contextvars import ContextVar
from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.core.signals import request_finished, request_started
from django.db import connections, router
from django.utils import timezone

from .models import AuditEvent

# (client address, path) of the request being served in this thread or task.
_current_request: ContextVar[tuple[str | None, str] | None] = ContextVar("memoryadmin_current_request", default=None)


def _request_started(sender, environ=None, scope=None, **kwargs) -> None:
    if environ is not None:
        _current_request.set((environ.get("REMOTE_ADDR") or None, environ.get("PATH_INFO", "")))
    elif scope is not None:
        client = scope.get("client")
        _current_request.set((client[0] if client else None, scope.get("path", "")))


def _request_finished(sender, **kwargs) -> None:
    _current_request.set(None)


request_started.connect(_request_started, dispatch_uid="memoryadmin.audit.request_started")
request_finished.connect(_request_finished, dispatch_uid="memoryadmin.audit.request_finished")


def client_ip(request) -> str | None:
    if request is None:
        current = _current_request.get()
        return current[0] if current else None
    return request.META.get("REMOTE_ADDR") or None


def current_path() -> str:
    current = _current_request.get()
    return current[1] if current else ""


def audit_record(
    *, actor, action: str, target: str = "", detail: dict[str, Any] | None = None, request=None
) -> AuditEvent:
    authenticated = actor is not None and getattr(actor, "is_authenticated", False)
    return AuditEvent.objects.create(
        actor=actor if authenticated else None,
        actor_name=actor.get_username() if authenticated else "anonymous" if actor is not None else "system",
        action=action,
        target=target[:200],
        detail=detail or {},
        ip=client_ip(request),
    )


def audit_records(*, actor, action: str, events: list[tuple[str, dict[str, Any]]], request=None) -> list[AuditEvent]:
    """One event per (target, detail) of `events`, each as `audit_record` writes it, in one INSERT."""
    authenticated = actor is not None and getattr(actor, "is_authenticated", False)
    actor_name = actor.get_username() if authenticated else "anonymous" if actor is not None else "system"
    ip = client_ip(request)
    return AuditEvent.objects.bulk_create(
        [
            AuditEvent(
                actor=actor if authenticated else None, actor_name=actor_name, action=action,
                target=target[:200], detail=detail or {}, ip=ip,
            )
            for target, detail in events
        ]
    )


def _record_sql(connection, columns: list[str]) -> str:
    """INSERT one event unless the same actor recorded the same action on the same target
    since a given instant: one statement, so a repeated read costs what a first one does."""
    quote = connection.ops.quote_name
    table = quote(AuditEvent._meta.db_table)
    # PostgreSQL types the parameters of a bare SELECT list as text: say what each column takes.
    casts = {"detail": "::jsonb", "ip": "::inet", "created_at": "::timestamptz", "actor_id": "::bigint"}
    values = ", ".join("%s" + (casts.get(column, "") if connection.vendor == "postgresql" else "") for column in columns)
    since = "%s::timestamptz" if connection.vendor == "postgresql" else "%s"
    actor = "%s::bigint" if connection.vendor == "postgresql" else "%s"
    return (
        f"INSERT INTO {table} ({', '.join(quote(column) for column in columns)}) SELECT {values}"
        f" WHERE NOT EXISTS (SELECT 1 FROM {table} WHERE {quote('target')} = %s AND {quote('action')} = %s"
        f" AND {quote('actor_id')} = {actor} AND {quote('created_at')} >= {since})"
    )


def audit_record_once(*, actor, action: str, target: str, detail: dict[str, Any], window: int, request=None) -> None:
    """Record the event, unless `actor` recorded `action` on `target` in the last `window` seconds.

    One statement either way (an INSERT ... WHERE NOT EXISTS served by the target
    index). A window of 0 records every time. For authenticated actors only.
    """
    if window <= 0:
        audit_record(actor=actor, action=action, target=target, detail=detail, request=request)
        return
    connection = connections[router.db_for_write(AuditEvent)]
    now = timezone.now()
    fields = {field.name: field for field in AuditEvent._meta.concrete_fields}
    row = {
        "actor": actor.pk,
        "actor_name": actor.get_username(),
        "action": action,
        "target": target[:200],
        "detail": detail,
        "ip": client_ip(request),
        "created_at": now,
    }
    columns = [fields[name].column for name in row]
    params = [fields[name].get_db_prep_save(value, connection) for name, value in row.items()]
    since = fields["created_at"].get_db_prep_save(now - timedelta(seconds=window), connection)
    params += [row["target"], action, actor.pk, since]
    with connection.cursor() as cursor:
        cursor.execute(_record_sql(connection, columns), params)


def _username(user_id: int | None) -> str | None:
    if user_id is None:
        return None
    model = get_user_model()
    return model._default_manager.filter(pk=user_id).values_list(model.USERNAME_FIELD, flat=True).first()


def audit_denial(*, request, exc) -> None:
    """Record an ownership or role refusal (a `Forbidden` raised by a service).

    The event's actor is who asked. A refusal on ownership (a taken thread id,
    another user's store key) also names the object's owner in the detail, next
    to the actor, so the owner is never mistaken for the one refused.
    """
    actor = getattr(request, "user", None)
    detail = {"attempted": exc.action, "reason": exc.message, "method": request.method, "path": request.path}
    owner_id = getattr(exc, "owner_id", None)
    if owner_id is not None:
        authenticated = actor is not None and getattr(actor, "is_authenticated", False)
        detail["actor"] = actor.get_username() if authenticated else "anonymous"
        detail["owner"] = _username(owner_id)
    audit_record(actor=actor, action="access.denied", target=exc.target, detail=detail, request=request)


def audit_foreign_read(
    *,
    actor,
    owner,
    target: str,
    action: str = "thread.read",
    detail: dict[str, Any] | None = None,
    window: int = 0,
) -> None:
    """Record that an operator or admin read something another user owns (docs/operations.md, "Audit log").

    Called on every read of another user's thread (each page view, each API
    call), so it costs exactly one statement: the actor and owner are already
    loaded, the address comes from the context variable, nothing is looked up.
    With a `window`, a read of the same target by the same actor within that
    many seconds of the last recorded one adds nothing (memoryadmin.policy).
    """
    audit_record_once(
        actor=actor,
        action=action,
        target=target,
        detail={"owner": owner.get_username(), "path": current_path()[:300], **(detail or {})},
        window=window,
    )
