"""Step 1 of the compiler: what makes a parsed graph valid, level by level
(docs/graphs.md, "Step 1: validate")."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable

from .model import END, MAX_DEPTH, SEPARATOR, START, GraphError, quoted
from .parsing import Graph, Node


def graph_validate(graph: Graph, prefix: str, owner: str | None, errors: list[GraphError]) -> None:
    """Step 1 for one level, then each subgraph against its own __start__ and __end__,
    with node names in their flattened form (``B-D``)."""
    nodes = _first_nodes(graph, prefix, errors)
    successors = _checked_edges(graph, nodes, prefix, errors)

    if not any(edge.source == START for edge in graph.edges):
        scope = f"subgraph {quoted(owner)}" if owner else "the graph"
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
            errors.append(GraphError("unreachable", f"node {quoted(name)} cannot be reached from {START}", node=name))
        elif node_id not in finishing:  # an unreachable node is reported once, above
            errors.append(GraphError("no_path_to_end", f"node {quoted(name)} has no path to {END}", node=name))

    where = graph.path + "." if graph.path else ""
    for key, names in (("interrupt_before", graph.interrupt_before), ("interrupt_after", graph.interrupt_after)):
        for index, node_id in enumerate(names):
            if node_id not in nodes:
                name = prefix + node_id
                message = f"{where}{key}[{index}]: {quoted(node_id)} is not a node of this graph"
                errors.append(GraphError("unknown_interrupt", message, node=name))

    for node_id, node in nodes.items():
        name = prefix + node_id
        if node.too_deep:
            message = f"{node.path}.subgraph: subgraphs nest deeper than {MAX_DEPTH} levels"
            errors.append(GraphError("too_deep", message, node=name))
        elif node.subgraph is not None:
            graph_validate(node.subgraph, name + SEPARATOR, name, errors)


def _first_nodes(graph: Graph, prefix: str, errors: list[GraphError]) -> dict[str, Node]:
    """Usable nodes of one level: reserved and empty ids are refused, the first of two
    equal ids wins (flattening follows the same rule)."""
    nodes: dict[str, Node] = {}
    for node in graph.nodes:
        name = prefix + node.id
        if not node.id or node.id in (START, END):
            problem = "is empty" if not node.id else "is reserved for the entry and exit of a graph"
            errors.append(GraphError("reserved_id", f"{node.path}.id {quoted(node.id)} {problem}", node=name))
        elif node.id in nodes:
            message = f"node {quoted(name)} is defined twice ({nodes[node.id].path} and {node.path})"
            errors.append(GraphError("duplicate_node", message, node=name))
        else:
            nodes[node.id] = node
    return nodes


def _checked_edges(
    graph: Graph, nodes: dict[str, Node], prefix: str, errors: list[GraphError]
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
            message = f"{edge.path}: source {quoted(edge.source)} is not a node of this graph"
            errors.append(GraphError("unknown_node", message, node=name, edge=raw))
            usable = False
        known = []
        for target in edge.ends:
            if target == START:
                errors.append(GraphError("invalid_edge", f"{edge.path}: no edge may lead to {START}", edge=raw))
            elif target != END and target not in nodes:
                message = f"{edge.path}: target {quoted(target)} is not a node of this graph"
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
                f"{edge.path}: {quoted(name)} already has {already}; a node has either plain"
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


