"""The audit log page and its exports (admins only). Thin: memoryadmin/selectors.py reads."""

from __future__ import annotations

import csv
from collections.abc import Iterator

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.utils.http import urlencode
from django.views.decorators.http import require_GET

from memoryadmin.json import dumps

from .audit import audit_record
from .params import parse_choice
from .selectors import KNOWN_ACTIONS, AuditFilter, audit_event_page, audit_events

EXPORT_CHUNK = 2000
CSV_COLUMNS = ("id", "created_at", "actor", "action", "target", "ip", "detail")


@require_GET
@login_required
def audit_log(request: HttpRequest) -> HttpResponse:
    filters = AuditFilter.from_params(request.GET)
    page = audit_event_page(
        actor=request.user,
        filters=filters,
        before=request.GET.get("before", ""),
        after=request.GET.get("after", ""),
    )
    query = filters.as_params()
    context = {
        "page": page,
        "filters": filters,
        "query": urlencode(query),
        "known_actions": KNOWN_ACTIONS,
        "older_url": f"?{urlencode({**query, 'before': page.older})}" if page.older else "",
        "newer_url": f"?{urlencode({**query, 'after': page.newer})}" if page.newer else "",
    }
    template = "memoryadmin/audit.html"
    if request.htmx and request.htmx.target == "audit-table":
        template += "#audit-table"
    return render(request, template, context)


class _Echo:
    """A file-like object whose write returns what it was given (csv.writer into a generator)."""

    def write(self, value: str) -> str:
        return value


def _rows(queryset) -> Iterator:
    return queryset.iterator(chunk_size=EXPORT_CHUNK)


def _csv_lines(queryset) -> Iterator[str]:
    writer = csv.writer(_Echo())
    yield writer.writerow(CSV_COLUMNS)
    for event in _rows(queryset):
        yield writer.writerow(
            [
                event.pk,
                event.created_at.isoformat(),
                event.actor_name,
                event.action,
                event.target,
                event.ip or "",
                dumps(event.detail).decode(),
            ]
        )


def _json_lines(queryset) -> Iterator[bytes]:
    yield b"["
    first = True
    for event in _rows(queryset):
        record = {
            "id": event.pk,
            "created_at": event.created_at.isoformat(),
            "actor": event.actor_name,
            "action": event.action,
            "target": event.target,
            "ip": event.ip,
            "detail": event.detail,
        }
        yield (b"\n" if first else b",\n") + dumps(record)
        first = False
    yield b"\n]\n"


@require_GET
@login_required
def audit_export(request: HttpRequest) -> StreamingHttpResponse:
    """The filtered log as CSV or JSON, streamed: rows are read in chunks, never all at once."""
    fmt = parse_choice(request.GET.get("format") or None, "format", ("csv", "json"), "csv")
    filters = AuditFilter.from_params(request.GET)
    events = audit_events(actor=request.user, filters=filters)
    audit_record(
        actor=request.user, action="audit.export", target="audit", detail={"format": fmt, "filters": filters.as_params()}, request=request
    )
    stamp = timezone.now().strftime("%Y%m%d-%H%M%S")
    if fmt == "csv":
        response = StreamingHttpResponse(_csv_lines(events), content_type="text/csv; charset=utf-8")
    else:
        response = StreamingHttpResponse(_json_lines(events), content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="audit-{stamp}.{fmt}"'
    return response
