"""Shapes of the thread endpoints. Rules are in services; these only describe JSON."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers


@extend_schema_field(
    {
        "oneOf": [
            {"type": "string"},
            {"type": "array", "items": {"oneOf": [{"type": "string"}, {"type": "object"}]}},
        ],
        "nullable": True,
        "description": "A string or a list of content parts; null only beside tool_calls.",
    }
)
class MessageContentField(serializers.JSONField):
    pass


class MessageSerializer(serializers.Serializer):
    """A message: `role` and `content` at least; every other field is kept as posted."""

    role = serializers.ChoiceField(choices=["user", "assistant", "system", "tool", "human", "ai"])
    content = MessageContentField()


@extend_schema_field({"type": "object", "additionalProperties": True, "nullable": True})
class JsonObjectField(serializers.JSONField):
    pass


class AgentStateSaveSerializer(serializers.Serializer):
    agent_code = serializers.RegexField(r"\S", max_length=64, help_text="1 to 64 characters, not only spaces")
    context = serializers.ListField(child=MessageSerializer())
    extra_state = JsonObjectField(
        required=False, help_text="overwritten when present (null clears it), kept when absent"
    )


class AgentStateAppendSerializer(serializers.Serializer):
    agent_code = serializers.RegexField(r"\S", max_length=64, help_text="1 to 64 characters, not only spaces")
    messages = serializers.ListField(child=MessageSerializer(), help_text="only the new messages, in order")
    extra_state = JsonObjectField(
        required=False, help_text="overwritten when present (null clears it), kept when absent"
    )
    head = serializers.CharField(
        required=False, allow_blank=True,
        help_text="append only if the agent's last active message has this chain digest (`head` of a save answer; empty: no message yet); else 412",
    )


class SaveResultSerializer(serializers.Serializer):
    thread_id = serializers.CharField()
    mode = serializers.ChoiceField(choices=["append", "rewrite", "noop"])
    appended = serializers.IntegerField()
    archived = serializers.IntegerField()
    active = serializers.IntegerField()
    max_seq = serializers.IntegerField()
    head = serializers.CharField(help_text="chain digest of the agent's last active message; empty for an empty context")


class AgentStateSerializer(serializers.Serializer):
    thread_id = serializers.CharField()
    agent_code = serializers.CharField()
    context = serializers.ListField(child=serializers.DictField())
    extra_state = serializers.JSONField(allow_null=True)
    head = serializers.CharField(help_text="chain digest of the last active message; empty for an empty context")


class BlockSerializer(serializers.Serializer):
    seq = serializers.IntegerField()
    agent_code = serializers.CharField()
    role = serializers.CharField()
    content = serializers.CharField()
    block_type = serializers.CharField()
    archived = serializers.BooleanField()
    message = serializers.DictField()
    created_at = serializers.DateTimeField()


class ThreadSummarySerializer(serializers.Serializer):
    thread_id = serializers.CharField()
    owner = serializers.CharField(source="owner.username")
    agent_code = serializers.CharField()
    title = serializers.CharField()
    active_blocks = serializers.IntegerField(source="active_count")
    archived_blocks = serializers.IntegerField(source="archived_count")
    metadata = serializers.DictField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class ThreadDetailSerializer(ThreadSummarySerializer):
    status = serializers.CharField()
    values = serializers.JSONField()
    checkpoints = serializers.IntegerField()


class ClearResultSerializer(serializers.Serializer):
    archived = serializers.IntegerField(help_text="blocks archived by this clear")
    active_blocks = serializers.IntegerField()
    archived_blocks = serializers.IntegerField()
