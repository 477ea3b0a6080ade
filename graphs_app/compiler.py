"""Graph compiler: validate a graph definition, flatten its subgraphs into one adjacency
list, replace parallel fan-out with inserted parallel nodes, and draw both versions in
Mermaid (design section 6; the schema and the steps are in docs/graphs.md).

Pure Python, standard library only: the API, the dashboard preview and the tests call
``graph_compile`` without a database. Input that is not a graph at all raises
``SpecError`` (the API answers 400); a well-formed but wrong graph compiles to
``valid=False`` with every error naming its node or edge.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Union

__all__ = [
    "END",
    "MAX_DEPTH",
    "MAX_EDGES",
    "MAX_ID_LENGTH",
    "MAX_NODES",
    "PARALLEL_PREFIX",
    "SEPARATOR",
    "START",
    "CompileResult",
    "GraphError",
    "ParallelNode",
    "SpecError",
    "from_langgraph_json",
    "graph_compile",
]

START = "__start__"
END = "__end__"
SEPARATOR = "-"  # flattened child ids are parent-child (seed 004 formats them "%s-%s")
PARALLEL_PREFIX = "__parallel__"

# Limits keep every step polynomial and the answer small; beyond them the input is junk.
MAX_NODES = 2000  # all levels together
MAX_EDGES = 10_000  # a conditional edge counts once per outcome
MAX_DEPTH = 16  # subgraph nesting
MAX_ID_LENGTH = 256


# --------------------------------------------------------------------------- results


class SpecError(ValueError):
    """The input is not a graph at all; ``path`` names the field, e.g. ``nodes[2].id``."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


@dataclass
class GraphError:
    """One reason a graph is invalid; ``node`` uses flattened ids (``B-D``)."""

    code: str
    message: str
    node: str | None = None
    edge: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        answer: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.node is not None:
            answer["node"] = self.node
        if self.edge is not None:
            answer["edge"] = self.edge
        return answer


@dataclass
class ParallelNode:
    """A node inserted by step 3: it runs ``branches`` together, then goes to ``join``.

    For a parallel conditional edge it also carries the condition and its outcomes, since
    the source's edge becomes a plain edge to this node."""

    id: str
    source: str
    branches: list[str]
    join: str
    condition: str | None = None
    targets: dict[str, list[str]] | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "branches": list(self.branches),
            "join": self.join,
            "condition": self.condition,
            "targets": None if self.targets is None else {k: list(v) for k, v in self.targets.items()},
        }


@dataclass
class CompileResult:
    valid: bool
    errors: list[GraphError]
    flattened: dict[str, list[str]]
    compiled: dict[str, list[str]]
    inserted_nodes: list[str]
    parallel_nodes: list[ParallelNode]
    interrupt_before: list[str]
    interrupt_after: list[str]
    mermaid_source: str
    mermaid_compiled: str

    def as_dict(self) -> dict[str, Any]:
        """The answer of ``POST /graphs/compile`` (design section 9)."""
        return {
            "valid": self.valid,
            "errors": [error.as_dict() for error in self.errors],
            "flattened": {k: list(v) for k, v in self.flattened.items()},
            "compiled": {k: list(v) for k, v in self.compiled.items()},
            "inserted_nodes": list(self.inserted_nodes),
            "parallel_nodes": {p.id: p.as_dict() for p in self.parallel_nodes},
            "interrupt_before": list(self.interrupt_before),
            "interrupt_after": list(self.interrupt_after),
            "mermaid": {"source": self.mermaid_source, "compiled": self.mermaid_compiled},
        }


# ---------------------------------------------------------------------- entry points


