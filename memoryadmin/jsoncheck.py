"""What a JSON value must be for every database to store it.

PostgreSQL's text and jsonb hold neither NUL characters nor unpaired UTF-16
surrogates, and JSON itself has no NaN or infinity: a value with any of them
would fail at INSERT time as a 500. Services check input with this first and
refuse it with a 400 instead.
"""

from __future__ import annotations

import math
from typing import Any

from memoryadmin.errors import InvalidInput


def text_storable(text: str) -> bool:
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


UNSTORABLE_TEXT = "cannot contain NUL or a lone surrogate."


def text_input_check(value: Any, field_name: str) -> Any:
    """Refuse a string PostgreSQL text cannot hold with a 400 naming the field; else `value` back.

    For the free-text inputs that reach the database outside a JSON value (agent codes,
    run ids, usernames, filters, form fields): unchecked, a NUL fails inside the INSERT
    or the WHERE clause as a 500. Only strings are looked at; the caller checks types.
    """
    if isinstance(value, str) and not text_storable(value):
        raise InvalidInput(f"{field_name} {UNSTORABLE_TEXT}", fields={field_name: [UNSTORABLE_TEXT]})
    return value


def json_storage_problem(value: Any) -> str | None:
    """None when `value` can be stored as JSON anywhere; otherwise what is wrong with it."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if not text_storable(item):
                return "holds a NUL character or a lone surrogate, which cannot be stored"
        elif isinstance(item, bool) or item is None or isinstance(item, int):
            continue
        elif isinstance(item, float):
            if not math.isfinite(item):
                return "holds NaN or infinity, which JSON cannot express"
        elif isinstance(item, dict):
            for key, inner in item.items():
                if not isinstance(key, str):
                    return "has a key that is not a string"
                if not text_storable(key):
                    return "has a key with a NUL character or a lone surrogate"
                stack.append(inner)
        elif isinstance(item, list | tuple):
            stack.extend(item)
        else:
            return f"holds a {type(item).__name__}, which is not JSON"
    return None
