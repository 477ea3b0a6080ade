"""The dashboard's JSON viewer: a collapsible tree drawn by the server, with a copy button.

`{% json_tree value %}` draws any JSON value as nested `<details>` (objects and
arrays) around escaped scalars: no script is needed to open or close a branch, and
nothing inline, so the pages' content security policy holds. Every key and every
string is escaped; agent content stays text. The copy button (static/js/copy.js)
carries the value as indented JSON.

What is large starts collapsed, so that a page of values stays short: a branch is
open only while it holds at most OPEN_NODES values (the whole value when drawn with
`collapsed=True` starts closed); a string longer than STRING_PREVIEW is cut, with
the rest one click away; past TREE_NODES values the drawing stops and says how many
are left (the copy button still has them all).
"""

from __future__ import annotations

from typing import Any

from django import template
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from memoryadmin.json import pretty

register = template.Library()

OPEN_NODES = 40
TREE_NODES = 2000
STRING_PREVIEW = 300
SUMMARY_KEYS = 4
COPY_CHARS_MAX = 2_000_000


def _size(value: Any, stop: int) -> int:
    """How many values `value` holds (itself included), counted up to `stop`."""
    count, stack = 0, [value]
    while stack and count < stop:
        item = stack.pop()
        count += 1
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return count


def _scalar(value: Any) -> str:
    if value is None:
        return '<span class="json-null">null</span>'
    if isinstance(value, bool):
        return f'<span class="json-bool">{"true" if value else "false"}</span>'
    if isinstance(value, int | float):
        return f'<span class="json-number">{escape(repr(value) if isinstance(value, float) else str(value))}</span>'
    text = value if isinstance(value, str) else str(value)
    if len(text) <= STRING_PREVIEW:
        return f'<span class="json-string">"{escape(text)}"</span>'
    return (
        f'<details class="json-long"><summary><span class="json-string">"{escape(text[:STRING_PREVIEW])}…"</span>'
        f' <span class="muted">{len(text)} characters</span></summary>'
        f'<span class="json-string">"{escape(text)}"</span></details>'
    )


def _summary(value: dict | list) -> str:
    if isinstance(value, dict):
        keys = [escape(str(key)) for key in list(value)[:SUMMARY_KEYS]]
        more = "…" if len(value) > SUMMARY_KEYS else ""
        names = f' <span class="json-keys">{", ".join(keys)}{more}</span>' if keys else ""
        return f'<span class="json-brace">{{</span>{len(value)} key{"" if len(value) == 1 else "s"}<span class="json-brace">}}</span>{names}'
    return f'<span class="json-brace">[</span>{len(value)} item{"" if len(value) == 1 else "s"}<span class="json-brace">]</span>'


class _Drawing:
    def __init__(self) -> None:
        self.parts: list[str] = []
        self.drawn = 0

    def node(self, value: Any, label: str, *, open_: bool | None = None) -> None:
        self.drawn += 1
        if not isinstance(value, dict | list) or not value:
            shown = _scalar(value) if not isinstance(value, dict | list) else ("{}" if isinstance(value, dict) else "[]")
            self.parts.append(f"<li>{label}{shown}</li>")
            return
        is_open = _size(value, OPEN_NODES + 1) <= OPEN_NODES if open_ is None else open_
        self.parts.append(f'<li><details{" open" if is_open else ""}><summary>{label}{_summary(value)}</summary><ul>')
        items = value.items() if isinstance(value, dict) else enumerate(value)
        left = len(value)
        for key, item in items:
            if self.drawn >= TREE_NODES:
                self.parts.append(f'<li class="muted">… {left} more not drawn (Copy has the whole value)</li>')
                break
            key_html = f'<span class="json-key">{escape(str(key))}</span>: ' if isinstance(value, dict) else f'<span class="json-index">{key}</span>: '
            self.node(item, key_html)
            left -= 1
        self.parts.append("</ul></details></li>")


@register.simple_tag
def json_tree(value: Any, collapsed: bool = False, copy: bool = True) -> SafeString:
    """`value` as a collapsible tree (module docstring); `collapsed` starts it closed."""
    drawing = _Drawing()
    drawing.node(value, "", open_=False if collapsed else None)
    button = ""
    if copy:
        text = pretty(value)
        if len(text) <= COPY_CHARS_MAX:
            button = f'<button type="button" class="copy json-copy" data-copy-text="{escape(text)}" title="Copy as JSON">Copy</button>'
    return mark_safe(f'<div class="json-tree">{button}<ul class="json-root">{"".join(drawing.parts)}</ul></div>')
