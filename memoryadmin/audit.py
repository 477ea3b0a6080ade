"""The audit log: every write to it goes through `audit_record`."""

from __future__ import annotations

from typing import Any

from .models import AuditEvent


def client_ip(request) -> str | None:
    if request is None:
        return None
    return request.META.get("REMOTE_ADDR") or None


def audit_record(
    *, actor, action: str, target: str = "", detail: dict[str, Any] | None = None, request=None
) -> AuditEvent:
    authenticated = actor is not None and getattr(actor, "is_authenticated", False)
    return AuditEvent.objects.create(
        actor=actor if authenticated else None,
        actor_name=actor.get_username() if authenticated else "anonymous",
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
