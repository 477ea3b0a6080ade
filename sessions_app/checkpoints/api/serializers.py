"""Shapes of the checkpoint endpoints and of LangGraph's thread endpoints (for the OpenAPI document).

The rules and the field checks live in `checkpoint_services`; these only describe JSON.
"""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers


# JSON Schema patterns (ECMA-262, where "$" is the end of the string): the services' rules,
# "." and ".." (path steps) reserved like "latest" and "search".
CHECKPOINT_ID_PATTERN = r"^(?!(?:latest|\.|\.\.)$)[A-Za-z0-9_.:@$+=~-]{1,128}$"
# A checkpoint id, or "" for none.
PARENT_ID_PATTERN = r"^((?!(?:latest|\.|\.\.)$)[A-Za-z0-9_.:@$+=~-]{1,128})?$"
NS_PATTERN = r"^[^\u0000-\u001f]*$"
THREAD_ID_PATTERN = r"^(?!(?:search|\.|\.\.)$)[A-Za-z0-9_.:@$-]{1,64}$"


@extend_schema_field({"type": "object", "additionalProperties": True})
class JsonObjectField(serializers.JSONField):
    """Any JSON object (not an array, not a scalar)."""


@extend_schema_field(
    {
        "type": "object",
        "additionalProperties": True,
        "properties": {"channel_values": {"type": "object", "additionalProperties": True}},
        "description": "The snapshot. LangGraph's shape: {v, id, ts, channel_values, channel_versions, versions_seen, "
        "updated_channels}; channel values are JSON, LangChain/LangGraph envelopes ({lc, type, id, kwargs}) "
        "or typed blobs {\"$blob\": {\"type\", \"base64\"}} (docs/checkpoints.md).",
    }
)
class CheckpointBodyField(serializers.JSONField):
    pass


def namespace_field(**kwargs):
    return serializers.RegexField(NS_PATTERN, max_length=512, allow_blank=True, **kwargs)


class CheckpointReplaceSerializer(serializers.Serializer):
    checkpoint = CheckpointBodyField()
    metadata = JsonObjectField(required=False, allow_null=True)
    parent_checkpoint_id = serializers.RegexField(PARENT_ID_PATTERN, required=False, allow_null=True, allow_blank=True)
    checkpoint_ns = namespace_field(required=False, allow_null=True)
    node_id = serializers.CharField(required=False, allow_null=True, allow_blank=True, max_length=255, help_text="derived from a LangGraph checkpoint when absent")
    next_node_id = serializers.CharField(required=False, allow_null=True, allow_blank=True, max_length=255, help_text="derived from a LangGraph checkpoint when absent")


class CheckpointPutSerializer(CheckpointReplaceSerializer):
    checkpoint_id = serializers.RegexField(CHECKPOINT_ID_PATTERN, required=False, allow_null=True, help_text="Made by the server when absent or null.")


class CheckpointRefSerializer(serializers.Serializer):
    thread_id = serializers.CharField()
    checkpoint_ns = serializers.CharField(allow_blank=True)
    checkpoint_id = serializers.CharField()
    state_tag = serializers.CharField(
        required=False, help_text="The latest read's tag once this checkpoint is stored, for its If-None-Match (a put on the fast path)."
    )


class PendingWriteSerializer(serializers.Serializer):
    task_id = serializers.CharField()
    task_path = serializers.CharField(allow_blank=True)
    idx = serializers.IntegerField()
    channel = serializers.CharField()
    value = serializers.JSONField(allow_null=True)


class CheckpointSerializer(serializers.Serializer):
    thread_id = serializers.CharField()
    checkpoint_ns = serializers.CharField(allow_blank=True)
    checkpoint_id = serializers.CharField()
    parent_checkpoint_id = serializers.CharField(allow_null=True)
    checkpoint = serializers.DictField()
    metadata = serializers.DictField()
    node_id = serializers.CharField(allow_blank=True)
    next_node_id = serializers.CharField(allow_blank=True)
    pending_writes = PendingWriteSerializer(many=True)
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    state_tag = serializers.CharField(
        required=False, help_text="Of the latest read without pending writes: send it as If-None-Match for a 304 while nothing changed."
    )


class CheckpointListSerializer(serializers.Serializer):
    results = CheckpointSerializer(many=True)
    next_before = serializers.CharField(
        allow_null=True, help_text="Pass as `before` for the next (older) page; null on the last page."
    )


class WriteItemSerializer(serializers.Serializer):
    channel = serializers.CharField(max_length=255)
    value = serializers.JSONField(allow_null=True)


