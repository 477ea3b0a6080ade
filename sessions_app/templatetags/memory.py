from __future__ import annotations

import json
from datetime import datetime
from html import escape
from typing import Any

from django import template
from django.utils import timezone
from django.utils.safestring import mark_safe

from memoryadmin.json import pretty, stored_loads
from sessions_app.checkpoints.wire import lc_envelope

register = template.Library()

# Content longer than this is shown cut, with the whole of it one click away.
COLLAPSE_CHARS = 1200
PREVIEW_CHARS = 600


@register.filter
def pretty_json(value: Any) -> str:
    """Indented JSON as plain text; the template escapes it like any other string. Never fails:
    what is nested too deep to show is marked (memoryadmin/json.py)."""
    if isinstance(value, str):
        try:
            value = stored_loads(value)
        except ValueError:
            return value
    return pretty(value)


def _fields(message: Any) -> dict[str, Any]:
    """A message's own fields: as posted, or inside LangChain's serialised envelope
    (`{"lc": 1, "type": "constructor", "kwargs": {...}}`), as checkpoints hold them."""
    if not isinstance(message, dict):
        return {}
    envelope = lc_envelope(message)
    return envelope[1] if envelope is not None else message


@register.filter
def tool_calls(message: Any) -> list[dict[str, Any]]:
    """Tool calls of a message in OpenAI or LangChain shape, as name, id and arguments."""
    calls = _fields(message).get("tool_calls")
    if not isinstance(calls, list):
        return []
    shown = []
    for call in calls:
        if not isinstance(call, dict):
            continue
        function = call.get("function") if isinstance(call.get("function"), dict) else {}
        arguments = call.get("args", function.get("arguments", {}))
        if isinstance(arguments, str):  # OpenAI sends the arguments as JSON text
            try:
                arguments = json.loads(arguments)
            except ValueError:
                pass
        shown.append({"id": str(call.get("id") or ""), "name": str(call.get("name") or function.get("name") or "?"), "arguments": arguments})
    return shown


@register.filter
def unanswered_calls(window: Any) -> set[str]:
    """The ids of the tool calls in a window of active blocks that no block after them answers,
    when the window reaches the thread's newest block, so that none beyond it could: the page
    says they have no result yet instead of linking to one (an agent paused before its tools)."""
    if getattr(window, "newer", 0) is not None:
        return set()
    waiting: set[str] = set()
    for block in sorted(window.blocks, key=lambda block: block.seq):
        waiting.discard(tool_call_id(block.message))
        waiting.update(call["id"] for call in tool_calls(block.message) if call["id"])
    return waiting


@register.filter
def tool_call_id(message: Any) -> str:
    """The id of the call a tool result answers, "" for other messages."""
    value = _fields(message).get("tool_call_id")
    return str(value) if isinstance(value, (str, int)) and value != "" else ""


@register.filter
def content_parts(message: Any) -> list[dict[str, str]]:
    """The non-text parts of a message's content (images, audio, files…) as what they are:
    a kind and a media type to show as a placeholder. Nothing is ever fetched from a URL
    an agent supplied, and no data is shown inline."""
    content = _fields(message).get("content")
    if not isinstance(content, list):
        return []
    parts = []
    for part in content:
        if not isinstance(part, dict):
            continue
        kind = str(part.get("type") or "part")
        if kind == "text":
            continue
        media = part.get("mime_type") or part.get("media_type") or ""
        source = part.get("source") if isinstance(part.get("source"), dict) else {}
        media = media or source.get("media_type") or ""
        url = part.get("image_url")
        url = url.get("url") if isinstance(url, dict) else url
        if not media and isinstance(url, str) and url.startswith("data:"):
            media = url[5:].split(";", 1)[0].split(",", 1)[0]
        label = kind.replace("_url", "").replace("_", " ")
        parts.append({"kind": label, "media_type": str(media)[:100], "linked": "yes" if isinstance(url, str) and not url.startswith("data:") else ""})
    return parts


