"""Step 0 of the compiler: JSON into typed records (or SpecError naming the field), and
LangGraph's ``get_graph().to_json()`` shape converted into this compiler's schema."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from .model import END, MAX_DEPTH, MAX_EDGES, MAX_ID_LENGTH, MAX_NODES, START, SpecError


def from_langgraph_json(data: Any, *, max_nodes: int = MAX_NODES, max_edges: int = MAX_EDGES) -> dict[str, Any]:
    """Convert LangGraph's ``graph.get_graph().to_json()`` into this compiler's schema.

    There ``__start__``/``__end__`` are listed as nodes (dropped here: they are implicit)
    and each outcome of a conditional edge is a separate edge flagged ``conditional``,
    labelled by ``data`` when the outcome name differs from the target; the outcomes of
    one source are grouped into one conditional edge keyed by that label or the target.
    """
    if not isinstance(data, dict):
        raise SpecError("spec", "must be a JSON object")
    nodes = as_list(data.get("nodes"), "nodes")
    edges = as_list(data.get("edges", []), "edges", optional=True)
    if len(nodes) > max_nodes + 2:  # + __start__ and __end__
        raise SpecError("nodes", f"the graph has more than {max_nodes} nodes")
    if len(edges) > max_edges:
        raise SpecError("edges", f"the graph has more than {max_edges} edges")

    converted_nodes: list[dict[str, Any]] = []
    for index, node in enumerate(nodes):
        if not isinstance(node, dict):
            raise SpecError(f"nodes[{index}]", "must be an object with an id")
        node_id = _langgraph_id(node.get("id"), f"nodes[{index}].id")
        if node_id not in (START, END):
            converted_nodes.append({"id": node_id})

    converted_edges: list[dict[str, Any]] = []
    outcomes_by_source: dict[str, dict[str, str]] = {}
    for index, edge in enumerate(edges):
        if not isinstance(edge, dict):
            raise SpecError(f"edges[{index}]", "must be an object")
        source = _langgraph_id(edge.get("source"), f"edges[{index}].source")
        target = _langgraph_id(edge.get("target"), f"edges[{index}].target")
        if not edge.get("conditional"):
            converted_edges.append({"source": source, "target": target})
            continue
        outcomes = outcomes_by_source.get(source)
        if outcomes is None:
            # Shared dict: later outcomes of this source land in the edge already listed.
            outcomes = outcomes_by_source[source] = {}
            converted_edges.append({"source": source, "condition": "branch", "targets": outcomes})
        label = edge.get("data")
        base = label if isinstance(label, str) and label else target
        key, suffix = base, 2
        while key in outcomes and outcomes[key] != target:
            key, suffix = f"{base}#{suffix}", suffix + 1
        outcomes[key] = target
    return {"nodes": converted_nodes, "edges": converted_edges, "interrupt_before": [], "interrupt_after": []}


def looks_like_langgraph(spec: Any) -> bool:
    """LangGraph's JSON lists __start__/__end__ as nodes, types its nodes and flags
    conditional edges; any key of our own schema (targets, subgraph, interrupts) wins."""
    if not isinstance(spec, dict) or not isinstance(spec.get("nodes"), list):
        return False
    if "interrupt_before" in spec or "interrupt_after" in spec:
        return False
    nodes = [n for n in spec["nodes"] if isinstance(n, dict)]
    raw_edges = spec.get("edges")
    edges = [e for e in raw_edges if isinstance(e, dict)] if isinstance(raw_edges, list) else []
    if any("subgraph" in n for n in nodes) or any("targets" in e or "condition" in e for e in edges):
        return False
    return (
        any(n.get("id") in (START, END) or "type" in n for n in nodes)
        or any("conditional" in e for e in edges)
    )


def _langgraph_id(value: Any, path: str) -> str:
    # LangGraph numbers nodes whose id is a UUID, so ids may arrive as integers: of at most
    # 64 bits, as the schema says (the API reads longer integers exactly, not as floats).
    if isinstance(value, int) and not isinstance(value, bool):
        if not -(2**63) <= value <= 2**64 - 1:
            raise SpecError(path, "must be a string or an integer of at most 64 bits")
        return str(value)
    if not isinstance(value, str):
        raise SpecError(path, "must be a string")
    return value


def as_list(value: Any, path: str, optional: bool = False) -> list[Any]:
    if value is None and optional:
        return []
    if not isinstance(value, list):
        raise SpecError(path, "must be a list")
    return value


@dataclass
class Node:
    id: str
    path: str
    subgraph: Graph | None = None
    too_deep: bool = False


@dataclass
class Edge:
    source: str
    path: str
    target: str | None = None
    condition: str | None = None
    outcomes: dict[str, str] | None = None
    parallel: bool = False

    @property
    def ends(self) -> list[str]:
        return list(self.outcomes.values()) if self.outcomes is not None else [self.target or ""]

    def as_dict(self) -> dict[str, Any]:
        if self.outcomes is None:
            return {"source": self.source, "target": self.target}
        answer: dict[str, Any] = {"source": self.source, "condition": self.condition, "targets": dict(self.outcomes)}
        if self.parallel:
            answer["parallel"] = True
        return answer


@dataclass
class Graph:
    path: str
    nodes: list[Node]
    edges: list[Edge]
    interrupt_before: list[str]
    interrupt_after: list[str]


class Parser:
    """Turns JSON into typed records, or raises SpecError naming the field.

    Only types are checked here; meaning (unknown ids, reachability…) is step 1."""

    def __init__(self, *, max_nodes: int = MAX_NODES, max_edges: int = MAX_EDGES) -> None:
        self.max_nodes, self.max_edges = max_nodes, max_edges
        self.node_count = 0
        self.edge_count = 0

    def graph(self, obj: Any, path: str, depth: int) -> Graph:
        if not isinstance(obj, dict):
            raise SpecError(path or "spec", "must be a JSON object with nodes and edges")
        prefix = f"{path}." if path else ""
        if "nodes" not in obj:
            raise SpecError(f"{prefix}nodes", "is required")
        nodes = [
            self.node(item, f"{prefix}nodes[{i}]", depth)
            for i, item in enumerate(as_list(obj["nodes"], f"{prefix}nodes"))
        ]
        edges = [
            self.edge(item, f"{prefix}edges[{i}]")
            for i, item in enumerate(as_list(obj.get("edges"), f"{prefix}edges", optional=True))
        ]
        return Graph(
            path=path,
            nodes=nodes,
            edges=edges,
            interrupt_before=self.names(obj.get("interrupt_before"), f"{prefix}interrupt_before"),
            interrupt_after=self.names(obj.get("interrupt_after"), f"{prefix}interrupt_after"),
        )

    def node(self, obj: Any, path: str, depth: int) -> Node:
        if not isinstance(obj, dict):
            raise SpecError(path, "must be an object with an id")
        self.node_count += 1
        if self.node_count > self.max_nodes:
            raise SpecError(path, f"the graph has more than {self.max_nodes} nodes")
        node = Node(id=self.string(obj.get("id"), f"{path}.id"), path=path)
        subgraph = obj.get("subgraph")
        if subgraph is None:
            return node
        if not isinstance(subgraph, dict):
            raise SpecError(f"{path}.subgraph", "must be a graph object")
        if depth + 1 > MAX_DEPTH:
            node.too_deep = True  # reported by step 1; not parsed, so recursion stays bounded
        else:
            node.subgraph = self.graph(subgraph, f"{path}.subgraph", depth + 1)
        return node

    def edge(self, obj: Any, path: str) -> Edge:
        if not isinstance(obj, dict):
            raise SpecError(path, "must be an object")
        source = self.string(obj.get("source"), f"{path}.source")
        if ("target" in obj) == ("targets" in obj):
            raise SpecError(path, 'needs exactly one of "target" or "targets"')
        if "target" in obj:
            self.count_edges(1, path)
            return Edge(source=source, path=path, target=self.string(obj["target"], f"{path}.target"))
        outcomes = obj["targets"]
        if not isinstance(outcomes, dict) or not outcomes:
            raise SpecError(f"{path}.targets", "must be a non-empty object of outcome: node")
        self.count_edges(len(outcomes), path)
        mapped = {}
        for outcome, target in outcomes.items():
            where = f"{path}.targets[{json.dumps(outcome, default=repr)}]"
            mapped[self.string(outcome, where, what="an outcome name")] = self.string(target, where)
        parallel = obj.get("parallel")
        if parallel is not None and not isinstance(parallel, bool):
            raise SpecError(f"{path}.parallel", "must be true or false")
        return Edge(
            source=source,
            path=path,
            condition=self.string(obj.get("condition"), f"{path}.condition"),
            outcomes=mapped,
            parallel=bool(parallel),
        )

    def names(self, value: Any, path: str) -> list[str]:
        items = as_list(value, path, optional=True)
        if len(items) > self.max_nodes:
            raise SpecError(path, f"lists more than {self.max_nodes} nodes")
        return [self.string(item, f"{path}[{i}]") for i, item in enumerate(items)]

    def count_edges(self, count: int, path: str) -> None:
        self.edge_count += count
        if self.edge_count > self.max_edges:
            raise SpecError(path, f"the graph has more than {self.max_edges} edges")

    @staticmethod
    def string(value: Any, path: str, what: str = "a string") -> str:
        if not isinstance(value, str):
            raise SpecError(path, f"must be {what}")
        if len(value) > MAX_ID_LENGTH:
            raise SpecError(path, f"is longer than {MAX_ID_LENGTH} characters")
        return value