class WritesPostSerializer(serializers.Serializer):
    task_id = serializers.CharField(max_length=255)
    task_path = serializers.CharField(required=False, allow_blank=True, allow_null=True, max_length=1024)
    checkpoint_ns = namespace_field(required=False, allow_null=True)
    writes = serializers.ListField(child=WriteItemSerializer(), max_length=10_000)


class ReleaseSerializer(serializers.Serializer):
    thread_id = serializers.CharField()
    checkpoints = CheckpointSerializer(many=True)


class DeletedSerializer(serializers.Serializer):
    checkpoints = serializers.IntegerField(help_text="checkpoints removed")


class PruneRequestSerializer(serializers.Serializer):
    thread_ids = serializers.ListField(child=serializers.RegexField(THREAD_ID_PATTERN), max_length=1000)
    strategy = serializers.ChoiceField(choices=["keep_latest", "delete"], required=False, allow_null=True, help_text="keep_latest when absent")


class PruneResultSerializer(serializers.Serializer):
    threads = serializers.IntegerField()
    checkpoints = serializers.IntegerField()


class DeleteForRunsSerializer(serializers.Serializer):
    run_ids = serializers.ListField(child=serializers.CharField(min_length=1, max_length=128), max_length=1000)


class CopyRequestSerializer(serializers.Serializer):
    thread_id = serializers.RegexField(THREAD_ID_PATTERN, required=False, allow_null=True, help_text="The new thread's id; a uuid when absent.")


# --- LangGraph's thread shapes ------------------------------------------------------------------


class LangGraphThreadSerializer(serializers.Serializer):
    thread_id = serializers.CharField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    metadata = serializers.DictField()
    status = serializers.ChoiceField(choices=["idle", "busy", "interrupted", "error"])
    values = serializers.JSONField()
    interrupts = serializers.DictField(child=serializers.ListField(child=serializers.DictField()))
    owner = serializers.CharField()
    agent_code = serializers.CharField(allow_blank=True)
    title = serializers.CharField(allow_blank=True)
    active_blocks = serializers.IntegerField()
    archived_blocks = serializers.IntegerField()
    checkpoints = serializers.IntegerField()


class ThreadCreateSerializer(serializers.Serializer):
    thread_id = serializers.RegexField(THREAD_ID_PATTERN, required=False, allow_null=True, help_text="A uuid is made when absent.")
    metadata = JsonObjectField(required=False, allow_null=True)
    if_exists = serializers.ChoiceField(choices=["raise", "do_nothing"], required=False, allow_null=True, help_text="raise when absent")


class ThreadPatchSerializer(serializers.Serializer):
    metadata = JsonObjectField(help_text="Keys merged into the thread's metadata.")


class ThreadSearchSerializer(serializers.Serializer):
    metadata = JsonObjectField(required=False, allow_null=True, help_text="Threads whose metadata contains this object.")
    ids = serializers.ListField(child=serializers.RegexField(THREAD_ID_PATTERN), required=False, allow_null=True, max_length=1000)
    status = serializers.ChoiceField(choices=["idle", "busy", "interrupted", "error"], required=False, allow_null=True)
    limit = serializers.IntegerField(required=False, allow_null=True, min_value=1, max_value=1000, help_text="10 when absent")
    offset = serializers.IntegerField(required=False, allow_null=True, min_value=0, max_value=1_000_000)
    sort_by = serializers.ChoiceField(
        choices=["thread_id", "status", "created_at", "updated_at", "title", "active_count"], required=False, allow_null=True
    )
    sort_order = serializers.ChoiceField(choices=["asc", "desc"], required=False, allow_null=True)
    q = serializers.CharField(required=False, allow_blank=True, allow_null=True, help_text="text in the title, thread id or agent code")
    agent_code = serializers.CharField(required=False, allow_blank=True, allow_null=True)
    owner = serializers.CharField(required=False, allow_blank=True, allow_null=True, help_text="username (operators and admins)")
    created_from = serializers.DateField(required=False, allow_null=True, help_text="YYYY-MM-DD, the day included")
    created_to = serializers.DateField(required=False, allow_null=True, help_text="YYYY-MM-DD, the day included")
    updated_from = serializers.DateField(required=False, allow_null=True, help_text="YYYY-MM-DD, the day included")
    updated_to = serializers.DateField(required=False, allow_null=True, help_text="YYYY-MM-DD, the day included")


class CheckpointConfigSerializer(serializers.Serializer):
    thread_id = serializers.CharField()
    checkpoint_ns = serializers.CharField(allow_blank=True)
    checkpoint_id = serializers.CharField(allow_null=True)
    checkpoint_map = serializers.DictField(allow_null=True)


class InterruptSerializer(serializers.Serializer):
    value = serializers.JSONField()
    id = serializers.CharField()