def graph_compile(spec: Any) -> CompileResult:
    """Compile a graph definition: validate, flatten subgraphs, insert parallel nodes, draw.

    Raises SpecError only, and only for input that is not a graph; everything else is
    reported in the result. LangGraph's ``get_graph().to_json()`` shape is converted first.
    """
    if _looks_like_langgraph(spec):
        spec = from_langgraph_json(spec)
    graph = _Parser().graph(spec, path="", depth=0)

    errors: list[GraphError] = []
    _validate(graph, prefix="", owner=None, errors=errors)

    flattener = _Flattener(errors)
    flattener.add(graph, prefix="", entry=START, exit=END)
    flattener.contract()
    keys = [START, *flattener.order, END]
    routes = {key: flattener.routes.get(key) or _Route() for key in keys}

    compiled_keys, compiled_routes, parallel = _insert_parallel_nodes(keys, routes, errors)
    position = {key: index for index, key in enumerate(keys)}
    interrupt_before = sorted(flattener.before, key=position.__getitem__)
    interrupt_after = sorted(flattener.after, key=position.__getitem__)
    before, after = set(interrupt_before), set(interrupt_after)
    by_id = {node.id: node for node in parallel}
    return CompileResult(
        valid=not errors,
        errors=errors,
        flattened=_adjacency(keys, routes),
        compiled=_adjacency(compiled_keys, compiled_routes),
        inserted_nodes=[node.id for node in parallel],
        parallel_nodes=parallel,
        interrupt_before=interrupt_before,
        interrupt_after=interrupt_after,
        mermaid_source=_mermaid(keys, routes, {}, before, after),
        mermaid_compiled=_mermaid(compiled_keys, compiled_routes, by_id, before, after),
    )


def from_langgraph_json(data: Any) -> dict[str, Any]:
    """Convert LangGraph's ``graph.get_graph().to_json()`` into this compiler's schema.

    There ``__start__``/``__end__`` are listed as nodes (dropped here: they are implicit)
    and each outcome of a conditional edge is a separate edge flagged ``conditional``,
    labelled by ``data`` when the outcome name differs from the target; the outcomes of
    one source are grouped into one conditional edge keyed by that label or the target.
    """
    if not isinstance(data, dict):
        raise SpecError("spec", "must be a JSON object")
    nodes = _as_list(data.get("nodes"), "nodes")
    edges = _as_list(data.get("edges", []), "edges", optional=True)
    if len(nodes) > MAX_NODES + 2:  # + __start__ and __end__
        raise SpecError("nodes", f"the graph has more than {MAX_NODES} nodes")
    if len(edges) > MAX_EDGES:
        raise SpecError("edges", f"the graph has more than {MAX_EDGES} edges")

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


def _looks_like_langgraph(spec: Any) -> bool:
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


def _as_list(value: Any, path: str, optional: bool = False) -> list[Any]:
    if value is None and optional:
        return []
    if not isinstance(value, list):
        raise SpecError(path, "must be a list")
    return value


# ------------------------------------------------------------------ step 0: parsing


@dataclass
class _Node:
    id: str
    path: str
    subgraph: _Graph | None = None
    too_deep: bool = False


@dataclass
class _Edge:
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
class _Graph:
    path: str
    nodes: list[_Node]
    edges: list[_Edge]
    interrupt_before: list[str]
    interrupt_after: list[str]


