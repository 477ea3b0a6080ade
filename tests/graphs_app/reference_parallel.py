"""Step 3 of the compiler written the plain way, as the reference its tests compare with:
one breadth-first search per fan-out, from each branch in turn, up to the join. Simple
to check against docs/graphs.md ("Step 3: insert parallel nodes"), and quadratic at
worst, which graphs_app/compiler/parallel.py is not."""

from __future__ import annotations

from collections import deque

from graphs_app.compiler.flatten import Route
from graphs_app.compiler.model import END, PARALLEL_PREFIX, GraphError, ParallelNode, quoted


def parallel_nodes_insert(
    keys: list[str], routes: dict[str, Route], errors: list[GraphError]
) -> tuple[list[str], dict[str, Route], list[ParallelNode]]:
    """Step 3: each fan-out becomes source → parallel node → the node where its branches
    join. Branch nodes keep their own edges: the parallel node runs them."""
    adjacency = {key: [t for t in route.successors() if isinstance(t, str)] for key, route in routes.items()}
    dominators = _PostDominators(adjacency)
    taken = set(keys)
    compiled_keys: list[str] = []
    compiled: dict[str, Route] = {}
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
        compiled[source] = Route([node_id])
        compiled[node_id] = Route([join])
        compiled_keys.append(node_id)
    return compiled_keys, compiled, inserted


def _parallel_branches(route: Route) -> list[str]:
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
    routes: dict[str, Route],
    adjacency: dict[str, list[str]],
    post_dominator: dict[str, str],
) -> list[GraphError]:
    """A parallel block is well formed when every branch reaches ``join``, no two
    branches share a node before it, none goes around it (back to the source or on to
    __end__) and none holds a conditional edge. Spring AI Alibaba asks for one node per
    branch with one plain edge to the join; chains and sub-DAGs are accepted here."""

    def no_convergence(detail: str) -> list[GraphError]:
        message = f"the parallel branches of {quoted(source)} ({', '.join(branches)}) {detail}"
        return [GraphError("parallel_no_convergence", message, node=source)]

    if join is None or join == source:
        return no_convergence("never meet at one node")
    if join in branches:
        return no_convergence(f"meet at {quoted(join)}, which is itself one of them")
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
                    f"{quoted(node)} has a conditional edge inside a parallel branch of {quoted(source)};"
                    " the branches of a parallel node must be plain"
                )
                problems.append(GraphError("parallel_conditional_branch", message, node=node))
            for target in adjacency.get(node, ()):
                if target == join:
                    continue
                if target == source:
                    return no_convergence(f"do not all reach {quoted(join)}: {quoted(branch)} goes back to {quoted(source)}")
                if target not in post_dominator or target == END:
                    return no_convergence(f"do not all reach {quoted(join)}: {quoted(branch)} goes on to {quoted(target)}")
                seen = owner.get(target)
                if seen is None:
                    owner[target] = branch
                    queue.append(target)
                elif seen != branch:
                    return no_convergence(f"{quoted(seen)} and {quoted(branch)} meet at {quoted(target)} before {quoted(join)}")
    return problems


def _unique(wanted: str, taken: set[str]) -> str:
    name, suffix = wanted, 2
    while name in taken:
        name, suffix = f"{wanted}_{suffix}", suffix + 1
    taken.add(name)
    return name


