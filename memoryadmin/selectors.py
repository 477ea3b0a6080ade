"""Reads of the audit log. Only admins read it (memoryadmin.policy); every read takes the acting user."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from typing import Any, Mapping

from django.db.models import QuerySet
from django.utils import timezone

from . import policy
from .errors import InvalidInput
from .models import AuditEvent
from .params import parse_cursor, parse_date

AUDIT_PAGE_SIZE = 50
# Suggestions for the action filter; any action can be typed.
KNOWN_ACTIONS = (
    "access.denied",
    "thread.read",
    "thread.list",
    "thread.export",
    "thread.search",
    "store.read",
    "store.list",
    "store.search",
    "graph.read",
    "thread.clear",
    "thread.delete",
    "checkpoint.release",
    "checkpoint.delete_thread",
    "checkpoint.prune",
    "store.delete",
    "store.clear",
    "bulk.start",
    "bulk.finish",
    "bulk.export",
    "retention.apply",
    "retention.policy_save",
    "retention.policy_delete",
    "user.erase",
    "user.role_set",
    "apikey.create",
    "apikey.revoke",
    "audit.export",
)


def audit_ensure_reader(actor) -> None:
    policy.ensure_admin(actor, target="audit", action="audit.read", message="Only an admin may read the audit log.")


def _day_start(day: date) -> datetime:
    return timezone.make_aware(datetime.combine(day, time.min))


@dataclass(frozen=True)
class AuditFilter:
    """The audit page's filters, as kept in its URL."""

    actor: str = ""
    action: str = ""
    target: str = ""
    since: date | None = None
    until: date | None = None

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> "AuditFilter":
        since = parse_date(params.get("since"), name="since")
        until = parse_date(params.get("until"), name="until")
        if since and until and since > until:
            raise InvalidInput("since is after until.", fields={"since": ["is after until."]})
        return cls(
            actor=(params.get("actor") or "").strip()[:150],
            action=(params.get("action") or "").strip()[:64],
            target=(params.get("target") or "").strip()[:200],
            since=since,
            until=until,
        )

    def as_params(self) -> dict[str, str]:
        params = {
            "actor": self.actor,
            "action": self.action,
            "target": self.target,
            "since": self.since.isoformat() if self.since else "",
            "until": self.until.isoformat() if self.until else "",
        }
        return {key: value for key, value in params.items() if value}

    def apply(self, qs: QuerySet[AuditEvent]) -> QuerySet[AuditEvent]:
        if self.actor:
            qs = qs.filter(actor_name=self.actor)
        if self.action:
            # "thread." lists every thread action; a full name matches exactly.
            qs = qs.filter(action__startswith=self.action) if self.action.endswith(".") else qs.filter(action=self.action)
        if self.target:
            qs = qs.filter(target__startswith=self.target[:-1]) if self.target.endswith("*") else qs.filter(target=self.target)
        if self.since:
            qs = qs.filter(created_at__gte=_day_start(self.since))
        if self.until and self.until < date.max:
            qs = qs.filter(created_at__lt=_day_start(self.until + timedelta(days=1)))
        return qs


def audit_events(*, actor, filters: AuditFilter) -> QuerySet[AuditEvent]:
    """Every event matching the filter, newest first (the export streams this)."""
    audit_ensure_reader(actor)
    return filters.apply(AuditEvent.objects.all()).order_by("-id")


@dataclass
class AuditPage:
    events: list[AuditEvent] = field(default_factory=list)
    older: int | None = None  # `before` for the next (older) page
    newer: int | None = None  # `after` for the previous (newer) page


def audit_event_page(*, actor, filters: AuditFilter, before: str = "", after: str = "", size: int = AUDIT_PAGE_SIZE) -> AuditPage:
    """One page of events, keyset-paginated on the id (newest first): one query at any depth.

    Ids grow with time (events are only ever inserted), so `id < before` is the
    next page and `id > after` the previous one, each served by the primary key.
    """
    qs = audit_events(actor=actor, filters=filters)
    before_id, after_id = parse_cursor(before, name="before"), parse_cursor(after, name="after")
    if after_id is not None:
        rows = list(qs.filter(id__gt=after_id).order_by("id")[: size + 1])
        more_newer = len(rows) > size
        events = list(reversed(rows[:size]))
        return AuditPage(
            events=events,
            older=events[-1].pk if events else None,
            newer=events[0].pk if events and more_newer else None,
        )
    if before_id is not None:
        qs = qs.filter(id__lt=before_id)
    rows = list(qs[: size + 1])
    events = rows[:size]
    return AuditPage(
        events=events,
        older=events[-1].pk if len(rows) > size else None,
        newer=events[0].pk if events and before_id is not None else None,
    )


def audit_recent(*, actor, limit: int = 8) -> list[AuditEvent]:
    """The latest events, for the home dashboard (admins only; others get an empty list)."""
    if not policy.may_administer(actor, "audit.read"):
        return []
    return list(AuditEvent.objects.order_by("-id")[:limit])
