"""Filters for the operations pages (audit, retention, bulk, search). Output is plain text:
templates escape it like any other string."""

from __future__ import annotations

from typing import Any

from django import template

register = template.Library()

SUMMARY_MAX = 90


def _scalar(value: Any) -> str | None:
    if isinstance(value, bool) or value is None:
        return str(value).lower()
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str):
        return value if len(value) <= 40 else value[:39] + "…"
    return None


@register.filter
def audit_summary(detail: Any) -> str:
    """A one-line digest of an event's detail: its scalar fields, and counts one level down."""
    if not isinstance(detail, dict):
        return str(detail)[:SUMMARY_MAX]
    parts = []
    for key, value in detail.items():
        text = _scalar(value)
        if text is not None:
            parts.append(f"{key}={text}")
        elif isinstance(value, dict):
            inner = ", ".join(f"{k}={_scalar(v)}" for k, v in value.items() if _scalar(v) is not None)
            if inner:
                parts.append(f"{key}: {inner}")
        elif isinstance(value, list):
            parts.append(f"{key}: {len(value)} item{'s' if len(value) != 1 else ''}")
    summary = "; ".join(parts) or "details"
    return summary if len(summary) <= SUMMARY_MAX else summary[: SUMMARY_MAX - 1] + "…"


@register.filter
def get_item(mapping: Any, key: str) -> Any:
    return mapping.get(key) if isinstance(mapping, dict) else None
