"""JSON text in and out: the API's parser and renderer, the database's text, the pages' text.

orjson throughout (agent contexts are large, and parsing them is the hot path), with
three guarantees on top (docs/api.md, "Numbers" and "Limits on JSON"):

- numbers come back as they were posted: an integer exactly, at any length (orjson
  alone reads one beyond 64 bits as a float); a number with a fraction or an
  exponent as the same double. PostgreSQL's jsonb keeps a number's digits but not
  how it was written (`1e+16` is read back as the integer 10000000000000000), so the
  text stored for a double is positional with a fractional part
  (`10000000000000000.0`), which jsonb keeps; SQLite stores the same text;
- a request body nested deeper than BODY_DEPTH_MAX is refused (400) before any view
  or serializer walks it;
- reading never fails on what is stored: values nested deeper than SHOWN_DEPTH_MAX
  are cut there (the cut part becomes DEEP_MARKER), and writing out answers integers
  beyond 64 bits and any depth.
"""

from __future__ import annotations

import json
import re
from decimal import Decimal
from typing import Any

import orjson
from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import BaseParser
from rest_framework.renderers import BaseRenderer
from rest_framework.utils.encoders import JSONEncoder

from memoryadmin.errors import InvalidInput
from memoryadmin.jsoncheck import (
    BODY_DEPTH_MAX,
    ORJSON_DEPTH,
    SHOWN_DEPTH_MAX,
    depth_exceeds,
)

_fallback = JSONEncoder()

DEEP_MARKER = f"<nested deeper than {SHOWN_DEPTH_MAX} levels: not shown>"
_DEEP_MARKER_JSON = json.dumps(DEEP_MARKER)

_INT64_MIN, _UINT64_MAX = -(2**63), 2**64 - 1
# A run of 20 digits: the only text in which orjson may read an integer as a float.
_DIGITS = bytes(48 if 48 <= byte <= 57 else 32 for byte in range(256))
_LONG_DIGITS = b"0" * 20
_STRING = r'"[^"\\]*(?:\\.[^"\\]*)*"'
# A JSON string (left as it is) or a number with a positive exponent (rewritten).
_EXPONENT = re.compile(_STRING + r"|(-?[0-9]+(?:\.[0-9]+)?[eE]\+?[0-9]+)")
# A JSON string (left as it is) or a negative zero standing as a number of its own.
_NEGATIVE_ZERO = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|((?:(?<=[\[:,])|^)-0\.0(?=[\],}]|$))')
_STRUCTURE = re.compile(_STRING + r"|[\[\]{}]")


class DepthExceeded(ValueError):
    """A client's JSON nested deeper than allowed; `field` names where (the top-level key)."""

    def __init__(self, field: str, limit: int):
        super().__init__(f"{field} is nested deeper than {limit} levels.")
        self.field = field
        self.limit = limit


def _has_long_integer(text: bytes | str) -> bool:
    raw = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else bytes(text)
    return _LONG_DIGITS in raw.translate(_DIGITS)


def _reject_constant(name: str) -> Any:
    raise orjson.JSONDecodeError(f"{name} is not JSON", name, 0)


# --- client JSON ---------------------------------------------------------------------------------


# Up to this length a text's containers are counted before its depth is probed: most values
# (a message, a small body) hold fewer containers than the limit and need no probe at all.
_COUNTED_MAX = 8192


def _may_be_deeper(text: bytes | str, depth_max: int) -> bool:
    """Whether JSON `text` could be nested deeper than `depth_max`: not when it has at most two
    characters a level, nor when it holds no more brackets and braces than the limit."""
    if len(text) <= 2 * depth_max:
        return False
    if len(text) > _COUNTED_MAX:
        return True
    if isinstance(text, memoryview):
        text = text.tobytes()
    opening = ("[", "{") if isinstance(text, str) else (b"[", b"{")
    return text.count(opening[0]) + text.count(opening[1]) > depth_max