class _Parser:
    """Turns JSON into typed records, or raises SpecError naming the field.

    Only types are checked here; meaning (unknown ids, reachability…) is step 1."""

    def __init__(self) -> None:
        self.node_count = 0
        self.edge_count = 0

    def graph(self, obj: Any, path: str, depth: int) -> _Graph:
        if not isinstance(obj, dict):
            raise SpecError(path or "spec", "must be a JSON object with nodes and edges")
        prefix = f"{path}." if path else ""
        if "nodes" not in obj:
            raise SpecError(f"{prefix}nodes", "is required")
        nodes = [
            self.node(item, f"{prefix}nodes[{i}]", depth)
            for i, item in enumerate(_as_list(obj["nodes"], f"{prefix}nodes"))
        ]
        edges = [
            self.edge(item, f"{prefix}edges[{i}]")
            for i, item in enumerate(_as_list(obj.get("edges"), f"{prefix}edges", optional=True))
        ]
        return _Graph(
            path=path,
            nodes=nodes,
            edges=edges,
            interrupt_before=self.names(obj.get("interrupt_before"), f"{prefix}interrupt_before"),
            interrupt_after=self.names(obj.get("interrupt_after"), f"{prefix}interrupt_after"),
        )

    def node(self, obj: Any, path: str, depth: int) -> _Node:
        if not isinstance(obj, dict):
            raise SpecError(path, "must be an object with an id")
        self.node_count += 1
        if self.node_count > MAX_NODES:
            raise SpecError(path, f"the graph has more than {MAX_NODES} nodes")
        node = _Node(id=self.string(obj.get("id"), f"{path}.id"), path=path)
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

    def edge(self, obj: Any, path: str) -> _Edge:
        if not isinstance(obj, dict):
            raise SpecError(path, "must be an object")
        source = self.string(obj.get("source"), f"{path}.source")
        if ("target" in obj) == ("targets" in obj):
            raise SpecError(path, 'needs exactly one of "target" or "targets"')
        if "target" in obj:
            self.count_edges(1, path)
            return _Edge(source=source, path=path, target=self.string(obj["target"], f"{path}.target"))
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
        return _Edge(
            source=source,
            path=path,
            condition=self.string(obj.get("condition"), f"{path}.condition"),
            outcomes=mapped,
            parallel=bool(parallel),
        )

    def names(self, value: Any, path: str) -> list[str]:
        items = _as_list(value, path, optional=True)
        if len(items) > MAX_NODES:
            raise SpecError(path, f"lists more than {MAX_NODES} nodes")
        return [self.string(item, f"{path}[{i}]") for i, item in enumerate(items)]

    def count_edges(self, count: int, path: str) -> None:
        self.edge_count += count
        if self.edge_count > MAX_EDGES:
            raise SpecError(path, f"the graph has more than {MAX_EDGES} edges")

    @staticmethod
    def string(value: Any, path: str, what: str = "a string") -> str:
        if not isinstance(value, str):
            raise SpecError(path, f"must be {what}")
        if len(value) > MAX_ID_LENGTH:
            raise SpecError(path, f"is longer than {MAX_ID_LENGTH} characters")
        return value


# --------------------------------------------------------------- step 1: validation


def _validate(graph: _Graph, prefix: str, owner: str | None, errors: list[GraphError]) -> None:
    """Step 1 for one level, then each subgraph against its own __start__ and __end__,
    with node names in their flattened form (``B-D``)."""
    nodes = _first_nodes(graph, prefix, errors)
    successors = _checked_edges(graph, nodes, prefix, errors)

    if not any(edge.source == START for edge in graph.edges):
        scope = f"subgraph {_q(owner)}" if owner else "the graph"
        errors.append(GraphError("no_entry", f"{scope} has no edge from {START}", node=owner or START))

    reached = _reach([START], successors.get)
    predecessors: dict[str, list[str]] = {}
    for source, targets in successors.items():
        for target in targets:
            predecessors.setdefault(target, []).append(source)
    finishing = _reach([END], predecessors.get)
    for node_id in nodes:
        name = prefix + node_id
        if node_id not in reached:
            errors.append(GraphError("unreachable", f"node {_q(name)} cannot be reached from {START}", node=name))
        elif node_id not in finishing:  # an unreachable node is reported once, above
            errors.append(GraphError("no_path_to_end", f"node {_q(name)} has no path to {END}", node=name))

    where = graph.path + "." if graph.path else ""
    for key, names in (("interrupt_before", graph.interrupt_before), ("interrupt_after", graph.interrupt_after)):
        for index, node_id in enumerate(names):
            if node_id not in nodes:
                name = prefix + node_id
                message = f"{where}{key}[{index}]: {_q(node_id)} is not a node of this graph"
                errors.append(GraphError("unknown_interrupt", message, node=name))

    for node_id, node in nodes.items():
        name = prefix + node_id
        if node.too_deep:
            message = f"{node.path}.subgraph: subgraphs nest deeper than {MAX_DEPTH} levels"
            errors.append(GraphError("too_deep", message, node=name))
        elif node.subgraph is not None:
            _validate(node.subgraph, name + SEPARATOR, name, errors)


