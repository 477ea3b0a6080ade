"""What a JSON value must be for every database to store it, and for every read to show it.

PostgreSQL's text and jsonb hold neither NUL characters nor unpaired UTF-16
surrogates, and JSON itself has no NaN or infinity: a value with any of them
would fail at INSERT time as a 500. Services check input with this first and
refuse it with a 400 instead.

The limits (docs/api.md, "Limits on JSON"):

- nesting: `DEPTH_MAX` levels for metadata, extra_state, a store value and a
  filter; `DOCUMENT_DEPTH_MAX` for a checkpoint, a pending write's value and a
  message; a whole request body at most `BODY_DEPTH_MAX` (the API's parser).
  Reads walk JSON recursively and serialisers give up past a few hundred levels,
  so no value may be nested without bound;
- size: `MEMORYADMIN_MAX_JSON_BYTES` of JSON for the small values, the body
  limit `MEMORYADMIN_MAX_BODY_BYTES` for the others (also when they come from the
  pages or the Python API, which no body limit covers);
- integers: at most `INTEGER_DIGITS_MAX` digits, kept exactly; numbers with a
  fraction or an exponent are IEEE doubles, and -0.0 is stored as 0.0 (jsonb has
  no negative zero, so SQLite does the same).
"""

from __future__ import annotations

import json
import math
from typing import Any

import orjson
from django.conf import settings

from memoryadmin.errors import InvalidInput

DEPTH_MAX = 64
DOCUMENT_DEPTH_MAX = 128
BODY_DEPTH_MAX = 160
# What a read shows: values stored deeper than this (before these limits, or by SQL)
# are cut there and the rest marked, so that nothing stored can make a read fail.
SHOWN_DEPTH_MAX = 200
INTEGER_DIGITS_MAX = 100
_INTEGER_BOUND = 10**INTEGER_DIGITS_MAX
# orjson writes at most this many nested containers (and raises past it); the depth
# probe below relies on it, and tests/memoryadmin/test_json.py checks it still holds.
ORJSON_DEPTH = 254

_CONTAINERS = (dict, list, tuple)


def text_storable(text: str) -> bool:
    if "\x00" in text:
        return False
    if text.isascii():  # a flag of the string, read in constant time: no surrogate in it
        return True
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


def json_depth(value: Any, *, stop: int | None = None) -> int:
    """How many containers deep `value` is (a scalar 0, `{}` 1), walked without recursion.

    With `stop`, the walk ends as soon as that depth is reached (and answers it).
    """
    deepest = 0
    stack = [(value, 1)] if isinstance(value, _CONTAINERS) else []
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if stop is not None and deepest >= stop:
            return deepest
        for inner in item.values() if isinstance(item, dict) else item:
            if isinstance(inner, _CONTAINERS):
                stack.append((inner, depth + 1))
    return deepest


def depth_exceeds(value: Any, limit: int) -> bool:
    """Whether `value` is nested deeper than `limit` levels, in one C call when it can be.

    orjson refuses more than ORJSON_DEPTH nested containers, so `value` wrapped in
    ORJSON_DEPTH - limit lists serialises exactly when it is at most `limit` deep: a
    check at the serialiser's speed instead of a Python walk over every value. What
    orjson cannot write for another reason (an integer beyond 64 bits) is walked.
    """
    if limit >= ORJSON_DEPTH:
        return json_depth(value, stop=limit + 1) > limit
    wrapped = value
    for _ in range(ORJSON_DEPTH - limit):
        wrapped = [wrapped]
    try:
        orjson.dumps(wrapped)
    except orjson.JSONEncodeError:
        return json_depth(value, stop=limit + 1) > limit
    return False


_UNSTORABLE_STRING = "holds a NUL character or a lone surrogate, which cannot be stored"


def _scalar_problem(item: Any) -> str | None:
    if isinstance(item, str):
        if not text_storable(item):
            return _UNSTORABLE_STRING
    elif isinstance(item, bool) or item is None:
        return None
    elif isinstance(item, int):
        if not -_INTEGER_BOUND < item < _INTEGER_BOUND:
            return f"holds an integer of more than {INTEGER_DIGITS_MAX} digits"
    elif isinstance(item, float):
        if not math.isfinite(item):
            return "holds NaN or infinity, which JSON cannot express"
    else:
        return f"holds a {type(item).__name__}, which is not JSON"
    return None