def loads(raw: bytes | str, *, depth_max: int = BODY_DEPTH_MAX, field: str | None = None) -> Any:
    """Client JSON (a body, a query-string value, a form field) as Python values.

    Strict: orjson.JSONDecodeError (a ValueError) on anything but JSON, NaN and
    lone surrogates included. DepthExceeded when nested deeper than `depth_max`,
    naming `field`, else the top-level key that is too deep. Integers are exact.
    """
    value = orjson.loads(raw)
    if _may_be_deeper(raw, depth_max) and depth_exceeds(value, depth_max):
        raise DepthExceeded(field or _deep_key(value, depth_max), depth_max)
    if _has_long_integer(raw):
        # The same values, with integers beyond 64 bits exact (the depth is bounded now).
        value = json.loads(raw, parse_constant=_reject_constant)
    return value


def _deep_key(value: Any, depth_max: int) -> str:
    if isinstance(value, dict):
        for key, inner in value.items():
            if depth_exceeds(inner, depth_max - 1):
                return str(key)
    return "body"


class ORJSONParser(BaseParser):
    """Strict JSON: NaN and Infinity are a 400 (parse_error), so is a body nested deeper than
    BODY_DEPTH_MAX (naming its field); integers are read exactly at any length."""

    media_type = "application/json"

    def parse(self, stream, media_type=None, parser_context=None):
        raw = stream.read() if stream is not None else b""
        if not raw:
            return {}
        try:
            return loads(raw)
        except DepthExceeded as exc:
            raise InvalidInput(str(exc), fields={exc.field: [f"is nested deeper than {exc.limit} levels."]}) from None
        except orjson.JSONDecodeError as exc:
            raise ParseError(f"JSON parse error - {exc}") from exc


# --- the database's text -------------------------------------------------------------------------


def _positional(match: re.Match) -> str:
    number = match.group(1)
    if number is None:
        return match.group(0)
    # 1.5e+17 -> 150000000000000000.0: the same double, in a form jsonb keeps as a fraction.
    return format(Decimal(number), "f") + ".0"


def db_text(value: Any) -> str:
    """JSON text to store: what jsonb keeps and gives back as it went in (see the module).

    orjson, or the standard encoder for what orjson does not write (integers beyond 64
    bits, keys that are not strings, nesting beyond ORJSON_DEPTH): what Django's
    JSONField stored before. Doubles of 1e16 and more are written positionally. (NaN and
    infinity, which every service refuses, come out as null, as orjson writes them.)
    """
    try:
        text = orjson.dumps(value, option=orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS).decode()
    except orjson.JSONEncodeError:
        text = json.dumps(value, separators=(",", ":"))
    return _EXPONENT.sub(_positional, text) if ("e+" in text or "E+" in text) else text


def _cut_text(text: str, depth_max: int) -> str:
    """`text` with every container deeper than `depth_max` replaced by DEEP_MARKER (a scan, no parse)."""
    pieces: list[str] = []
    depth, start, last = 0, -1, 0
    for match in _STRUCTURE.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth == depth_max + 1:
                start = match.start()
        elif token in "]}":
            if depth == depth_max + 1 and start >= 0:
                pieces += [text[last:start], _DEEP_MARKER_JSON]
                last, start = match.end(), -1
            depth -= 1
    pieces.append(text[last:])
    return "".join(pieces)


def stored_loads(text: str | bytes, *, depth_max: int | None = SHOWN_DEPTH_MAX) -> Any:
    """JSON text from the database as Python values: integers exact, and what is nested
    deeper than `depth_max` cut there and marked (None: kept whole, as deep as orjson
    reads, 1024 levels). ValueError when the text is not JSON.
    """
    if isinstance(text, bytes | bytearray | memoryview):
        text = bytes(text).decode()
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        # Deeper than orjson reads (1024 levels), or not JSON at all (the cut keeps it so).
        if depth_max is None:
            raise
        return _loads_cut(text, depth_max)
    if depth_max is not None and _may_be_deeper(text, depth_max) and depth_exceeds(value, depth_max):
        return _loads_cut(text, depth_max)
    return json.loads(text) if _has_long_integer(text) else value


