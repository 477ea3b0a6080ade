"""Reads of graph definitions. Each takes the acting user; memoryadmin.policy decides.

Graphs are owned like threads: members see and edit their own; operators read every
graph and write none; admins read every graph and may delete any, but do not edit
another user's graph.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db.models import QuerySet

from memoryadmin import policy
from memoryadmin.errors import NotFound
from sessions_app.checkpoints.selectors import checkpoint_steps

from .compiler import END, SEPARATOR, START, CompileResult, SpecError, graph_compile
from .diagrams import Diagram, diagram_for_page, mermaid_marked
from .models import GraphDefinition
from .specs import spec_limits

# The thread-on-graph view reads at most this many checkpoints (the newest ones).
PATH_LIMIT = 500
# Listed columns: the spec can be a megabyte, lists never load it.
LIST_FIELDS = ("id", "name", "owner", "owner__username", "valid", "node_count", "created_at", "updated_at")


def _graph_get(graph_id: int, *, lock: bool = False) -> GraphDefinition:
    qs = GraphDefinition.objects.select_related("owner")
    if lock:
        qs = qs.select_for_update(of=("self",))
    graph = qs.filter(pk=graph_id).first()
    if graph is None:
        raise NotFound(f"Graph {graph_id} does not exist.")
    return graph


def graph_may_edit(*, actor, graph: GraphDefinition) -> bool:
    """Only the owner edits (rename, new spec), and an operator never writes (memoryadmin.policy)."""
    return policy.may_write(actor, owner_id=graph.owner_id, action="graph.write")


def graph_may_delete(*, actor, graph: GraphDefinition) -> bool:
    """The owner (unless an operator) or an admin (memoryadmin.policy)."""
    return policy.may_write(actor, owner_id=graph.owner_id, action="graph.delete")


def graph_may_create(*, actor) -> bool:
    """Anyone who writes at all: not an operator, not even a graph of their own."""
    return policy.may_write(actor, owner_id=None, action="graph.create")


def graph_ensure_may_create(*, actor) -> None:
    """Operators write nothing, not even a graph of their own."""
    policy.ensure_may_write(actor, owner_id=None, target="graph:new", action="graph.create")


def graph_get_for_read(*, actor, graph_id: int) -> GraphDefinition:
    """The graph if the actor owns it or reads everything (operator, admin); else 403.

    An operator's or admin's read of another user's graph is an audit event (one per window).
    """
    graph = _graph_get(graph_id)
    target = f"graph:{graph.pk}"
    policy.ensure_may_read(actor, owner_id=graph.owner_id, target=target, action="graph.read")
    policy.record_read(actor, owner=graph.owner, target=target, action="graph.read")
    return graph


def graph_get_for_edit(*, actor, graph_id: int, lock: bool = False) -> GraphDefinition:
    graph = _graph_get(graph_id, lock=lock)
    policy.ensure_may_write(actor, owner_id=graph.owner_id, target=f"graph:{graph.pk}", action="graph.write")
    return graph


def graph_get_for_delete(*, actor, graph_id: int, lock: bool = False) -> GraphDefinition:
    graph = _graph_get(graph_id, lock=lock)
    policy.ensure_may_write(actor, owner_id=graph.owner_id, target=f"graph:{graph.pk}", action="graph.delete")
    return graph


def graph_list(*, actor, q: str = "", owner: str = "") -> QuerySet[GraphDefinition]:
    """Graphs the actor may see, most recently changed first, without their specs."""
    qs = GraphDefinition.objects.visible_to(actor).select_related("owner").only(*LIST_FIELDS)
    q = q.strip()
    if q:
        qs = qs.filter(name__icontains=q)
    qs = policy.filter_by_owner(qs, actor, owner)
    return qs.order_by("-updated_at", "-id")


# --------------------------------------------------------------- a thread on its graph


@dataclass(frozen=True)
class PathStep:
    node: str
    known: bool  # the node is in the graph (else the checkpoint names a node it lacks)


@dataclass(frozen=True)
class ThreadGraph:
    graph: GraphDefinition
    result: CompileResult | None  # None when the stored spec no longer compiles at all
    path: list[str]  # nodes visited, oldest first (flattened ids)
    current: str | None  # the node the thread goes to next, else the last one it ran
    steps: list[PathStep] = field(default_factory=list)
    truncated: bool = False  # more than PATH_LIMIT checkpoints: the oldest are not shown
    matched_by: str = ""  # "metadata.graph" or "agent_code"
    mermaid: str = ""

    @property
    def diagram(self) -> Diagram:
        return diagram_for_page(self.mermaid)

    def as_dict(self) -> dict[str, Any]:
        return {"graph": self.graph.pk, "name": self.graph.name, "path": list(self.path), "current": self.current}


def thread_graph_names(thread) -> list[tuple[str, str]]:
    """The names a thread gives its graph, preferred first: metadata.graph, then agent_code."""
    names: list[tuple[str, str]] = []
    metadata = thread.metadata if isinstance(thread.metadata, dict) else {}
    named = metadata.get("graph")
    if isinstance(named, str) and named.strip():
        names.append((named.strip(), "metadata.graph"))
    if thread.agent_code and all(thread.agent_code != n for n, _ in names):
        names.append((thread.agent_code, "agent_code"))
    return names


def _namespace_prefix(checkpoint_ns: str) -> str:
    """LangGraph names a subgraph's checkpoints ``parent:task`` (nested: ``a:t1|b:t2``);
    the flattened id of node ``D`` there is ``parent-D`` (``a-b-D``)."""
    if not checkpoint_ns:
        return ""
    names = [part.split(":", 1)[0] for part in checkpoint_ns.split("|")]
    return "".join(name + SEPARATOR for name in names if name)


def _containers(spec: Any) -> set[str]:
    """Flattened ids of the subgraph nodes of a spec: they vanish when it is flattened."""
    found: set[str] = set()
    stack = [(spec, "")]
    while stack:
        graph, prefix = stack.pop()
        nodes = graph.get("nodes") if isinstance(graph, dict) else None
        for node in nodes if isinstance(nodes, list) else []:
            if isinstance(node, dict) and isinstance(node.get("id"), str) and isinstance(node.get("subgraph"), dict):
                found.add(prefix + node["id"])
                stack.append((node["subgraph"], prefix + node["id"] + SEPARATOR))
    return found


def _split_nodes(value: str, prefix: str, nodes: set[str], containers: set[str]) -> list[str]:
    """A checkpoint's node field as flattened ids: one node, or several that ran in one
    step, comma-joined (as the checkpoint service records them).

    Dropped: LangGraph's ``__input__`` (not a node), a subgraph's own ``__start__`` and
    ``__end__``, and a subgraph node itself (its children stand for it once flattened).
    """
    if not value:
        return []
    parts = [value] if prefix + value in nodes else value.split(",")
    steps = []
    for part in parts:
        if not part or part == "__input__" or (prefix and part in (START, END)):
            continue
        if prefix + part not in containers:
            steps.append(prefix + part)
    return steps


def graph_for_thread(*, actor, thread) -> ThreadGraph | None:
    """The graph a thread names, with the path its checkpoints took; None when it names none.

    A thread names its graph in ``metadata["graph"]``, or by an agent code equal to a
    graph's name; either way the graph must belong to the thread's owner. Two queries:
    the graph, then the node ids of the thread's newest PATH_LIMIT checkpoints (history
    order is insertion order, as the checkpoint store keeps it).
    """
    policy.ensure_may_read(actor, owner_id=thread.owner_id, target=f"thread:{thread.thread_id}", action="thread.read")
    names = thread_graph_names(thread)
    if not names:
        return None
    found = {
        g.name: g
        for g in GraphDefinition.objects.select_related("owner").filter(
            owner_id=thread.owner_id, name__in=[n for n, _ in names]
        )
    }
    chosen = next(((found[n], how) for n, how in names if n in found), None)
    if chosen is None:
        return None
    graph, matched_by = chosen
    try:
        result: CompileResult | None = graph_compile(graph.spec, **spec_limits())
    except SpecError:  # stored before the limits were lowered
        result = None
    nodes = set(result.flattened) if result is not None else set()
    containers = _containers(graph.spec)

    rows = checkpoint_steps(thread=thread, limit=PATH_LIMIT + 1)
    truncated = len(rows) > PATH_LIMIT
    rows = rows[:PATH_LIMIT]
    rows.reverse()
    path: list[str] = []
    for ns, node_id, _ in rows:
        path.extend(_split_nodes(node_id, _namespace_prefix(ns), nodes, containers))
    current = None
    if rows:
        ns, node_id, next_node_id = rows[-1]
        prefix = _namespace_prefix(ns)
        upcoming = _split_nodes(next_node_id, prefix, nodes, containers)
        if _split_nodes(node_id, prefix, nodes, containers):
            # __start__ is due only on an input checkpoint; after a step, reading it as due
            # (LangGraph bumps the emptied __start__ channel) would send the run back to the entry.
            upcoming = [n for n in upcoming if n != START]
        current = upcoming[0] if upcoming else (path[-1] if path else None)
    steps = [PathStep(node, node in nodes) for node in path]

    mermaid = ""
    if result is not None:
        visited = [n for n in path if n in nodes and n != current]
        marks = {"visited": visited}
        if current in nodes:
            marks["current"] = [current]
        drawn = path if truncated or not path or path[0] == START else [START, *path]
        if current and current != (drawn[-1] if drawn else None):
            drawn = [*drawn, current]
        mermaid = mermaid_marked(result.mermaid_source, marks, path=drawn)
    return ThreadGraph(
        graph=graph,
        result=result,
        path=path,
        current=current,
        steps=steps,
        truncated=truncated,
        matched_by=matched_by,
        mermaid=mermaid,
    )

