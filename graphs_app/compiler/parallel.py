"""Step 3 of the compiler: each fan-out replaced by an inserted parallel node that runs the
branches and goes on to the node where they join (docs/graphs.md, "Step 3: insert
parallel nodes").

Linear in nodes plus edges for the shapes graphs take (chains, nested and stacked
parallel blocks, dense graphs whose fan-outs never converge): the join of every fan-out
comes from one post-dominator tree, a fan-out whose branches fall under the same child
of the join is refused without searching the graph, a search that runs long looks for
cycles through the source or the branches (found once per join), and a nested block
already found well formed is stepped over as one node by the blocks around it.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import deque

from .flatten import Route
from .model import END, PARALLEL_PREFIX, GraphError, ParallelNode, quoted


def parallel_nodes_insert(
    keys: list[str], routes: dict[str, Route], errors: list[GraphError]
) -> tuple[list[str], dict[str, Route], list[ParallelNode]]:
    """Step 3: each fan-out becomes source → parallel node → the node where its branches
    join. Branch nodes keep their own edges: the parallel node runs them."""
    adjacency = {key: [t for t in route.successors() if isinstance(t, str)] for key, route in routes.items()}
    tree = _PostDominators(adjacency)
    fan_outs = {}
    for source in keys:
        branches = _parallel_branches(routes[source])
        if branches:
            fan_outs[source] = (branches, tree.common([tree.parent.get(branch) for branch in branches]))
    checked = _BlockChecker(keys, routes, adjacency, tree).check(fan_outs) if fan_outs else {}

    taken = set(keys)
    compiled_keys: list[str] = []
    compiled: dict[str, Route] = {}
    inserted: list[ParallelNode] = []
    for source in keys:
        compiled_keys.append(source)
        route = routes[source]
        if source not in fan_outs:
            compiled[source] = route
            continue
        branches, join = fan_outs[source]
        problems = checked[source]
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


def _post_order(roots: list[str], adjacency: dict[str, list[str]]) -> list[str]:
    """Depth-first post-order from ``roots``, iteratively: graphs can be 10 000 nodes deep."""
    order: list[str] = []
    visited = set(roots)
    for root in roots:
        stack = [(root, iter(adjacency.get(root, ())))]
        while stack:
            node, pending = stack[-1]
            for following in pending:
                if following not in visited:
                    visited.add(following)
                    stack.append((following, iter(adjacency.get(following, ()))))
                    break
            else:
                stack.pop()
                order.append(node)
    return order


class _PostDominators:
    """Immediate post-dominators: ``parent[n]`` is the nearest node that every path from
    ``n`` to __end__ passes through. Computed once for the whole graph with Cooper, Harvey
    and Kennedy's iterative algorithm on the reversed graph, so cycles are fine and each
    fan-out's join is a walk up a tree rather than a search of the graph.

    The tree is also numbered (``first``: entry times of a depth-first walk from
    __end__), so "which child of ``b`` holds ``a``" is a binary search, not a walk."""

    def __init__(self, adjacency: dict[str, list[str]]) -> None:
        predecessors: dict[str, list[str]] = {}
        for source, targets in adjacency.items():
            for target in targets:
                predecessors.setdefault(target, []).append(source)
        order = _post_order([END], predecessors)
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
        self.order = order
        self.children: dict[str, list[str]] = {}
        self.first: dict[str, int] = {}
        self.child_firsts: dict[str, list[int]] = {}

    def _number(self) -> None:
        """Children and depth-first times of the tree, once, the first time they are asked for."""
        for node in self.order:  # post-order, so every child list comes out in one fixed order
            if node != END:
                self.children.setdefault(self.parent[node], []).append(node)
        clock = 0
        stack = [(END, iter(self.children.get(END, ())))]
        self.first[END] = clock
        while stack:
            node, pending = stack[-1]
            child = next(pending, None)
            if child is None:
                stack.pop()
            else:
                clock += 1
                self.first[child] = clock
                stack.append((child, iter(self.children.get(child, ()))))
        self.child_firsts = {node: [self.first[c] for c in kids] for node, kids in self.children.items()}

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

    def child_towards(self, ancestor: str, node: str) -> str:
        """The child of ``ancestor`` whose subtree holds ``node`` (a strict descendant)."""
        if not self.first:
            self._number()
        index = bisect_right(self.child_firsts[ancestor], self.first[node]) - 1
        return self.children[ancestor][index]


# A block's search that has looked at this many nodes without an answer first looks for
# cycles through its source or its branches, which answer most big fan-outs at once.
_SEARCH_BEFORE_CYCLES = 16


class _BlockChecker:
    """Which fan-outs form a well-formed parallel block, and the errors of those that do not.

    A block is well formed when every branch reaches the join, no two branches share a
    node before it, none goes around it (back to the source or on to __end__) and none
    holds a conditional edge. Spring AI Alibaba asks for one node per branch with one
    plain edge to the join; chains and sub-DAGs are accepted here.

    Three facts keep this linear. Every node a branch reaches before the join lies under
    the join in the post-dominator tree, and so does the chain of post-dominators from
    it up to the join; two branches under the same child of the join therefore both
    reach that child, and meet there. A cycle that avoids the join and passes through the
    source, or through two branches, is a way back to the source or from one branch into
    another; the strongly connected components of the graph without the join answer
    that for every fan-out meeting there. And a well-formed block with no conditional edge
    that nothing enters except through its source (``closed``) looks, from any block
    around it, like one node whose only successor is its join: the search of the outer
    block steps over it instead of walking it again.
    """

    def __init__(
        self, keys: list[str], routes: dict[str, Route], adjacency: dict[str, list[str]], tree: _PostDominators
    ) -> None:
        self.keys, self.routes, self.adjacency, self.tree = keys, routes, adjacency, tree
        self.predecessors: dict[str, list[str]] = {}
        for source, targets in adjacency.items():
            for target in targets:
                self.predecessors.setdefault(target, []).append(source)
        self.closed_join: dict[str, str] = {}  # closed well-formed block's source -> its join
        self.outer: dict[str, str] = {}  # node -> source of a closed block holding it (union-find)
        self.sharing: dict[str, list[str]] = {}  # join -> the sources of the fan-outs meeting there
        self.component: dict[str, dict[str, int]] = {}  # join -> components without it, when needed

    def check(self, fan_outs: dict[str, tuple[list[str], str | None]]) -> dict[str, list[GraphError]]:
        # Inner blocks first: a block is reached from the blocks around it, so the post-order
        # from __start__ checks it before them (in a loop the order is only a preference).
        order = _post_order([self.keys[0]], self.adjacency)
        position = {node: index for index, node in enumerate(order)}
        pending = sorted(fan_outs, key=lambda s: position.get(s, len(order)))
        for source in pending:
            join = fan_outs[source][1]
            if join is not None:
                self.sharing.setdefault(join, []).append(source)
        return {source: self.block(source, *fan_outs[source]) for source in pending}

    def find(self, node: str) -> str:
        """The outermost closed block holding ``node`` (``node`` itself when none does)."""
        root = node
        while root in self.outer:
            root = self.outer[root]
        while node != root:  # path compression
            following = self.outer[node]
            self.outer[node] = root
            node = following
        return root

    def block(self, source: str, branches: list[str], join: str | None) -> list[GraphError]:
        def no_convergence(detail: str) -> list[GraphError]:
            message = f"the parallel branches of {quoted(source)} ({', '.join(branches)}) {detail}"
            return [GraphError("parallel_no_convergence", message, node=source)]

        if join is None or join == source:
            return no_convergence("never meet at one node")
        if join in branches:
            return no_convergence(f"meet at {quoted(join)}, which is itself one of them")
        if join == END and any(self.adjacency.get(branch) != [END] for branch in branches):
            # Every valid graph reaches __end__, so meeting there only counts when it is the plan.
            return no_convergence(
                f"only meet at {END}; that counts when every branch goes straight to {END},"
                " otherwise add a node where they join"
            )
        under: dict[str, str] = {}
        for branch in branches:
            top = self.tree.child_towards(join, branch)
            if top in under:
                return no_convergence(f"{quoted(under[top])} and {quoted(branch)} meet at {quoted(top)} before {quoted(join)}")
            under[top] = branch

        problems: list[GraphError] = []
        owner = {branch: branch for branch in branches}
        stepped_over: set[str] = set()
        budget = _SEARCH_BEFORE_CYCLES
        for branch in branches:
            queue = deque([branch])
            while queue:
                budget -= 1
                if budget == 0:
                    cycle = self.cycle(source, branches, join)
                    if cycle:
                        return no_convergence(cycle)
                node = queue.popleft()
                if self.routes[node].conditional:
                    message = (
                        f"{quoted(node)} has a conditional edge inside a parallel branch of {quoted(source)};"
                        " the branches of a parallel node must be plain"
                    )
                    problems.append(GraphError("parallel_conditional_branch", message, node=node))
                if node in self.closed_join and self.find(node) == node:
                    stepped_over.add(node)
                    targets = [self.closed_join[node]]
                else:
                    targets = self.adjacency.get(node, ())
                for target in targets:
                    if target == join:
                        continue
                    if target == source:
                        return no_convergence(f"do not all reach {quoted(join)}: {quoted(branch)} goes back to {quoted(source)}")
                    if target not in self.tree.parent or target == END:
                        return no_convergence(f"do not all reach {quoted(join)}: {quoted(branch)} goes on to {quoted(target)}")
                    seen = owner.get(target)
                    if seen is None:
                        owner[target] = branch
                        queue.append(target)
                    elif seen != branch:
                        return no_convergence(f"{quoted(seen)} and {quoted(branch)} meet at {quoted(target)} before {quoted(join)}")
        if not problems:
            self.close(source, join, owner, stepped_over)
        return problems

    def cycle(self, source: str, branches: list[str], join: str) -> str | None:
        """A cycle avoiding the join through the source, or through two branches: a way back
        to the source, or from one branch into another. The components of the graph without
        the join are found once per join, for every fan-out that meets there."""
        component = self.component.get(join)
        if component is None:
            component = self.component[join] = _components(self.sharing[join], self.adjacency, avoid=join)
        if component[source] < 0:
            culprit = next(b for b in branches if component[b] == component[source])
            return f"do not all reach {quoted(join)}: {quoted(culprit)} goes back to {quoted(source)}"
        looping: dict[int, str] = {}
        for branch in branches:
            earlier = looping.setdefault(component[branch], branch)
            if earlier != branch:
                return f"{quoted(branch)} and {quoted(earlier)} meet at {quoted(branch)} before {quoted(join)}"
        return None

    def close(self, source: str, join: str, region: dict[str, str], stepped_over: set[str]) -> None:
        """Remember a well-formed block for the blocks around it, if nothing enters it but its source."""
        if self.find(source) != source:
            return  # inside another closed block, which the search around it steps over already
        for node in region:
            if self.find(node) != node:
                return  # already inside another closed block: the outer search walked into it
            for previous in self.predecessors.get(node, ()):
                if previous != source and previous not in region and self.find(previous) not in stepped_over:
                    return
        self.closed_join[source] = join
        for node in region:
            self.outer[node] = source


def _components(roots: list[str], adjacency: dict[str, list[str]], avoid: str) -> dict[str, int]:
    """Strongly connected components of what ``roots`` reach without passing ``avoid``
    (Tarjan's algorithm, iteratively): node -> component number, negative for a node on a
    cycle (a component of several nodes, or a self-loop)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    component: dict[str, int] = {}
    stack: list[str] = []
    counter = 0
    for root in roots:
        if root in index:
            continue
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        work = [(root, iter(adjacency.get(root, ())))]
        while work:
            node, pending = work[-1]
            for following in pending:
                if following == avoid:
                    continue
                if following not in index:
                    index[following] = low[following] = counter
                    counter += 1
                    stack.append(following)
                    work.append((following, iter(adjacency.get(following, ()))))
                    break
                if following not in component:
                    low[node] = min(low[node], index[following])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    number = len(component) + 1
                    members = []
                    while True:
                        member = stack.pop()
                        members.append(member)
                        if member == node:
                            break
                    cyclic = len(members) > 1 or node in adjacency.get(node, ())
                    for member in members:
                        component[member] = -number if cyclic else number
    return component


def _unique(wanted: str, taken: set[str]) -> str:
    name, suffix = wanted, 2
    while name in taken:
        name, suffix = f"{wanted}_{suffix}", suffix + 1
    taken.add(name)
    return name
