"""What the graph compiler answers and the limits it keeps: its constants, errors and result types."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

START = "__start__"
END = "__end__"
# Flattened child ids are parent-child: node D of subgraph B is "B-D"
# (docs/graphs.md, "Step 2: flatten subgraphs").
SEPARATOR = "-"
PARALLEL_PREFIX = "__parallel__"

# Limits keep the answer small; beyond them the input is junk. Every step is linear in
# nodes plus edges (or n log n), so these bound the work too. They are the defaults:
# graph_compile takes others, which the server reads from its settings.
MAX_NODES = 10_000  # all levels together
MAX_EDGES = 20_000  # a conditional edge counts once per outcome
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
        """The answer of ``POST /graphs/compile`` (docs/graphs.md, "HTTP API")."""
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


def quoted(name: str | None) -> str:
    """A node id quoted for a message, with anything odd in it escaped."""
    return json.dumps(name, ensure_ascii=False)