def _first_nodes(graph: _Graph, prefix: str, errors: list[GraphError]) -> dict[str, _Node]:
    """Usable nodes of one level: reserved and empty ids are refused, the first of two
    equal ids wins (flattening follows the same rule)."""
    nodes: dict[str, _Node] = {}
    for node in graph.nodes:
        name = prefix + node.id
        if not node.id or node.id in (START, END):
            problem = "is empty" if not node.id else "is reserved for the entry and exit of a graph"
            errors.append(GraphError("reserved_id", f"{node.path}.id {_q(node.id)} {problem}", node=name))
        elif node.id in nodes:
            message = f"node {_q(name)} is defined twice ({nodes[node.id].path} and {node.path})"
            errors.append(GraphError("duplicate_node", message, node=name))
        else:
            nodes[node.id] = node
    return nodes


def _checked_edges(
    graph: _Graph, nodes: dict[str, _Node], prefix: str, errors: list[GraphError]
) -> dict[str, list[str]]:
    """Adjacency of one level built from the edges whose endpoints exist.

    A node has either plain edges (several of them are parallel branches) or exactly one
    conditional edge, as in Spring AI Alibaba's StateGraph: mixing them would leave no
    single place where the next step is decided."""
    successors: dict[str, dict[str, None]] = {START: {}, **{node_id: {} for node_id in nodes}}
    kinds: dict[str, str] = {}
    for edge in graph.edges:
        raw = edge.as_dict()
        usable = True
        if edge.source == END:
            errors.append(GraphError("invalid_edge", f"{edge.path}: {END} cannot have outgoing edges", edge=raw))
            usable = False
        elif edge.source != START and edge.source not in nodes:
            name = prefix + edge.source
            message = f"{edge.path}: source {_q(edge.source)} is not a node of this graph"
            errors.append(GraphError("unknown_node", message, node=name, edge=raw))
            usable = False
        known = []
        for target in edge.ends:
            if target == START:
                errors.append(GraphError("invalid_edge", f"{edge.path}: no edge may lead to {START}", edge=raw))
            elif target != END and target not in nodes:
                message = f"{edge.path}: target {_q(target)} is not a node of this graph"
                errors.append(GraphError("unknown_node", message, node=prefix + target, edge=raw))
            else:
                known.append(target)
        if not usable:
            continue
        kind = "plain" if edge.outcomes is None else "conditional"
        previous = kinds.get(edge.source)
        if previous == "conditional" or (previous == "plain" and kind == "conditional"):
            name = prefix + edge.source
            already = "a conditional edge" if previous == "conditional" else "plain edges"
            message = (
                f"{edge.path}: {_q(name)} already has {already}; a node has either plain"
                " edges (several are parallel branches) or one conditional edge"
            )
            errors.append(GraphError("conflicting_edges", message, node=name, edge=raw))
            continue
        kinds[edge.source] = kind
        successors[edge.source].update(dict.fromkeys(known))
    return {source: list(targets) for source, targets in successors.items()}


def _reach(starts: Iterable[str], step: Callable[[str], Iterable[str] | None]) -> set[str]:
    """Nodes reachable from ``starts`` (breadth-first, so cycles and self-loops are fine)."""
    seen = set(starts)
    queue = deque(seen)
    while queue:
        for neighbour in step(queue.popleft()) or ():
            if neighbour not in seen:
                seen.add(neighbour)
                queue.append(neighbour)
    return seen


# ----------------------------------------------------------------- step 2: flattening

# A real node is its flattened id; ("in", "B") and ("out", "B") stand for the entry and
# the exit of subgraph node B until contraction removes them.
_Key = Union[str, tuple[str, str]]


@dataclass
class _Route:
    """Where a node goes next: plain targets (several are parallel branches) or one
    conditional edge whose outcomes each lead to one or more nodes."""

    targets: list[_Key] = field(default_factory=list)
    condition: str | None = None
    outcomes: dict[str, list[_Key]] | None = None
    parallel: bool = False

    @property
    def conditional(self) -> bool:
        return self.outcomes is not None

    def successors(self) -> list[_Key]:
        if self.outcomes is None:
            return list(self.targets)
        return list(dict.fromkeys(t for targets in self.outcomes.values() for t in targets))

    def replaced(self, old: _Key, new: list[_Key]) -> _Route:
        """A copy with ``old`` replaced by ``new`` wherever it is a target."""

        def splice(targets: list[_Key]) -> list[_Key]:
            spliced: list[_Key] = []
            for target in targets:
                spliced.extend(new if target == old else [target])
            return list(dict.fromkeys(spliced))

        if self.outcomes is None:
            return _Route(splice(self.targets))
        outcomes = {outcome: splice(targets) for outcome, targets in self.outcomes.items()}
        return _Route(condition=self.condition, outcomes=outcomes, parallel=self.parallel)


