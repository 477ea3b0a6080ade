"""Fast JSON for the API (orjson): agent contexts are large, and parsing them is the hot path."""

from __future__ import annotations

import json

import orjson
from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import BaseParser
from rest_framework.renderers import BaseRenderer
from rest_framework.utils.encoders import JSONEncoder

_fallback = JSONEncoder()


class ORJSONParser(BaseParser):
    """Strict JSON: NaN and Infinity are refused with a 400 (integers beyond 64 bits are read as floats)."""

    media_type = "application/json"

    def parse(self, stream, media_type=None, parser_context=None):
        raw = stream.read() if stream is not None else b""
        if not raw:
            return {}
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise ParseError(f"JSON parse error - {exc}") from exc


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
        try:
            return orjson.dumps(data, default=_fallback.default, option=option)
        except orjson.JSONEncodeError:
            # orjson writes integers of at most 64 bits. PostgreSQL's jsonb keeps a number's
            # digits, so a float such as 1e20 sent in is read back as the integer
            # 100000000000000000000: the standard encoder writes it (and anything it cannot
            # write is still an error).
            indent = 2 if settings.DEBUG else None
            separators = None if settings.DEBUG else (",", ":")
            return json.dumps(data, cls=JSONEncoder, ensure_ascii=False, indent=indent, separators=separators).encode()
