"""Shapes of the checkpoint endpoints and of LangGraph's thread endpoints (for the OpenAPI document).

The rules and the field checks live in `checkpoint_services`; these only describe JSON.
"""

from __future__ import annotations

from rest_framework import serializers


class CheckpointPutSerializer(serializers.Serializer):
    checkpoint = serializers.DictField(
        help_text="The snapshot. LangGraph's shape: {v, id, ts, channel_values, channel_versions, versions_seen, "
        "updated_channels}; channel values are JSON or typed blobs {\"$blob\": {\"type\", \"base64\"}}."
    )
    metadata = serializers.DictField(required=False)
    checkpoint_id = serializers.CharField(required=False, help_text="Made by the server when absent.")
    parent_checkpoint_id = serializers.CharField(required=False, allow_null=True)
    checkpoint_ns = serializers.CharField(required=False, allow_blank=True, default="")
    node_id = serializers.CharField(required=False, allow_blank=True)
    next_node_id = serializers.CharField(required=False, allow_blank=True)


class CheckpointRefSerializer(serializers.Serializer):
    thread_id = serializers.CharField()
    checkpoint_ns = serializers.CharField(allow_blank=True)
    checkpoint_id = serializers.CharField()


class PendingWriteSerializer(serializers.Serializer):
    task_id = serializers.CharField()
    task_path = serializers.CharField(allow_blank=True)
    idx = serializers.IntegerField()
    channel = serializers.CharField()
    value = serializers.JSONField()


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


class CheckpointListSerializer(serializers.Serializer):
    results = CheckpointSerializer(many=True)
    next_before = serializers.CharField(
        allow_null=True, help_text="Pass as `before` for the next (older) page; null on the last page."
    )


class WriteItemSerializer(serializers.Serializer):
    channel = serializers.CharField()
    value = serializers.JSONField()


class WritesPostSerializer(serializers.Serializer):
    task_id = serializers.CharField()
    task_path = serializers.CharField(required=False, allow_blank=True)
    checkpoint_ns = serializers.CharField(required=False, allow_blank=True)
    writes = WriteItemSerializer(many=True)


class ReleaseSerializer(serializers.Serializer):
    thread_id = serializers.CharField()
    checkpoints = CheckpointSerializer(many=True)


class DeletedSerializer(serializers.Serializer):
    checkpoints = serializers.IntegerField(help_text="checkpoints removed")


class PruneRequestSerializer(serializers.Serializer):
    thread_ids = serializers.ListField(child=serializers.CharField())
    strategy = serializers.ChoiceField(choices=["keep_latest", "delete"], default="keep_latest")


class PruneResultSerializer(serializers.Serializer):
    threads = serializers.IntegerField()
    checkpoints = serializers.IntegerField()


class DeleteForRunsSerializer(serializers.Serializer):
    run_ids = serializers.ListField(child=serializers.CharField())


class CopyRequestSerializer(serializers.Serializer):
    thread_id = serializers.CharField(required=False, help_text="The new thread's id; a uuid when absent.")


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
    thread_id = serializers.CharField(required=False, help_text="A uuid is made when absent.")
    metadata = serializers.DictField(required=False)
    if_exists = serializers.ChoiceField(choices=["raise", "do_nothing"], required=False)


class ThreadPatchSerializer(serializers.Serializer):
    metadata = serializers.DictField(help_text="Keys merged into the thread's metadata.")


class ThreadSearchSerializer(serializers.Serializer):
    metadata = serializers.DictField(required=False, help_text="Threads whose metadata contains this object.")
    ids = serializers.ListField(child=serializers.CharField(), required=False)
    status = serializers.ChoiceField(choices=["idle", "busy", "interrupted", "error"], required=False)
    limit = serializers.IntegerField(required=False, default=10, min_value=1, max_value=1000)
    offset = serializers.IntegerField(required=False, default=0, min_value=0)
    sort_by = serializers.ChoiceField(choices=["thread_id", "status", "created_at", "updated_at"], required=False)
    sort_order = serializers.ChoiceField(choices=["asc", "desc"], required=False)


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
    path = serializers.ListField(child=serializers.CharField())
    error = serializers.JSONField(allow_null=True)
    interrupts = InterruptSerializer(many=True)
    checkpoint = CheckpointConfigSerializer(allow_null=True)
    state = serializers.DictField(allow_null=True)
    result = serializers.DictField(allow_null=True)


class ThreadStateSerializer(serializers.Serializer):
    values = serializers.JSONField()
    next = serializers.ListField(child=serializers.CharField())
    tasks = ThreadTaskSerializer(many=True)
    checkpoint = CheckpointConfigSerializer()
    metadata = serializers.DictField()
    created_at = serializers.CharField(allow_null=True)
    parent_checkpoint = CheckpointConfigSerializer(allow_null=True)
    interrupts = InterruptSerializer(many=True)


class StateAtCheckpointSerializer(serializers.Serializer):
    checkpoint = serializers.DictField(help_text="{checkpoint_id, checkpoint_ns}")


class HistoryRequestSerializer(serializers.Serializer):
    limit = serializers.IntegerField(required=False, default=10, min_value=1, max_value=1000)
    before = serializers.JSONField(required=False, help_text="A checkpoint id, or a checkpoint config {checkpoint_id}.")
    metadata = serializers.DictField(required=False)
    checkpoint = serializers.DictField(required=False, help_text="{checkpoint_ns}: the namespace to read (root by default).")
