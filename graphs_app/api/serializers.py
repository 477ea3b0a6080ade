"""Shapes of the graph endpoints. Rules are in services; these only describe JSON."""

from __future__ import annotations

from django.conf import settings
from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from drf_spectacular.plumbing import ResolvedComponent
from rest_framework import serializers

from ..compiler import MAX_ID_LENGTH
from ..models import NAME_MAX

ADJACENCY_HELP = "node -> successors, in definition order, __start__ first and __end__ last"

# What the compiler's parser accepts (graphs_app.compiler.parsing: Parser and from_langgraph_json),
# as closely as OpenAPI 3.0 can say it: a spec that fits these schemas is compiled (a
# wrong graph is `valid: false`), anything else is a 400 naming the field. Keys not
# listed here are kept and ignored.
MAX_NODES, MAX_EDGES = settings.MEMORYADMIN_GRAPH_MAX_NODES, settings.MEMORYADMIN_GRAPH_MAX_EDGES
_ID = {"type": "string", "maxLength": MAX_ID_LENGTH}
_NAMES = {"type": "array", "nullable": True, "maxItems": MAX_NODES, "items": _ID}
_REF = "#/components/schemas/"
GRAPH_SCHEMAS = {
    "GraphSpec": {
        "type": "object",
        "description": "A graph definition (docs/graphs.md); __start__ and __end__ are implicit. "
        f"At most {MAX_NODES} nodes and {MAX_EDGES} edges (an outcome of a condition counts as one) "
        "in all levels together, subgraphs included.",
        "required": ["nodes"],
        "properties": {
            "nodes": {"type": "array", "items": {"$ref": _REF + "GraphNode"}},
            "edges": {"type": "array", "nullable": True, "items": {"$ref": _REF + "GraphEdge"}},
            "interrupt_before": _NAMES,
            "interrupt_after": _NAMES,
        },
    },
    "GraphNode": {
        "type": "object",
        "required": ["id"],
        "properties": {
            "id": _ID,
            "subgraph": {"allOf": [{"$ref": _REF + "GraphSpec"}], "nullable": True, "description": "a nested graph"},
        },
    },
    "GraphEdge": {
        "oneOf": [
            {
                "type": "object",
                "description": "A plain edge; several from one source are parallel branches.",
                "required": ["source", "target"],
                "properties": {"source": _ID, "target": _ID},
                "not": {"required": ["targets"]},
            },
            {
                "type": "object",
                "description": "A conditional edge: outcome -> node.",
                "required": ["source", "condition", "targets"],
                "properties": {
                    "source": _ID,
                    "condition": _ID,
                    "targets": {"type": "object", "minProperties": 1, "additionalProperties": _ID},
                    "parallel": {"type": "boolean", "nullable": True},
                },
                "not": {"required": ["target"]},
            },
        ]
    },
    "LangGraphJson": {
        "type": "object",
        "description": "LangGraph's get_graph().to_json(): typed nodes, __start__ and __end__ listed, "
        "one edge per outcome of a condition (`conditional`, labelled by `data`).",
        "required": ["nodes"],
        "properties": {
            "nodes": {
                "type": "array",
                "minItems": 1,
                "maxItems": MAX_NODES,
                "description": f"at most {MAX_NODES} nodes besides __start__ and __end__",
                "items": {
                    "type": "object",
                    "required": ["id", "type"],
                    "properties": {"id": {"$ref": _REF + "LangGraphId"}, "type": {"description": "runnable, schema…"}},
                },
            },
            "edges": {
                "type": "array",
                "nullable": True,
                "maxItems": MAX_EDGES,
                "items": {
                    "type": "object",
                    "required": ["source", "target"],
                    "properties": {
                        "source": {"$ref": _REF + "LangGraphId"},
                        "target": {"$ref": _REF + "LangGraphId"},
                        "conditional": {"description": "truthy: one outcome of a conditional edge"},
                    },
                },
            },
        },
    },
    # Integers beyond 64 bits reach the server as floats (orjson), which are not ids.
    "LangGraphId": {"oneOf": [_ID, {"type": "integer", "minimum": -(2**63), "maximum": 2**64 - 1}]},
}


class GraphSpecField(serializers.JSONField):
    """A graph spec: this project's schema or LangGraph's JSON (documented by the extension below)."""


class GraphSpecFieldExtension(OpenApiSerializerFieldExtension):
    target_class = GraphSpecField

    def map_serializer_field(self, auto_schema, direction):
        for name, schema in GRAPH_SCHEMAS.items():
            auto_schema.registry.register_on_missing(
                ResolvedComponent(name=name, type=ResolvedComponent.SCHEMA, object=name, schema=schema)
            )
        return {"anyOf": [{"$ref": _REF + "GraphSpec"}, {"$ref": _REF + "LangGraphJson"}]}


# The name is trimmed, then must be 1..NAME_MAX characters without control characters
# (graphs_app.specs.name_validate).
_NAME_CHAR = r"[^\x00-\x1f\x7f-\x9f]"
_NAME_EDGE = r"[^\s\x00-\x1f\x7f-\x9f]"
NAME_PATTERN = rf"^\s*{_NAME_EDGE}(?:{_NAME_CHAR}{{0,{NAME_MAX - 2}}}{_NAME_EDGE})?\s*$"
NAME_HELP = f"1 to {NAME_MAX} characters once trimmed, no control characters; unique among the caller's graphs"


class GraphCompileRequestSerializer(serializers.Serializer):
    spec = GraphSpecField(help_text="A graph definition (docs/graphs.md), or LangGraph's get_graph().to_json().")


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
    name = serializers.RegexField(NAME_PATTERN, help_text=NAME_HELP)
    spec = GraphSpecField(help_text="stored when well formed (at most 1 MiB of JSON), even if the graph is invalid")


class GraphUpdateSerializer(serializers.Serializer):
    # "name, spec or both": an object with neither is a 400.
    openapi_keywords = {"anyOf": [{"required": ["name"]}, {"required": ["spec"]}]}

    name = serializers.RegexField(NAME_PATTERN, required=False, help_text=NAME_HELP + "; left out: kept")
    spec = GraphSpecField(required=False, help_text="left out: kept")


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