class ThreadTaskSerializer(serializers.Serializer):
    id = serializers.CharField(allow_blank=True)
    name = serializers.CharField()
    path = serializers.ListField(child=serializers.JSONField(), help_text="LangGraph's task path: [__pregel_push, index, false] or [__pregel_pull, node]")
    error = serializers.CharField(allow_null=True)
    interrupts = InterruptSerializer(many=True)
    checkpoint = CheckpointConfigSerializer(allow_null=True)
    state = serializers.DictField(allow_null=True)
    result = serializers.JSONField(allow_null=True, help_text="a finished task's writes to state keys; null until it finishes")


class ThreadStateSerializer(serializers.Serializer):
    values = serializers.JSONField()
    next = serializers.ListField(child=serializers.CharField())
    tasks = ThreadTaskSerializer(many=True)
    checkpoint = CheckpointConfigSerializer()
    metadata = serializers.DictField()
    created_at = serializers.CharField(allow_null=True)
    parent_checkpoint = CheckpointConfigSerializer(allow_null=True)
    interrupts = InterruptSerializer(many=True)


class CheckpointRefInSerializer(serializers.Serializer):
    checkpoint_id = serializers.RegexField(CHECKPOINT_ID_PATTERN, required=False, allow_null=True)
    checkpoint_ns = namespace_field(required=False, allow_null=True)


class StateAtCheckpointSerializer(serializers.Serializer):
    checkpoint = CheckpointRefInSerializer(help_text="{checkpoint_id, checkpoint_ns}; the latest when no id")


@extend_schema_field(
    {
        "oneOf": [
            {"type": "string", "pattern": PARENT_ID_PATTERN},
            {
                "type": "object",
                "required": ["checkpoint_id"],
                "properties": {"checkpoint_id": {"type": "string", "pattern": PARENT_ID_PATTERN, "nullable": True}},
            },
            {
                "type": "object",
                "required": ["configurable"],
                "properties": {"configurable": {"type": "object", "properties": {"checkpoint_id": {"type": "string", "pattern": PARENT_ID_PATTERN}}}},
            },
        ],
        "nullable": True,
        "description": "A checkpoint id, a checkpoint config {checkpoint_id} or a RunnableConfig {configurable: {checkpoint_id}}: "
        "only older states.",
    }
)
class BeforeField(serializers.JSONField):
    pass


class HistoryNamespaceSerializer(serializers.Serializer):
    checkpoint_ns = namespace_field(required=False, allow_null=True)


class HistoryRequestSerializer(serializers.Serializer):
    limit = serializers.IntegerField(required=False, allow_null=True, min_value=1, max_value=1000, help_text="10 when absent")
    before = BeforeField(required=False)
    metadata = JsonObjectField(required=False, allow_null=True)
    checkpoint = HistoryNamespaceSerializer(required=False, allow_null=True, help_text="{checkpoint_ns}: the namespace to read (root by default).")


class ThreadCountSerializer(serializers.Serializer):
    metadata = JsonObjectField(required=False, allow_null=True, help_text="Threads whose metadata contains this object.")
    status = serializers.ChoiceField(choices=["idle", "busy", "interrupted", "error"], required=False, allow_null=True)
    q = serializers.CharField(required=False, allow_blank=True, allow_null=True, help_text="text in the title, thread id or agent code")
    agent_code = serializers.CharField(required=False, allow_blank=True, allow_null=True)
    owner = serializers.CharField(required=False, allow_blank=True, allow_null=True, help_text="username (operators and admins)")
    created_from = serializers.DateField(required=False, allow_null=True, help_text="YYYY-MM-DD, the day included")
    created_to = serializers.DateField(required=False, allow_null=True, help_text="YYYY-MM-DD, the day included")
    updated_from = serializers.DateField(required=False, allow_null=True, help_text="YYYY-MM-DD, the day included")
    updated_to = serializers.DateField(required=False, allow_null=True, help_text="YYYY-MM-DD, the day included")


class UpdateStateSerializer(serializers.Serializer):
    values = JsonObjectField(
        allow_null=True,
        help_text="state keys to write as as_node: messages merged by add_messages, any other key replaced",
    )
    as_node = serializers.CharField(required=False, allow_null=True, help_text="the node the update is made as; inferred as LangGraph does when absent")
    checkpoint = CheckpointRefInSerializer(required=False, allow_null=True, help_text="the checkpoint to update (the latest when absent)")
    checkpoint_id = serializers.RegexField(CHECKPOINT_ID_PATTERN, required=False, allow_null=True, help_text="as checkpoint.checkpoint_id")


class UpdateStateResponseSerializer(serializers.Serializer):
    checkpoint = CheckpointConfigSerializer()
