from __future__ import annotations

from typing import Any

from django import template

from memoryadmin.json import pretty, stored_loads

register = template.Library()


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


@register.filter
def tool_calls(message: Any) -> list[dict[str, Any]]:
    """Tool calls of a message in OpenAI or LangChain shape, as name, id and arguments."""
    calls = message.get("tool_calls") if isinstance(message, dict) else None
    if not isinstance(calls, list):
        return []
    shown = []
    for call in calls:
        if not isinstance(call, dict):
            continue
        function = call.get("function") if isinstance(call.get("function"), dict) else {}
        shown.append(
            {
                "id": call.get("id") or "",
                "name": call.get("name") or function.get("name") or "?",
                "arguments": call.get("args", function.get("arguments", {})),
            }
        )
    return shown
