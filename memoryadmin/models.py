from __future__ import annotations

from django.conf import settings
from django.db import models


class ApiKey(models.Model):
    """An agent's credential. Only a SHA-256 hash of the secret is stored."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(max_length=100, blank=True)
    prefix = models.CharField(max_length=16, unique=True)
    secret_hash = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.prefix} ({self.owner})"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


class AuditLogIsAppendOnly(Exception):
    """Raised by any attempt to change or remove an audit event through the application."""


class AuditEventQuerySet(models.QuerySet):
    """Reads and inserts only: the audit log is append-only (docs/operations.md, "Audit log")."""

    def update(self, **kwargs):
        raise AuditLogIsAppendOnly("audit events are never updated")

    def delete(self):
        raise AuditLogIsAppendOnly("audit events are never deleted")

    def bulk_update(self, objs, fields, batch_size=None):
        raise AuditLogIsAppendOnly("audit events are never updated")

    def redact(self, pk: int, *, target: str, detail: dict) -> int:
        """The one change the log takes: erasing a user (memoryadmin/operations/erase.py)
        replaces the user's identifiers in an event's target and detail with "[erased]".

        The event stays, with its actor, action, address and time; no other field can
        be changed and no event removed.
        """
        return models.QuerySet.update(self.filter(pk=pk), target=target, detail=detail)


class AuditEvent(models.Model):
    """One line of the append-only audit log.

    `objects` refuses update and delete, an event refuses to be saved twice or
    deleted. (Deleting a user still works: Django's collector sets `actor` to
    NULL through the base manager, and `actor_name` keeps who it was.)
    """

    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    actor_name = models.CharField(max_length=150, blank=True)
    action = models.CharField(max_length=64)
    target = models.CharField(max_length=200, blank=True)
    detail = models.JSONField(default=dict, blank=True)
    ip = models.GenericIPAddressField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = AuditEventQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["created_at"], name="audit_created_idx"),
            models.Index(fields=["target"], name="audit_target_idx"),
            models.Index(fields=["action", "created_at"], name="audit_action_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.created_at:%Y-%m-%d %H:%M:%S} {self.actor_name} {self.action} {self.target}"

    def save(self, *args, **kwargs):
        if not self._state.adding:
            raise AuditLogIsAppendOnly("audit events are never updated")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise AuditLogIsAppendOnly("audit events are never deleted")