def _substitute(route: _Route, placeholder: _Key, replacement: _Route) -> tuple[_Route, str | None]:
    """``route`` with ``placeholder`` replaced by where the placeholder leads.

    Plain into plain merges the target lists and plain into conditional maps each
    outcome; a lone plain edge into a conditional entry or exit becomes that conditional
    edge. Anything else would need two conditions on one edge and is refused."""
    if placeholder not in route.successors():
        return route, None
    if not replacement.conditional:
        return route.replaced(placeholder, replacement.targets), None
    if not route.conditional and route.targets == [placeholder]:
        return replacement.replaced(placeholder, []), None
    problem = (
        "mixes the conditional {side} of subgraph {subgraph} with other targets"
        if not route.conditional
        else "has a conditional edge into the conditional {side} of subgraph {subgraph};"
        " two conditions cannot be chained on one edge"
    )
    return route.replaced(placeholder, []), problem


class _Flattener:
    """Step 2: one adjacency list for the graph and all its subgraphs.

    Each subgraph node B is wired as two placeholders, ("in", B) for its entry and
    ("out", B) for its exit. Contracting them afterwards sends edges into B to the
    subgraph's entry nodes and the subgraph's exits to B's successors, at any depth."""

    def __init__(self, errors: list[GraphError]) -> None:
        self.errors = errors
        self.routes: dict[_Key, _Route] = {START: _Route(), END: _Route()}
        self.order: list[str] = []  # real nodes, children in place of their subgraph node
        self.placeholders: list[_Key] = []
        self.before: list[Any] = []  # keys until contract() maps them to flattened ids
        self.after: list[Any] = []

    def add(self, graph: _Graph, prefix: str, entry: _Key, exit: _Key) -> None:
        as_source: dict[str, _Key] = {START: entry}
        as_target: dict[str, _Key] = {END: exit}
        for node in graph.nodes:
            if not node.id or node.id in (START, END) or node.id in as_source:
                continue  # refused by step 1
            name = prefix + node.id
            if node.subgraph is not None:
                as_source[node.id], as_target[node.id] = ("out", name), ("in", name)
                self.placeholders += [("in", name), ("out", name)]
                self.add(node.subgraph, name + SEPARATOR, ("in", name), ("out", name))
                continue
            as_source[node.id] = as_target[node.id] = name
            if name in self.routes:  # e.g. a node "B-D" beside subgraph B's child D
                message = f"two nodes flatten to the same id {_q(name)}"
                self.errors.append(GraphError("duplicate_node", message, node=name))
            else:
                self.order.append(name)
                self.routes[name] = _Route()

        first_kind: dict[_Key, bool] = {}  # is the first edge of a source conditional?
        for edge in graph.edges:
            source = as_source.get(edge.source)
            conditional = edge.outcomes is not None
            if source is None:
                continue
            route = self.routes.setdefault(source, _Route())
            if first_kind.setdefault(source, conditional) != conditional or (conditional and route.conditional):
                continue  # step 1 reported conflicting_edges; the first edge wins, as there
            if edge.outcomes is None:
                target = as_target.get(edge.target or "")
                if target is not None:
                    route.targets.append(target)  # duplicates go in contract()
            else:
                route.condition, route.parallel = edge.condition, edge.parallel
                route.outcomes = {
                    outcome: [as_target[target]] for outcome, target in edge.outcomes.items() if target in as_target
                }

        self.before += [as_target[n] for n in graph.interrupt_before if n not in (START, END) and n in as_target]
        self.after += [as_source[n] for n in graph.interrupt_after if n not in (START, END) and n in as_source]

    def contract(self) -> None:
        """Remove the placeholders; afterwards every route key and target is a real node."""
        predecessors: dict[_Key, dict[_Key, None]] = {}
        for source, route in self.routes.items():
            route.targets = list(dict.fromkeys(route.targets))
            for target in route.successors():
                predecessors.setdefault(target, {})[source] = None
        self.before = self._interrupt_nodes(self.before, lambda key: self.routes.get(key, _Route()).successors())
        self.after = self._interrupt_nodes(self.after, lambda key: predecessors.get(key, {}))

        for placeholder in self.placeholders:
            # A loop made only of entries and exits (an empty subgraph feeding itself) leads nowhere.
            replacement = (self.routes.pop(placeholder, None) or _Route()).replaced(placeholder, [])
            for user in predecessors.pop(placeholder, {}):
                route = self.routes.get(user)
                if route is None:  # a placeholder contracted earlier
                    continue
                merged, problem = _substitute(route, placeholder, replacement)
                if problem:
                    side = "entry" if placeholder[0] == "in" else "exit"
                    name = _key_name(user)
                    message = f"{_q(name)} " + problem.format(side=side, subgraph=_q(placeholder[1]))
                    self.errors.append(GraphError("subgraph_edge_conflict", message, node=name))
                self.routes[user] = merged
                for target in merged.successors():
                    predecessors.setdefault(target, {})[user] = None

    @staticmethod
    def _interrupt_nodes(keys: list[_Key], step: Callable[[_Key], Iterable[_Key]]) -> list[str]:
        """Interrupts on subgraph B land on the real nodes met first when walking from its
        entry (before) forwards or from its exit (after) backwards."""
        names: list[str] = []
        for key in keys:
            if isinstance(key, str):
                names.append(key)
                continue
            seen, queue = {key}, deque([key])
            while queue:
                for neighbour in step(queue.popleft()):
                    if neighbour in seen:
                        continue
                    seen.add(neighbour)
                    if not isinstance(neighbour, str):
                        queue.append(neighbour)
                    elif neighbour not in (START, END):
                        names.append(neighbour)
        return list(dict.fromkeys(names))


