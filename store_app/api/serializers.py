"""Shapes of the store endpoints (the LangGraph server's store API). Rules live in services."""

from __future__ import annotations

from rest_framework import serializers

NAMESPACE_HELP = 'Labels: non-empty strings without "." or NUL.'


class NamespaceField(serializers.ListField):
    child = serializers.CharField(allow_blank=False, trim_whitespace=False)


class StorePutSerializer(serializers.Serializer):
    namespace = NamespaceField(help_text=NAMESPACE_HELP + ' Non-empty; the root "langgraph" is reserved.')
    key = serializers.CharField(trim_whitespace=False)
    value = serializers.DictField(help_text="A JSON object.")
    index = serializers.JSONField(required=False, allow_null=True, help_text="Accepted for compatibility; no effect.")
    ttl = serializers.FloatField(required=False, allow_null=True, help_text="Minutes; null for no expiry.")


class StoreDeleteSerializer(serializers.Serializer):
    namespace = NamespaceField(help_text=NAMESPACE_HELP)
    key = serializers.CharField(trim_whitespace=False)


class StoreItemSerializer(serializers.Serializer):
    namespace = NamespaceField()
    key = serializers.CharField()
    value = serializers.DictField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class StoreSearchItemSerializer(StoreItemSerializer):
    score = serializers.FloatField(allow_null=True, help_text="Text relevance; null without a query.")


class StoreSearchRequestSerializer(serializers.Serializer):
    namespace_prefix = NamespaceField(required=False, help_text=NAMESPACE_HELP + " Matched by whole labels.")
    filter = serializers.DictField(
        required=False,
        allow_null=True,
        help_text="Value fields: a plain value (equality) or {$eq,$ne,$gt,$gte,$lt,$lte: v}.",
    )
    limit = serializers.IntegerField(required=False, min_value=0, max_value=1000, default=10)
    offset = serializers.IntegerField(required=False, min_value=0, default=0)
    query = serializers.CharField(required=False, allow_null=True, help_text="Text; ranks matches by relevance.")
    refresh_ttl = serializers.BooleanField(required=False, allow_null=True)


class StoreSearchResponseSerializer(serializers.Serializer):
    items = StoreSearchItemSerializer(many=True)


class StoreNamespacesRequestSerializer(serializers.Serializer):
    prefix = NamespaceField(required=False, allow_null=True, help_text='"*" matches any one label.')
    suffix = NamespaceField(required=False, allow_null=True, help_text='"*" matches any one label.')
    max_depth = serializers.IntegerField(required=False, allow_null=True, min_value=1)
    limit = serializers.IntegerField(required=False, min_value=0, max_value=1000, default=100)
    offset = serializers.IntegerField(required=False, min_value=0, default=0)


class StoreNamespacesResponseSerializer(serializers.Serializer):
    namespaces = serializers.ListField(child=NamespaceField())
