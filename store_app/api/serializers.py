"""Shapes of the store endpoints (the LangGraph server's store API), for the OpenAPI document.

The rules are checked in services and selectors; these describe them as
closely as OpenAPI 3.0 can, so that a client generated from the schema sends
what the server accepts.
"""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from ..matching import MAX_QUERY_CHARS
from ..namespaces import MAX_DEPTH, MAX_KEY_BYTES
from ..selectors import NAMESPACES_LIMIT_MAX, OFFSET_MAX, SEARCH_LIMIT_MAX
from ..services import TTL_MAX_MINUTES

LABEL_PATTERN = r"^[^.\x00]+$"
NAMESPACE_HELP = 'Labels: non-empty strings without "." or NUL; at most 1 kB joined with ".".'


class LabelField(serializers.RegexField):
    def __init__(self, **kwargs):
        super().__init__(LABEL_PATTERN, trim_whitespace=False, **kwargs)


def namespace_field(**kwargs) -> serializers.ListField:
    return serializers.ListField(child=LabelField(), max_length=MAX_DEPTH, **kwargs)


@extend_schema_field(
    {
        "type": "number",
        "minimum": 0,
        "exclusiveMinimum": True,
        "maximum": TTL_MAX_MINUTES,
        "nullable": True,
        "description": "Minutes until the item expires (refreshed on reads by its owner); null for never.",
    }
)
class TtlField(serializers.FloatField):
    pass


@extend_schema_field(
    {
        "oneOf": [{"type": "boolean", "enum": [False]}, {"type": "array", "items": {"type": "string"}}],
        "nullable": True,
        "description": "Accepted for LangGraph compatibility; no effect (every string value is text-searchable).",
    }
)
class IndexField(serializers.JSONField):
    pass


FILTER_SCHEMA = {
    "type": "object",
    "nullable": True,
    "additionalProperties": {"nullable": True},
    "description": (
        "Top-level value fields, all of which must hold. A plain value matches by JSON equality "
        "(numbers by value); an object whose keys start with '$' is read as operators: $eq, $ne, "
        "and $gt, $gte, $lt, $lte with a number (compared as a number) or a string (by code point). "
        "Unknown operators and objects mixing operators with fields are refused."
    ),
}


@extend_schema_field(FILTER_SCHEMA)
class FilterField(serializers.JSONField):
    pass


class StorePutSerializer(serializers.Serializer):
    namespace = namespace_field(min_length=1, help_text=NAMESPACE_HELP + ' The root label "langgraph" is reserved.')
    key = serializers.CharField(min_length=1, max_length=MAX_KEY_BYTES, trim_whitespace=False)
    value = serializers.DictField(help_text="A JSON object.")
    index = IndexField(required=False, allow_null=True)
    ttl = TtlField(required=False, allow_null=True)


class StoreDeleteSerializer(serializers.Serializer):
    namespace = namespace_field(help_text=NAMESPACE_HELP)
    key = serializers.CharField(min_length=1, max_length=MAX_KEY_BYTES, trim_whitespace=False)


class StoreItemSerializer(serializers.Serializer):
    namespace = serializers.ListField(child=serializers.CharField())
    key = serializers.CharField()
    value = serializers.DictField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class StoreSearchItemSerializer(StoreItemSerializer):
    score = serializers.FloatField(allow_null=True, help_text="Text relevance; null without a query.")


class StoreSearchRequestSerializer(serializers.Serializer):
    namespace_prefix = namespace_field(
        required=False, allow_null=True, help_text=NAMESPACE_HELP + " Matched by whole labels; empty or null: everything."
    )
    filter = FilterField(required=False, allow_null=True)
    limit = serializers.IntegerField(required=False, allow_null=True, min_value=0, max_value=SEARCH_LIMIT_MAX, default=10)
    offset = serializers.IntegerField(required=False, allow_null=True, min_value=0, max_value=OFFSET_MAX, default=0)
    query = serializers.CharField(
        required=False,
        allow_null=True,
        allow_blank=True,
        max_length=MAX_QUERY_CHARS,
        help_text="Text: items sharing a word with it, best score first.",
    )
    refresh_ttl = serializers.BooleanField(required=False, allow_null=True)


class StoreSearchResponseSerializer(serializers.Serializer):
    items = StoreSearchItemSerializer(many=True)


class StoreNamespacesRequestSerializer(serializers.Serializer):
    prefix = namespace_field(required=False, allow_null=True, help_text='"*" matches any one label.')
    suffix = namespace_field(required=False, allow_null=True, help_text='"*" matches any one label.')
    max_depth = serializers.IntegerField(required=False, allow_null=True, min_value=1, max_value=MAX_DEPTH)
    limit = serializers.IntegerField(
        required=False, allow_null=True, min_value=0, max_value=NAMESPACES_LIMIT_MAX, default=100
    )
    offset = serializers.IntegerField(required=False, allow_null=True, min_value=0, max_value=OFFSET_MAX, default=0)


class StoreNamespacesResponseSerializer(serializers.Serializer):
    namespaces = serializers.ListField(child=serializers.ListField(child=serializers.CharField()))


# The GET answer: the item, or null when there is none (the LangGraph server's shape).
NULLABLE_ITEM_SCHEMA = {
    "type": "object",
    "nullable": True,
    "properties": {
        "namespace": {"type": "array", "items": {"type": "string"}},
        "key": {"type": "string"},
        "value": {"type": "object", "additionalProperties": {}},
        "created_at": {"type": "string", "format": "date-time"},
        "updated_at": {"type": "string", "format": "date-time"},
    },
    "required": ["namespace", "key", "value", "created_at", "updated_at"],
}