def _key_name(key: _Key) -> str:
    return key if isinstance(key, str) else key[1]


# ------------------------------------------------------- step 3: parallel nodes


def _insert_parallel_nodes(
    keys: list[str], routes: dict[str, _Route], errors: list[GraphError]
) -> tuple[list[str], dict[str, _Route], list[ParallelNode]]:
    """Step 3: each fan-out becomes source → parallel node → the node where its branches
    join. Branch nodes keep their own edges: the parallel node runs them (seed 004)."""
    adjacency = {key: [t for t in route.successors() if isinstance(t, str)] for key, route in routes.items()}
    dominators = _PostDominators(adjacency)
    taken = set(keys)
    compiled_keys: list[str] = []
    compiled: dict[str, _Route] = {}
    inserted: list[ParallelNode] = []
    for source in keys:
        compiled_keys.append(source)
        route = routes[source]
        branches = _parallel_branches(route)
        if not branches:
            compiled[source] = route
            continue
        join = dominators.common([dominators.parent.get(branch) for branch in branches])
        problems = _check_branches(source, branches, join, routes, adjacency, dominators.parent)
        if problems or join is None:
            errors.extend(problems)
            compiled[source] = route  # left as it was, so the preview still shows it
            continue
        node_id = _unique(PARALLEL_PREFIX + source, taken)
        targets = None
        if route.outcomes is not None:
            targets = {outcome: [str(t) for t in ts] for outcome, ts in route.outcomes.items()}
        inserted.append(ParallelNode(node_id, source, branches, join, route.condition, targets))
        compiled[source] = _Route([node_id])
        compiled[node_id] = _Route([join])
        compiled_keys.append(node_id)
    return compiled_keys, compiled, inserted


def _parallel_branches(route: _Route) -> list[str]:
    """Branches run together: several plain targets, or a conditional edge marked
    parallel (or with an outcome leading to several nodes, e.g. a subgraph's entries)."""
    successors = [t for t in route.successors() if isinstance(t, str)]
    if len(successors) < 2:
        return []
    if route.outcomes is None or route.parallel or any(len(ts) > 1 for ts in route.outcomes.values()):
        return successors
    return []


