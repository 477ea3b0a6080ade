"""Graph compiler: validate a graph definition, flatten its subgraphs into one adjacency
list, replace parallel fan-out with inserted parallel nodes, and draw both versions in
Mermaid (the schema and the steps are in docs/graphs.md).

Pure Python, standard library only: the API, the dashboard preview and the tests call
``graph_compile`` without a database. Input that is not a graph at all raises
``SpecError`` (the API answers 400); a well-formed but wrong graph compiles to
``valid=False`` with every error naming its node or edge.

One module per step: ``parsing`` (step 0, and LangGraph's JSON), ``validation`` (1),
``flatten`` (2), ``parallel`` (3), ``mermaid`` (4); ``model`` holds the constants and
the result types. This module runs them in order.
"""

from __future__ import annotations

from typing import Any

from .flatten import Flattener, Route
from .mermaid import adjacency, mermaid_flowchart
from .model import (
    END,
    MAX_DEPTH,
    MAX_EDGES,
    MAX_ID_LENGTH,
    MAX_NODES,
    PARALLEL_PREFIX,
    SEPARATOR,
    START,
    CompileResult,
    GraphError,
    ParallelNode,
    SpecError,
)
from .parallel import parallel_nodes_insert
from .parsing import Parser, from_langgraph_json, looks_like_langgraph
from .validation import graph_validate

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


def graph_compile(spec: Any, *, max_nodes: int = MAX_NODES, max_edges: int = MAX_EDGES) -> CompileResult:
    """Compile a graph definition: validate, flatten subgraphs, insert parallel nodes, draw.

    Raises SpecError only, and only for input that is not a graph (more than ``max_nodes``
    nodes or ``max_edges`` edges included); everything else is reported in the result.
    LangGraph's ``get_graph().to_json()`` shape is converted first.
    """
    if looks_like_langgraph(spec):
        spec = from_langgraph_json(spec, max_nodes=max_nodes, max_edges=max_edges)
    graph = Parser(max_nodes=max_nodes, max_edges=max_edges).graph(spec, path="", depth=0)

    errors: list[GraphError] = []
    graph_validate(graph, prefix="", owner=None, errors=errors)

    flattener = Flattener(errors)
    flattener.add(graph, prefix="", entry=START, exit=END)
    flattener.contract()
    keys = [START, *flattener.order, END]
    routes = {key: flattener.routes.get(key) or Route() for key in keys}

    compiled_keys, compiled_routes, parallel = parallel_nodes_insert(keys, routes, errors)
    position = {key: index for index, key in enumerate(keys)}
    interrupt_before = sorted(flattener.before, key=position.__getitem__)
    interrupt_after = sorted(flattener.after, key=position.__getitem__)
    before, after = set(interrupt_before), set(interrupt_after)
    by_id = {node.id: node for node in parallel}
    groups = dict(flattener.groups)
    groups.update({node.id: groups[node.source] for node in parallel if node.source in groups})
    return CompileResult(
        valid=not errors,
        errors=errors,
        flattened=adjacency(keys, routes),
        compiled=adjacency(compiled_keys, compiled_routes),
        inserted_nodes=[node.id for node in parallel],
        parallel_nodes=parallel,
        interrupt_before=interrupt_before,
        interrupt_after=interrupt_after,
        mermaid_source=mermaid_flowchart(keys, routes, {}, before, after, groups),
        mermaid_compiled=mermaid_flowchart(compiled_keys, compiled_routes, by_id, before, after, groups),
    )