def _loads_cut(text: str, depth_max: int) -> Any:
    text = _cut_text(text, depth_max)
    if not _has_long_integer(text):
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            pass
    # At most depth_max deep now, so the standard parser reads it without exhausting the
    # stack: integers exact, and NaN, which rows written by older code on SQLite may hold.
    return json.loads(text)


# --- text out: the API, exports, the pages -------------------------------------------------------


def _writable(value: Any, depth_max: int | None) -> Any:
    """A copy orjson writes: integers beyond 64 bits as their digits, containers deeper than
    `depth_max` (None: none cut) as DEEP_MARKER. Built without recursion; scalars are shared."""
    holder: list[Any] = [None]
    stack: list[tuple[Any, Any, int]] = [((value,), holder, 0)]
    while stack:
        source, target, depth = stack.pop()
        pairs = source.items() if isinstance(source, dict) else enumerate(source)
        for key, item in pairs:
            if isinstance(item, dict | list | tuple):
                if depth_max is not None and depth + 1 > depth_max:
                    target[key] = DEEP_MARKER
                    continue
                copy: Any = {} if isinstance(item, dict) else [None] * len(item)
                target[key] = copy
                stack.append((item, copy, depth + 1))
            elif isinstance(item, int) and not isinstance(item, bool) and not _INT64_MIN <= item <= _UINT64_MAX:
                target[key] = orjson.Fragment(str(item).encode())
            else:
                target[key] = item
    return holder[0]


def dumps(value: Any, *, option: int = 0, default: Any = None, depth_max: int = ORJSON_DEPTH) -> bytes:
    """orjson.dumps that writes any stored JSON: integers beyond 64 bits exactly, nesting
    beyond `depth_max` (at most what orjson writes) as DEEP_MARKER. What is not JSON at
    all is still a TypeError (orjson.JSONEncodeError)."""
    try:
        return orjson.dumps(value, default=default, option=option)
    except orjson.JSONEncodeError:
        return orjson.dumps(_writable(value, min(depth_max, ORJSON_DEPTH)), default=default, option=option)


def pretty(value: Any) -> str:
    """Indented JSON with sorted keys for the pages (the template escapes it); never fails."""
    option = orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS
    return dumps(value, option=option, default=str).decode()


def canonical(value: Any) -> bytes:
    """Canonical JSON: sorted keys, no spaces, UTF-8, integers exact at any length, -0.0 as 0.0
    (stored as 0.0 on every database, so a context holding it still matches what is stored).

    Raises TypeError on what JSON cannot hold, nesting beyond ORJSON_DEPTH included.
    """
    try:
        text = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError as exc:
        if "Integer" not in str(exc):
            raise _not_canonical(exc) from exc
        try:
            text = orjson.dumps(_writable(value, None), option=orjson.OPT_SORT_KEYS)
        except orjson.JSONEncodeError as again:
            raise _not_canonical(again) from again
    if b"-0.0" in text:
        text = _NEGATIVE_ZERO.sub(lambda m: b"0.0" if m.group(1) else m.group(0), text)
    return text


def _not_canonical(exc: Exception) -> TypeError:
    if "Recursion" in str(exc):
        return TypeError(f"nested deeper than {ORJSON_DEPTH} levels")
    return TypeError(str(exc))


class ORJSONRenderer(BaseRenderer):
    media_type = "application/json"
    format = "json"
    charset = None

    def render(self, data, accepted_media_type=None, renderer_context=None):
        if data is None:
            return b""
        option = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_NON_STR_KEYS
        if settings.DEBUG:
            option |= orjson.OPT_INDENT_2
        return dumps(data, default=_fallback.default, option=option)
