"""Step 4 of the compiler: adjacency lists and Mermaid flowcharts of the flattened and compiled graphs."""

from __future__ import annotations

from .flatten import Route
from .model import END, START, ParallelNode


def adjacency(keys: list[str], routes: dict[str, Route]) -> dict[str, list[str]]:
    return {key: [t for t in routes[key].successors() if isinstance(t, str)] for key in keys}


_MERMAID_SAFE = frozenset(" _-.,:/@$+=")
_INTERRUPT_CLASS = {(True, False): "interruptBefore", (False, True): "interruptAfter", (True, True): "interruptBoth"}
_MERMAID_CLASSES = {
    "parallel": "fill:#fff3cd,stroke:#b7791f,stroke-width:2px",
    "interruptBefore": "stroke:#c0392b,stroke-width:3px",
    "interruptAfter": "stroke:#c0392b,stroke-width:3px,stroke-dasharray: 6 3",
    "interruptBoth": "stroke:#c0392b,stroke-width:4px,stroke-dasharray: 2 2",
}


def mermaid_text(text: str) -> str:
    """Text safe inside a quoted Mermaid label: letters, digits and a few harmless marks
    stay, everything else (quotes, brackets, <, >, &, #, ;, control characters…) becomes
    a numeric entity code (``#34;``) that Mermaid renders as the character."""
    return "".join(ch if ch.isalnum() or ch in _MERMAID_SAFE else f"#{ord(ch)};" for ch in text)


def mermaid_flowchart(
    keys: list[str],
    routes: dict[str, Route],
    parallel: dict[str, ParallelNode],
    before: set[str],
    after: set[str],
    groups: dict[str, tuple[str, ...]] | None = None,
) -> str:
    """``flowchart TD`` source: generated ids n0, n1… with the real ids as escaped labels,
    conditional edges dashed with their outcome, parallel nodes as hexagons with thick
    arrows to the branches they run, interrupt nodes in a class of their own.

    The nodes of a subgraph (``groups``: node -> the subgraphs holding it, outermost
    first) are drawn inside a box named after it, ``subgraph g0["B"]`` … ``end``, nested
    as the subgraphs are. A subgraph's nodes come one after another in ``keys``."""
    ids = {key: f"n{index}" for index, key in enumerate(keys)}
    lines = ["flowchart TD"]
    classes: dict[str, list[str]] = {}
    opened: list[str] = []  # the boxes the next node is drawn in
    for key in keys:
        within = (groups or {}).get(key, ())
        while opened and (len(opened) > len(within) or opened[-1] != within[len(opened) - 1]):
            opened.pop()
            lines.append("    " * (len(opened) + 1) + "end")
        for name in within[len(opened) :]:
            lines.append("    " * (len(opened) + 1) + f'subgraph g{len(lines)}["{mermaid_text(name)}"]')
            opened.append(name)
        label = mermaid_text(key)
        if key in (START, END):
            shape = f'(["{label}"])'
        elif key in parallel:
            shape = '{{"' + label + '"}}'
            classes.setdefault("parallel", []).append(ids[key])
        else:
            shape = f'["{label}"]'
        lines.append("    " * (len(opened) + 1) + f"{ids[key]}{shape}")
        kind = _INTERRUPT_CLASS.get((key in before, key in after))
        if kind:
            classes.setdefault(kind, []).append(ids[key])

    while opened:
        opened.pop()
        lines.append("    " * (len(opened) + 1) + "end")

    def arrow(source: str, link: str, target: str, outcome: str | None = None) -> None:
        if target in ids:
            text = f'|"{mermaid_text(outcome)}"|' if outcome is not None else ""
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
        route = routes.get(key) or Route()
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
