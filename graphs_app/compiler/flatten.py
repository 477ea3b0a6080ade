"""Step 2 of the compiler: a graph and all its subgraphs as one adjacency list
(docs/graphs.md, "Step 2: flatten subgraphs")."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from .model import END, SEPARATOR, START, GraphError, quoted
from .parsing import Graph

# A real node is its flattened id; ("in", "B") and ("out", "B") stand for the entry and
# the exit of subgraph node B until contraction removes them.
Key = str | tuple[str, str]


@dataclass
class Route:
    """Where a node goes next: plain targets (several are parallel branches) or one
    conditional edge whose outcomes each lead to one or more nodes."""

    targets: list[Key] = field(default_factory=list)
    condition: str | None = None
    outcomes: dict[str, list[Key]] | None = None
    parallel: bool = False

    @property
    def conditional(self) -> bool:
        return self.outcomes is not None

    def successors(self) -> list[Key]:
        if self.outcomes is None:
            return list(self.targets)
        return list(dict.fromkeys(t for targets in self.outcomes.values() for t in targets))

    def replaced(self, old: Key, new: list[Key]) -> Route:
        """A copy with ``old`` replaced by ``new`` wherever it is a target."""

        def splice(targets: list[Key]) -> list[Key]:
            # Built from slices, not element by element: a node may lead to thousands of
            # subgraphs, each of them spliced in turn.
            if old not in targets:
                return list(dict.fromkeys(targets))
            at = targets.index(old)
            return list(dict.fromkeys([*targets[:at], *new, *targets[at + 1 :]]))

        if self.outcomes is None:
            return Route(splice(self.targets))
        outcomes = {outcome: splice(targets) for outcome, targets in self.outcomes.items()}
        return Route(condition=self.condition, outcomes=outcomes, parallel=self.parallel)


def _substitute(route: Route, placeholder: Key, replacement: Route) -> tuple[Route, str | None]:
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


class Flattener:
    """Step 2: one adjacency list for the graph and all its subgraphs.

    Each subgraph node B is wired as two placeholders, ("in", B) for its entry and
    ("out", B) for its exit. Contracting them afterwards sends edges into B to the
    subgraph's entry nodes and the subgraph's exits to B's successors, at any depth."""

    def __init__(self, errors: list[GraphError]) -> None:
        self.errors = errors
        self.routes: dict[Key, Route] = {START: Route(), END: Route()}
        self.order: list[str] = []  # real nodes, children in place of their subgraph node
        self.placeholders: list[Key] = []
        self.before: list[Any] = []  # keys until contract() maps them to flattened ids
        self.after: list[Any] = []
        self.groups: dict[str, tuple[str, ...]] = {}  # real node -> the subgraphs holding it, outermost first

    def add(self, graph: Graph, prefix: str, entry: Key, exit: Key, within: tuple[str, ...] = ()) -> None:
        as_source: dict[str, Key] = {START: entry}
        as_target: dict[str, Key] = {END: exit}
        for node in graph.nodes:
            if not node.id or node.id in (START, END) or node.id in as_source:
                continue  # refused by step 1
            name = prefix + node.id
            if node.subgraph is not None:
                as_source[node.id], as_target[node.id] = ("out", name), ("in", name)
                self.placeholders += [("in", name), ("out", name)]
                self.add(node.subgraph, name + SEPARATOR, ("in", name), ("out", name), (*within, name))
                continue
            as_source[node.id] = as_target[node.id] = name
            if name in self.routes:  # e.g. a node "B-D" beside subgraph B's child D
                message = f"two nodes flatten to the same id {quoted(name)}"
                self.errors.append(GraphError("duplicate_node", message, node=name))
            else:
                self.order.append(name)
                self.routes[name] = Route()
                if within:
                    self.groups[name] = within

        first_kind: dict[Key, bool] = {}  # is the first edge of a source conditional?
        for edge in graph.edges:
            source = as_source.get(edge.source)
            conditional = edge.outcomes is not None
            if source is None:
                continue
            route = self.routes.setdefault(source, Route())
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
        predecessors: dict[Key, dict[Key, None]] = {}
        for source, route in self.routes.items():
            route.targets = list(dict.fromkeys(route.targets))
            for target in route.successors():
                predecessors.setdefault(target, {})[source] = None
        self.before = self._interrupt_nodes(self.before, lambda key: self.routes.get(key, Route()).successors())
        self.after = self._interrupt_nodes(self.after, lambda key: predecessors.get(key, {}))

        present: dict[Key, set[Key]] = {}  # a plain route's targets as a set, for the users spliced in place
        near: dict[Key, int] = {}  # where the last splice into a user's targets was
        for placeholder in self.placeholders:
            # A loop made only of entries and exits (an empty subgraph feeding itself) leads nowhere.
            replacement = (self.routes.pop(placeholder, None) or Route()).replaced(placeholder, [])
            for user in predecessors.pop(placeholder, {}):
                route = self.routes.get(user)
                if route is None:  # a placeholder contracted earlier
                    continue
                if not route.conditional and not replacement.conditional:
                    # The common case, plain into plain, in place: a node may lead to thousands
                    # of subgraphs, and copying its list for each of them would be quadratic.
                    members = present.get(user)
                    if members is None:
                        members = present[user] = set(route.targets)
                    near[user] = _splice_plain(route, placeholder, replacement.targets, members, near.get(user, 0))
                    merged, problem = route, None
                else:
                    present.pop(user, None)
                    merged, problem = _substitute(route, placeholder, replacement)
                if problem:
                    side = "entry" if placeholder[0] == "in" else "exit"
                    name = _key_name(user)
                    message = f"{quoted(name)} " + problem.format(side=side, subgraph=quoted(placeholder[1]))
                    self.errors.append(GraphError("subgraph_edge_conflict", message, node=name))
                self.routes[user] = merged
                for target in replacement.successors():  # the user's other targets know it already
                    predecessors.setdefault(target, {})[user] = None

    @staticmethod
    def _interrupt_nodes(keys: list[Key], step: Callable[[Key], Iterable[Key]]) -> list[str]:
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


def _splice_plain(route: Route, placeholder: Key, new: list[Key], present: set[Key], near: int = 0) -> int:
    """``route.replaced(placeholder, new)`` for plain routes, in place; ``present`` holds the
    route's targets and is kept up to date. The placeholder is looked for from ``near`` on
    first: placeholders are contracted in the order their edges were written, so the next
    one usually follows the last splice. Answers where this splice was."""
    targets = route.targets
    if placeholder not in present:
        return near
    try:
        at = targets.index(placeholder, near)
    except ValueError:
        at = targets.index(placeholder)
    present.discard(placeholder)
    if present.isdisjoint(new):
        targets[at : at + 1] = new
    else:  # a target reached twice keeps its first place, as in Route.replaced
        route.targets = targets = list(dict.fromkeys([*targets[:at], *new, *targets[at + 1 :]]))
    present.update(new)
    return at


def _key_name(key: Key) -> str:
    return key if isinstance(key, str) else key[1]


