"""Shapes of the graph endpoints. Rules are in services; these only describe JSON."""

from __future__ import annotations

from rest_framework import serializers

ADJACENCY_HELP = "node -> successors, in definition order, __start__ first and __end__ last"


class GraphCompileRequestSerializer(serializers.Serializer):
    spec = serializers.JSONField(help_text="A graph definition (docs/graphs.md), or LangGraph's get_graph().to_json().")


class GraphErrorSerializer(serializers.Serializer):
    code = serializers.CharField(help_text="unknown_node, duplicate_node, unreachable, no_path_to_end, …")
    message = serializers.CharField()
    node = serializers.CharField(required=False, help_text="flattened id, e.g. B-D")
    edge = serializers.DictField(required=False, help_text="the edge as written in its (sub)graph")


class ParallelNodeSerializer(serializers.Serializer):
    source = serializers.CharField()
    branches = serializers.ListField(child=serializers.CharField())
    join = serializers.CharField()
    condition = serializers.CharField(allow_null=True)
    targets = serializers.DictField(child=serializers.ListField(child=serializers.CharField()), allow_null=True)


class MermaidSerializer(serializers.Serializer):
    source = serializers.CharField(help_text="flowchart of the flattened graph")
    compiled = serializers.CharField(help_text="flowchart after parallel nodes are inserted")


class CompileResultSerializer(serializers.Serializer):
    valid = serializers.BooleanField()
    errors = GraphErrorSerializer(many=True)
    flattened = serializers.DictField(child=serializers.ListField(child=serializers.CharField()), help_text=ADJACENCY_HELP)
    compiled = serializers.DictField(child=serializers.ListField(child=serializers.CharField()), help_text=ADJACENCY_HELP)
    inserted_nodes = serializers.ListField(child=serializers.CharField())
    parallel_nodes = serializers.DictField(child=ParallelNodeSerializer())
    interrupt_before = serializers.ListField(child=serializers.CharField())
    interrupt_after = serializers.ListField(child=serializers.CharField())
    mermaid = MermaidSerializer()


class GraphSaveSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=100, help_text="unique among the caller's graphs")
    spec = serializers.JSONField(help_text="stored when well formed, even if the graph is invalid")


class GraphUpdateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=100, required=False, help_text="left out: kept")
    spec = serializers.JSONField(required=False, help_text="left out: kept")


class GraphSummarySerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    owner = serializers.CharField(source="owner.username")
    valid = serializers.BooleanField(help_text="as compiled when the spec was last saved")
    node_count = serializers.IntegerField(help_text="nodes once flattened, without __start__ and __end__")
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class GraphDetailSerializer(GraphSummarySerializer):
    spec = serializers.JSONField()
    compile = CompileResultSerializer(help_text="the spec compiled now")