@register.filter
def is_long(text: Any) -> bool:
    return isinstance(text, str) and len(text) > COLLAPSE_CHARS


@register.filter
def preview(text: Any) -> str:
    """The start of a long text, cut at a word boundary, with an ellipsis."""
    if not isinstance(text, str) or len(text) <= PREVIEW_CHARS:
        return text or ""
    cut = text[:PREVIEW_CHARS]
    space = cut.rfind(" ")
    return (cut[:space] if space > PREVIEW_CHARS // 2 else cut).rstrip() + "…"


# The units of a relative time, largest first (a month is 30 days, a year 365: the exact
# moment is on hover). Plain English like the rest of the dashboard: Django's `timesince`
# said the same through the translation machinery, half of this tag's cost (two per list row).
_UNITS = (("year", 365 * 86400), ("month", 30 * 86400), ("week", 7 * 86400), ("day", 86400), ("hour", 3600), ("minute", 60))


def elapsed(seconds: float) -> str:
    """How long `seconds` is, in its largest unit and the next one when not zero: "3 hours, 5 minutes".
    At least "0 minutes"; a number and its unit are never wrapped apart."""
    seconds = max(0, int(seconds))
    # The largest unit that counts at least one (minutes at the least).
    i = next((i for i, (_, size) in enumerate(_UNITS) if seconds >= size), len(_UNITS) - 1)
    name, size = _UNITS[i]
    parts = [_count(seconds // size, name)]
    if i + 1 < len(_UNITS):
        next_name, next_size = _UNITS[i + 1]
        rest = seconds % size // next_size
        if rest:
            parts.append(_count(rest, next_name))
    return ", ".join(parts)


def _count(n: int, unit: str) -> str:
    return f"{n}\xa0{unit}{'' if n == 1 else 's'}"


@register.simple_tag
def when(moment: datetime | None) -> str:
    """A time as people read it: relative ("5 minutes ago"), the absolute time with its
    zone on hover, and the machine form in `datetime`."""
    if moment is None:
        return ""
    local = timezone.localtime(moment) if timezone.is_aware(moment) else moment
    absolute = local.strftime("%Y-%m-%d %H:%M:%S %Z").strip()
    delta = timezone.now() - moment if timezone.is_aware(moment) else None
    if delta is None or delta.total_seconds() < 0:
        relative = absolute
    elif delta.total_seconds() < 60:
        relative = "just now"
    else:
        relative = f"{elapsed(delta.total_seconds())} ago"
    # Each part escaped as format_html escapes it (html.escape, quotes included), without its lazy
    # wrappers: a list page holds two of these per row.
    return mark_safe(f'<time datetime="{escape(moment.isoformat())}" title="{escape(absolute)}">{escape(relative)}</time>')


METADATA_CHIPS = 4
CHIP_CHARS = 40


def _chip_text(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= CHIP_CHARS else text[: CHIP_CHARS - 1].rstrip() + "…"


@register.filter
def metadata_chips(metadata: Any, limit: int = METADATA_CHIPS) -> dict[str, Any]:
    """A thread's metadata as compact `key: value` chips (the first `limit` keys; `limit=0` for all),
    each value cut short with its whole text for a tooltip, and how many keys were left out.
    Agent-supplied: the template escapes every part."""
    if not isinstance(metadata, dict) or not metadata:
        return {"chips": [], "more": 0}
    items = list(metadata.items())
    shown = items if not limit else items[:limit]
    chips = [
        {"key": _chip_text(str(key)), "value": _chip_text(value), "full": f"{key}: {value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)}"[:2000]}
        for key, value in shown
    ]
    return {"chips": chips, "more": len(items) - len(shown)}


@register.filter
def spaced_count(number: Any) -> str:
    """A count with its thousands set apart by a narrow no-break space: 2 035."""
    if not isinstance(number, int):
        return "" if number is None else str(number)
    return f"{number:,}".replace(",", "\u202f")