class _PostDominators:
    """Immediate post-dominators: ``parent[n]`` is the nearest node that every path from
    ``n`` to __end__ passes through. Computed once for the whole graph with Cooper, Harvey
    and Kennedy's iterative algorithm on the reversed graph, so cycles are fine and each
    fan-out's join is a walk up a tree rather than a search of the graph."""

    def __init__(self, adjacency: dict[str, list[str]]) -> None:
        predecessors: dict[str, list[str]] = {}
        for source, targets in adjacency.items():
            for target in targets:
                predecessors.setdefault(target, []).append(source)
        # Post-order of the reversed graph from __end__, iteratively: graphs can be deep.
        order: list[str] = []
        visited = {END}
        stack = [(END, iter(predecessors.get(END, ())))]
        while stack:
            node, pending = stack[-1]
            for previous in pending:
                if previous not in visited:
                    visited.add(previous)
                    stack.append((previous, iter(predecessors.get(previous, ()))))
                    break
            else:
                stack.pop()
                order.append(node)
        self.rank = {node: index for index, node in enumerate(order)}  # __end__ ranks highest
        self.parent: dict[str, str] = {END: END}
        changed = True
        while changed:
            changed = False
            for node in reversed(order):
                if node == END:
                    continue
                nearest = self.common([t for t in adjacency.get(node, ()) if t in self.parent])
                if nearest is not None and self.parent.get(node) != nearest:
                    self.parent[node] = nearest
                    changed = True

    def common(self, nodes: list[str | None]) -> str | None:
        """The nearest node post-dominating all of ``nodes``; None if one cannot reach __end__."""
        if not nodes or any(node is None or node not in self.parent for node in nodes):
            return None
        found = nodes[0]
        for other in nodes[1:]:
            a, b = found, other
            while a != b:
                while self.rank[a] < self.rank[b]:
                    a = self.parent[a]
                while self.rank[b] < self.rank[a]:
                    b = self.parent[b]
            found = a
        return found


def _check_branches(
    source: str,
    branches: list[str],
    join: str | None,
    routes: dict[str, _Route],
    adjacency: dict[str, list[str]],
    post_dominator: dict[str, str],
) -> list[GraphError]:
    """A parallel block is well formed when every branch reaches ``join``, no two
    branches share a node before it, none goes around it (back to the source or on to
    __end__) and none holds a conditional edge. Spring AI Alibaba asks for one node per
    branch with one plain edge to the join; chains and sub-DAGs are accepted here."""

    def no_convergence(detail: str) -> list[GraphError]:
        message = f"the parallel branches of {_q(source)} ({', '.join(branches)}) {detail}"
        return [GraphError("parallel_no_convergence", message, node=source)]

    if join is None or join == source:
        return no_convergence("never meet at one node")
    if join in branches:
        return no_convergence(f"meet at {_q(join)}, which is itself one of them")
    if join == END and any(adjacency.get(branch) != [END] for branch in branches):
        # Every valid graph reaches __end__, so meeting there only counts when it is the plan.
        return no_convergence(
            f"only meet at {END}; that counts when every branch goes straight to {END},"
            " otherwise add a node where they join"
        )

    problems: list[GraphError] = []
    owner = {branch: branch for branch in branches}
    for branch in branches:
        queue = deque([branch])
        while queue:
            node = queue.popleft()
            if routes[node].conditional:
                message = (
                    f"{_q(node)} has a conditional edge inside a parallel branch of {_q(source)};"
                    " the branches of a parallel node must be plain"
                )
                problems.append(GraphError("parallel_conditional_branch", message, node=node))
            for target in adjacency.get(node, ()):
                if target == join:
                    continue
                if target == source:
                    return no_convergence(f"do not all reach {_q(join)}: {_q(branch)} goes back to {_q(source)}")
                if target not in post_dominator or target == END:
                    return no_convergence(f"do not all reach {_q(join)}: {_q(branch)} goes on to {_q(target)}")
                seen = owner.get(target)
                if seen is None:
                    owner[target] = branch
                    queue.append(target)
                elif seen != branch:
                    return no_convergence(f"{_q(seen)} and {_q(branch)} meet at {_q(target)} before {_q(join)}")
    return problems


