"""Fast JSON for the API (orjson): agent contexts are large, and parsing them is the hot path."""

from __future__ import annotations

import orjson
from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import BaseParser
from rest_framework.renderers import BaseRenderer
from rest_framework.utils.encoders import JSONEncoder

_fallback = JSONEncoder()


class ORJSONParser(BaseParser):
    """Strict JSON: NaN, Infinity and integers beyond 64 bits are refused with a 400."""

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
        return orjson.dumps(data, default=_fallback.default, option=option)
