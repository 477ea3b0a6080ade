"""The audit log: every write to it goes through `audit_record`.

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
from typing import Any

from django.core.signals import request_finished, request_started

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


def audit_denial(*, request, exc) -> None:
    """Record an ownership or role refusal (a `Forbidden` raised by a service)."""
    audit_record(
        actor=getattr(request, "user", None),
        action="access.denied",
        target=exc.target,
        detail={"attempted": exc.action, "reason": exc.message, "method": request.method, "path": request.path},
        request=request,
    )


def audit_foreign_read(*, actor, owner, target: str, action: str = "thread.read", detail: dict[str, Any] | None = None) -> None:
    """Record that an operator or admin read something another user owns (docs/architecture.md, rule A4).

    Called on every read of another user's thread (each page view, each API
    call), so it costs exactly one INSERT: the actor and owner are already
    loaded, the address comes from the context variable, nothing is looked up.
    """
    audit_record(
        actor=actor,
        action=action,
        target=target,
        detail={"owner": owner.get_username(), "path": current_path()[:300], **(detail or {})},
    )