def _unique(wanted: str, taken: set[str]) -> str:
    name, suffix = wanted, 2
    while name in taken:
        name, suffix = f"{wanted}_{suffix}", suffix + 1
    taken.add(name)
    return name


# ------------------------------------------------------------- step 4: output


def _adjacency(keys: list[str], routes: dict[str, _Route]) -> dict[str, list[str]]:
    return {key: [t for t in routes[key].successors() if isinstance(t, str)] for key in keys}


_MERMAID_SAFE = frozenset(" _-.,:/@$+=")
_INTERRUPT_CLASS = {(True, False): "interruptBefore", (False, True): "interruptAfter", (True, True): "interruptBoth"}
_MERMAID_CLASSES = {
    "parallel": "fill:#fff3cd,stroke:#b7791f,stroke-width:2px",
    "interruptBefore": "stroke:#c0392b,stroke-width:3px",
    "interruptAfter": "stroke:#c0392b,stroke-width:3px,stroke-dasharray: 6 3",
    "interruptBoth": "stroke:#c0392b,stroke-width:4px,stroke-dasharray: 2 2",
}


def _mermaid_text(text: str) -> str:
    """Text safe inside a quoted Mermaid label: letters, digits and a few harmless marks
    stay, everything else (quotes, brackets, <, >, &, #, ;, control characters…) becomes
    a numeric entity code (``#34;``) that Mermaid renders as the character."""
    return "".join(ch if ch.isalnum() or ch in _MERMAID_SAFE else f"#{ord(ch)};" for ch in text)


def _mermaid(
    keys: list[str],
    routes: dict[str, _Route],
    parallel: dict[str, ParallelNode],
    before: set[str],
    after: set[str],
) -> str:
    """``flowchart TD`` source: generated ids n0, n1… with the real ids as escaped labels,
    conditional edges dashed with their outcome, parallel nodes as hexagons with thick
    arrows to the branches they run, interrupt nodes in a class of their own."""
    ids = {key: f"n{index}" for index, key in enumerate(keys)}
    lines = ["flowchart TD"]
    classes: dict[str, list[str]] = {}
    for key in keys:
        label = _mermaid_text(key)
        if key in (START, END):
            shape = f'(["{label}"])'
        elif key in parallel:
            shape = '{{"' + label + '"}}'
            classes.setdefault("parallel", []).append(ids[key])
        else:
            shape = f'["{label}"]'
        lines.append(f"    {ids[key]}{shape}")
        kind = _INTERRUPT_CLASS.get((key in before, key in after))
        if kind:
            classes.setdefault(kind, []).append(ids[key])

    def arrow(source: str, link: str, target: str, outcome: str | None = None) -> None:
        if target in ids:
            text = f'|"{_mermaid_text(outcome)}"|' if outcome is not None else ""
            lines.append(f"    {ids[source]} {link}{text} {ids[target]}")

    for key in keys:
        node = parallel.get(key)
        if node is not None:
            if node.targets is None:
                for branch in node.branches:
                    arrow(key, "==>", branch)
            else:
                for outcome, targets in node.targets.items():
                    for target in targets:
                        arrow(key, "==>", target, outcome)
            arrow(key, "-->", node.join)
            continue
        route = routes.get(key) or _Route()
        if route.outcomes is None:
            for target in route.targets:
                arrow(key, "-->", str(target))
        else:
            for outcome, targets in route.outcomes.items():
                for target in targets:
                    arrow(key, "-.->", str(target), outcome)

    for name, members in classes.items():
        lines.append(f"    classDef {name} {_MERMAID_CLASSES[name]}")
        lines.append(f"    class {','.join(members)} {name}")
    return "\n".join(lines) + "\n"


def _q(name: str | None) -> str:
    """A node id quoted for a message, with anything odd in it escaped."""
    return json.dumps(name, ensure_ascii=False)