def _negative_zero(item: Any) -> bool:
    return type(item) is float and item == 0 and math.copysign(1.0, item) < 0


def json_problem(value: Any, *, depth_max: int = DOCUMENT_DEPTH_MAX, where: str = "") -> tuple[str, str] | None:
    """None when `value` can be stored as JSON anywhere; else (where, what is wrong).

    `where` is the path of the bad part (`where` given as the value's own name:
    `checkpoint.channel_values.notes[2]`). A -0.0 inside a container is made 0.0 in
    place, as every database will store it (the caller handles a bare -0.0).
    Iterative: a value of any depth is answered, never a RecursionError.
    """
    problem = _scalar_problem(value) if not isinstance(value, _CONTAINERS) else None
    if problem:
        return where, problem
    stack = [(value, 1, where)] if isinstance(value, _CONTAINERS) else []
    while stack:
        item, depth, path = stack.pop()
        if depth > depth_max:
            return path, f"is nested deeper than {depth_max} levels"
        if isinstance(item, dict):
            for key, inner in item.items():
                if not isinstance(key, str):
                    return path, "has a key that is not a string"
                if not text_storable(key):
                    return path, "has a key with a NUL character or a lone surrogate"
                if type(inner) is str:  # the common leaf, checked here rather than by two calls
                    if not text_storable(inner):
                        return (f"{path}.{key}" if path else key), _UNSTORABLE_STRING
                    continue
                if isinstance(inner, _CONTAINERS):
                    stack.append((inner, depth + 1, f"{path}.{key}" if path else key))
                    continue
                problem = _scalar_problem(inner)
                if problem:
                    return (f"{path}.{key}" if path else key), problem
                if _negative_zero(inner):
                    item[key] = 0.0
        else:
            for index, inner in enumerate(item):
                if type(inner) is str:
                    if not text_storable(inner):
                        return f"{path}[{index}]", _UNSTORABLE_STRING
                    continue
                if isinstance(inner, _CONTAINERS):
                    stack.append((inner, depth + 1, f"{path}[{index}]"))
                    continue
                problem = _scalar_problem(inner)
                if problem:
                    return f"{path}[{index}]", problem
                if _negative_zero(inner) and isinstance(item, list):
                    item[index] = 0.0
    return None


def json_storage_problem(value: Any, *, depth_max: int = DOCUMENT_DEPTH_MAX) -> str | None:
    """`json_problem` without the path: what is wrong with `value`, or None."""
    found = json_problem(value, depth_max=depth_max)
    return None if found is None else found[1]


def json_size(value: Any) -> int:
    """Bytes of `value` as compact JSON (a value already checked by `json_problem`)."""
    try:
        return len(orjson.dumps(value))
    except orjson.JSONEncodeError:
        # Integers beyond 64 bits: the standard encoder writes them (the depth is checked).
        return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass"))


def small_bytes_max() -> int:
    return settings.MEMORYADMIN_MAX_JSON_BYTES


def document_bytes_max() -> int:
    return settings.MEMORYADMIN_MAX_BODY_BYTES


def json_value_check(value: Any, field: str, *, depth_max: int = DEPTH_MAX, bytes_max: int | None = None) -> Any:
    """`value` ready to store, or InvalidInput (a 400) naming `field`: the one check of JSON input.

    Every service runs its JSON input through this, whether it came from the API,
    a page or the Python API: storable text, finite numbers, integers of at most
    INTEGER_DIGITS_MAX digits, at most `depth_max` levels and `bytes_max` bytes
    (the small-value limit by default). Returns the value with -0.0 made 0.0.
    """
    found = json_problem(value, depth_max=depth_max, where=field)
    if found is not None:
        where, problem = found
        raise InvalidInput(f"{where} {problem}.", fields={field: [f"{where} {problem}."]})
    limit = small_bytes_max() if bytes_max is None else bytes_max
    size = json_size(value)
    if size > limit:
        message = f"is {size} bytes of JSON; the limit is {limit}."
        raise InvalidInput(f"{field} {message}", fields={field: [message]})
    return 0.0 if _negative_zero(value) else value
