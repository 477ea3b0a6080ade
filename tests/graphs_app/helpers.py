from __future__ import annotations

from typing import Any

from graphs_app import services
from memoryadmin.demo.graphs import APPROVAL_INTERRUPT, BROKEN, LANGGRAPH_EXPORT, REACT_AGENT, RESEARCH_FANOUT, SEED_SUBGRAPH

__all__ = [
    "APPROVAL_INTERRUPT",
    "BROKEN",
    "HOSTILE",
    "LANGGRAPH_EXPORT",
    "REACT_AGENT",
    "RESEARCH_FANOUT",
    "SEED_SUBGRAPH",
    "chain",
    "save",
]

# Ids that would break out of an attribute, an element or a Mermaid label if not escaped.
HOSTILE_ID = '"><script>alert(1)</script><img src=x onerror=alert(2)>'
HOSTILE: dict[str, Any] = {
    "nodes": [{"id": HOSTILE_ID}, {"id": "end"}, {"id": "a]-->b"}],
    "edges": [
        {"source": "__start__", "target": HOSTILE_ID},
        {"source": HOSTILE_ID, "target": "end"},
        {"source": "end", "target": "a]-->b"},
        {"source": "a]-->b", "target": "</textarea><b>x</b>"},
    ],
}


def chain(count: int) -> dict[str, Any]:
    """__start__ -> n0 -> n1 -> ... -> __end__."""
    ids = [f"n{i}" for i in range(count)]
    hops = ["__start__", *ids, "__end__"]
    return {"nodes": [{"id": i} for i in ids], "edges": [{"source": a, "target": b} for a, b in zip(hops, hops[1:])]}


def save(user, name: str, spec: dict[str, Any] | None = None):
    return services.graph_create(actor=user, name=name, spec=spec if spec is not None else REACT_AGENT).graph
