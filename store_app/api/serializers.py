"""Shapes of the store endpoints (the LangGraph server's store API), for the OpenAPI document.

The rules are checked in services and selectors; these describe them as
closely as OpenAPI 3.0 can, so that a client generated from the schema sends
what the server accepts.
"""

from __future__ import annotations

from drf_spectacular.utils import PolymorphicProxySerializer, extend_schema_field
from rest_framework import serializers

from ..matching import MAX_QUERY_CHARS
from ..namespaces import MAX_DEPTH, MAX_KEY_BYTES
from ..batch import MAX_BATCH_OPS
from ..selectors import NAMESPACES_LIMIT_MAX, OFFSET_MAX, SEARCH_LIMIT_MAX
from ..services import TTL_MAX_MINUTES
from ..vectors import DIMS_MAX, FLOAT32_MAX, MAX_INDEX_PATHS, MAX_VECTORS_PER_ITEM

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
        "oneOf": [
            {"type": "boolean", "enum": [False]},
            {"type": "array", "items": {"type": "string", "minLength": 1}, "maxItems": MAX_INDEX_PATHS},
        ],
        "nullable": True,
        "description": (
            "LangGraph's index: false (not embedded), field paths to embed ('$', 'text', 'tags[*]', '{a,b}'), "
            "or null for the server's default fields. Used when the server has an embedder and no vectors are sent."
        ),
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


VECTOR_SCHEMA = {
    "type": "array",
    "items": {"type": "number", "minimum": -FLOAT32_MAX, "maximum": FLOAT32_MAX},
    "minItems": 1,
    "maxItems": DIMS_MAX,
}
# `dims` (1 to 4096) may go beside `vectors` or `query_vector`: every vector must then have
# that many numbers, else 400 naming the field. OpenAPI cannot tie a length to another
# field, so it is described here rather than declared; without it a vector's length is its dims.
DIMS_HELP = " Send `dims` (1 to 4096) beside it to have every length checked against it."


@extend_schema_field(
    {
        "type": "object",
        "additionalProperties": VECTOR_SCHEMA,
        "maxProperties": MAX_VECTORS_PER_ITEM,
        "nullable": True,
        "description": "The caller's embeddings: field path ('text', 'tags[*].0') -> a vector." + DIMS_HELP,
    }
)
class VectorsField(serializers.JSONField):
    pass


@extend_schema_field({**VECTOR_SCHEMA, "nullable": True, "description": "The caller's embedding of `query`." + DIMS_HELP})
class QueryVectorField(serializers.JSONField):
    pass


class StorePutSerializer(serializers.Serializer):
    namespace = namespace_field(min_length=1, help_text=NAMESPACE_HELP + ' The root label "langgraph" is reserved.')
    key = serializers.CharField(min_length=1, max_length=MAX_KEY_BYTES, trim_whitespace=False)
    value = serializers.DictField(help_text="A JSON object.")
    index = IndexField(required=False, allow_null=True)
    ttl = TtlField(required=False, allow_null=True)
    vectors = VectorsField(required=False, allow_null=True)


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
    score = serializers.FloatField(
        allow_null=True,
        help_text="Cosine similarity (semantic search; null for an item without a vector), text relevance "
        "(0 for an item sharing no word with the query), or null without a query.",
    )


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
        help_text="By meaning with a query_vector or the server's embedder; else items sharing a word first, then the rest.",
    )
    query_vector = QueryVectorField(required=False, allow_null=True)
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


def _op_field(kind: str) -> serializers.ChoiceField:
    return serializers.ChoiceField(choices=[kind], help_text="The operation.")


class BatchGetSerializer(serializers.Serializer):
    op = _op_field("get")
    namespace = namespace_field(help_text=NAMESPACE_HELP)
    key = serializers.CharField(min_length=1, max_length=MAX_KEY_BYTES, trim_whitespace=False)
    refresh_ttl = serializers.BooleanField(required=False, allow_null=True)


class BatchPutSerializer(StorePutSerializer):
    op = _op_field("put")


class BatchDeleteSerializer(StoreDeleteSerializer):
    op = _op_field("delete")


class BatchSearchSerializer(StoreSearchRequestSerializer):
    op = _op_field("search")


class BatchListNamespacesSerializer(StoreNamespacesRequestSerializer):
    op = _op_field("list_namespaces")


BATCH_OPS = [BatchGetSerializer, BatchPutSerializer, BatchDeleteSerializer, BatchSearchSerializer, BatchListNamespacesSerializer]


@extend_schema_field(
    PolymorphicProxySerializer(
        component_name="StoreBatchOperation",
        serializers=BATCH_OPS,
        resource_type_field_name="op",
    )
)
class BatchOpField(serializers.JSONField):
    """One operation: `op` and the fields its single endpoint takes (namespaces as lists)."""


class StoreBatchRequestSerializer(serializers.Serializer):
    ops = serializers.ListField(child=BatchOpField(), max_length=MAX_BATCH_OPS)
    atomic = serializers.BooleanField(
        required=False,
        allow_null=True,
        default=True,
        help_text="true (or null): any refusal refuses the whole batch, nothing written; false: each operation "
        "answers on its own.",
    )


@extend_schema_field(
    {
        "type": "object",
        "description": "{'result': the operation's answer (item or null, list of items, list of namespaces, null)} "
        "or, when not atomic, {'error': {'status', 'code', 'detail', 'errors'?}}.",
        "additionalProperties": {},
    }
)
class BatchResultField(serializers.JSONField):
    pass


class StoreBatchResponseSerializer(serializers.Serializer):
    results = serializers.ListField(child=BatchResultField())
