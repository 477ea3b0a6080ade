"""JSON containment for metadata filters: PostgreSQL's `@>`, and the same rule on SQLite."""

from __future__ import annotations

import re

from typing import Any

from django.db import connection
from django.db.models import JSONField, QuerySet, Value
from django.db.models.fields.json import KeyTransform




# --- JSON containment: PostgreSQL's @>, and the same rule on SQLite -----------------------------


def json_contains(document: Any, pattern: Any) -> bool:
    """PostgreSQL's `jsonb @>` rule: objects by key, arrays by element (any order), scalars by value and type."""
    if isinstance(pattern, dict):
        return isinstance(document, dict) and all(
            key in document and json_contains(document[key], item) for key, item in pattern.items()
        )
    if isinstance(pattern, list):
        return isinstance(document, list) and all(any(json_contains(d, p) for d in document) for p in pattern)
    if isinstance(pattern, bool) or isinstance(document, bool):
        return type(pattern) is type(document) and pattern == document
    if isinstance(pattern, int | float) and isinstance(document, int | float):
        return pattern == document
    return type(pattern) is type(document) and pattern == document


def _scalar_paths(pattern: dict[str, Any], prefix: tuple[str, ...] = ()):
    """(path, value) for the string and number leaves of a pattern.

    Only these narrow rows in SQL on SQLite: its `json_extract` compares them
    faithfully, while booleans and null are read back differently and arrays not
    at all, so those are left to the exact check in Python (which can only drop
    rows, never find ones SQL left out).
    """
    for key, item in pattern.items():
        if not SAFE_JSON_KEY.fullmatch(key):
            continue  # not worth quoting into a JSON path: left to the exact check
        path = (*prefix, key)
        if isinstance(item, dict):
            yield from _scalar_paths(item, path)
        elif isinstance(item, str) or (isinstance(item, int | float) and not isinstance(item, bool) and abs(item) < 2**63):
            yield path, item


SAFE_JSON_KEY = re.compile(r"\A[A-Za-z0-9_-]{1,100}\Z")


def sql_is_exact(pattern: dict[str, Any]) -> bool:
    """Whether SQLite's JSON-path narrowing of `json_filter` already decides `pattern` exactly.

    True when every leaf is a string under a plain key: `json_extract` returns a
    string as text, never equal to a number, a boolean or an object. Numbers are not
    (`true` reads back as 1), nor booleans, null, arrays or empty objects.
    """
    for key, item in pattern.items():
        if not SAFE_JSON_KEY.fullmatch(key):
            return False
        if isinstance(item, dict):
            if not item or not sql_is_exact(item):
                return False
        elif not isinstance(item, str):
            return False
    return True


def json_filter(qs: QuerySet, field_name: str, pattern: dict[str, Any]) -> tuple[QuerySet, bool]:
    """Filter `qs` to rows whose JSON field contains `pattern`.

    PostgreSQL answers with JSONB containment (`@>`) in one clause. SQLite has no
    containment operator: there the scalar leaves of the pattern narrow the rows
    in SQL (`json_extract` equality) and the caller must finish with
    `json_contains` in Python (the second value says so), which also settles
    what SQLite blurs (`true` equals `1` there, arrays are not compared).
    """
    if not pattern:
        return qs, False
    if connection.vendor == "postgresql":
        return qs.filter(**{f"{field_name}__contains": pattern}), False
    for path, item in _scalar_paths(pattern):
        expression: Any = field_name
        for key in path:
            expression = KeyTransform(key, expression)
        qs = qs.filter(expression.get_lookup("exact")(expression, Value(item, output_field=JSONField())))
    return qs, True


def _apply_exact(qs: QuerySet, attr: str, pattern: dict[str, Any], limit: int | None):
    """The rows of `qs` whose `attr` contains `pattern`, up to `limit`, read in chunks (SQLite's path)."""
    kept = []
    for row in qs.iterator(chunk_size=200):
        if json_contains(getattr(row, attr), pattern):
            kept.append(row)
            if limit is not None and len(kept) >= limit:
                break
    return kept
