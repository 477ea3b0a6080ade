"""What the pages show of a compile result: adjacency rows, errors and marked Mermaid.

Pure functions over ``CompileResult``; the templates only loop over what is built here.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from .compiler import END, START, CompileResult
from .compiler.mermaid import mermaid_text

# Styles of the marks added to the compiler's Mermaid. The compiler's own classes are
# parallel and interrupt*; these names do not collide with them.
MARK_STYLES = {
    "error": "fill:#fbe9eb,stroke:#c62f3b,stroke-width:3px,color:#8a1f29",
    "visited": "fill:#e4f3e8,stroke:#1f8a4c,stroke-width:2px",
    "current": "fill:#2f5bea,stroke:#16307f,stroke-width:4px,color:#ffffff",
}
PATH_LINK_STYLE = "stroke:#1f8a4c,stroke-width:3px"

# The compiler declares each node once, as `    n3["label"]`, `    n0(["label"])` or
# `    n5{{"label"}}`, and each edge as `    n1 -->|"outcome"| n2` (docs/graphs.md, step 4).
# Matched with fullmatch: the whole line, never a prefix of it.
_NODE_LINE = re.compile(r'\s+(n\d+)(?:\(\["|\["|\{\{")(.*)(?:"\]\)|"\]|"\}\})')
_EDGE_LINE = re.compile(r'\s+(n\d+) (?:-->|-\.->|==>)(?:\|"[^"]*"\|)? (n\d+)')
_ENTITY = re.compile(r"#(\d+);")
_NODE_PARTS = re.compile(r'(\s+(n\d+)(?:\(\["|\["|\{\{"))(.*)("\]\)|"\]|"\}\})')
_EDGE_PARTS = re.compile(r'(\s+n\d+ (?:-->|-\.->|==>)\|")([^"]*)("\| n\d+)')

# A drawn label is wrapped at this many characters a line, on at most this many lines: one
# 256-character id must not widen its node until the whole diagram shrinks to a thumbnail.
# The full id is the node's tooltip (static/js/graphs.js), and the tables list it.
LABEL_WIDTH = 28
LABEL_LINES = 3
_BREAK_AFTER = " -_.,:/"


def _unescape(label: str) -> str:
    return _ENTITY.sub(lambda m: chr(int(m.group(1))) if int(m.group(1)) <= 0x10FFFF else m.group(0), label)


@dataclass
class _Parsed:
    ids: dict[str, str] = field(default_factory=dict)  # node id -> mermaid id
    links: list[tuple[str, str]] = field(default_factory=list)  # mermaid ids, in link order


def _parse(source: str) -> _Parsed:
    parsed = _Parsed()
    for line in source.splitlines():
        node = _NODE_LINE.fullmatch(line)
        if node:
            parsed.ids.setdefault(_unescape(node.group(2)), node.group(1))
            continue
        edge = _EDGE_LINE.fullmatch(line)
        if edge:
            parsed.links.append((edge.group(1), edge.group(2)))
    return parsed


def mermaid_marked(
    source: str,
    marks: dict[str, list[str]],
    path: list[str] | None = None,
) -> str:
    """The compiler's Mermaid with extra classes on nodes (``marks``: class -> node ids)
    and the links between consecutive nodes of ``path`` drawn thicker.

    Node ids are matched through the labels the compiler wrote, so an id that is not in
    the diagram (an unknown node named by an error, a node a checkpoint names but the
    graph lacks) is simply not marked.
    """
    parsed = _parse(source)
    lines = [source.rstrip("\n")]
    for name, nodes in marks.items():
        members = list(dict.fromkeys(parsed.ids[n] for n in nodes if n in parsed.ids))
        if members:
            lines.append(f"    classDef {name} {MARK_STYLES[name]}")
            lines.append(f"    class {','.join(members)} {name}")
    if path:
        steps = {(parsed.ids.get(a), parsed.ids.get(b)) for a, b in zip(path, path[1:])}
        indexes = [str(i) for i, link in enumerate(parsed.links) if link in steps]
        if indexes:
            lines.append(f"    linkStyle {','.join(indexes)} {PATH_LINK_STYLE}")
    return "\n".join(lines) + "\n"


def label_lines(label: str, width: int = LABEL_WIDTH, most: int = LABEL_LINES) -> list[str]:
    """``label`` in lines of at most ``width`` characters, broken after a space or a
    separator when one is in the second half of the line; past ``most`` lines the last
    one ends with an ellipsis."""
    lines: list[str] = []
    rest = label
    while rest and len(lines) < most:
        if len(rest) <= width:
            lines.append(rest)
            rest = ""
            break
        cut = max(rest.rfind(mark, width // 2, width) for mark in _BREAK_AFTER) + 1 or width
        lines.append(rest[:cut])
        rest = rest[cut:]
    if rest:
        lines[-1] = lines[-1][: width - 1].rstrip() + "…"
    return [line.strip() or line for line in lines] or [label]


def _wrapped(escaped: str) -> str:
    label = _unescape(escaped)
    if len(label) <= LABEL_WIDTH:
        return escaped
    return "<br>".join(mermaid_text(line) for line in label_lines(label))


@dataclass(frozen=True)
class Diagram:
    """Mermaid source as a page draws it: long labels wrapped and cut, and every node's
    full id by Mermaid id (``labels``, JSON) for the tooltips."""

    source: str
    labels: str


def diagram_for_page(source: str) -> Diagram:
    """Wrap the labels of the compiler's (or a marked) Mermaid for drawing.

    Only the compiler's escaped text is changed, and ``<br>`` is the one piece of markup
    added: the escaped text holds no ``<``, so no label can add markup of its own."""
    labels: dict[str, str] = {}
    lines = []
    for line in source.splitlines():
        node = _NODE_PARTS.fullmatch(line)
        if node:
            labels[node.group(2)] = _unescape(node.group(3))
            line = node.group(1) + _wrapped(node.group(3)) + node.group(4)
        else:
            edge = _EDGE_PARTS.fullmatch(line)
            if edge:
                line = edge.group(1) + _wrapped(edge.group(2)) + edge.group(3)
        lines.append(line)
    return Diagram("\n".join(lines) + "\n", json.dumps(labels, ensure_ascii=False))


@dataclass(frozen=True)
class AdjacencyRow:
    node: str
    successors: list[str]
    error: bool = False
    inserted: bool = False
    interrupt: str = ""  # "before", "after", "before and after" or ""
    runs: list[str] = field(default_factory=list)  # branches an inserted parallel node runs
    terminal: bool = False  # __start__ / __end__


@dataclass(frozen=True)
class ErrorRow:
    code: str
    message: str
    node: str | None
    edge: str | None
    in_graph: bool  # the node is in the diagram (so it is marked there too)


@dataclass(frozen=True)
class Preview:
    result: CompileResult
    errors: list[ErrorRow]
    flattened: list[AdjacencyRow]
    compiled: list[AdjacencyRow]
    mermaid_source: str
    mermaid_compiled: str
    node_count: int
    edge_count: int

    @property
    def diagrams(self) -> list[tuple[str, str, Diagram]]:
        return [
            ("Before compilation", "subgraphs flattened", diagram_for_page(self.mermaid_source)),
            ("After compilation", "parallel nodes inserted", diagram_for_page(self.mermaid_compiled)),
        ]

    @property
    def tables(self) -> list[tuple[str, list[AdjacencyRow]]]:
        return [("Before compilation", self.flattened), ("After compilation", self.compiled)]


def _edge_text(edge: dict[str, Any] | None) -> str | None:
    if not edge:
        return None
    if "targets" in edge:
        outcomes = ", ".join(f"{k} → {v}" for k, v in (edge.get("targets") or {}).items())
        return f"{edge.get('source')} ⇢ {edge.get('condition')} {{{outcomes}}}"
    return f"{edge.get('source')} → {edge.get('target')}"


def _interrupt(node: str, before: set[str], after: set[str]) -> str:
    if node in before and node in after:
        return "before and after"
    return "before" if node in before else "after" if node in after else ""


def preview_build(result: CompileResult) -> Preview:
    """Everything the preview partial shows, computed once here (never in the template)."""
    error_nodes = {e.node for e in result.errors if e.node}
    before, after = set(result.interrupt_before), set(result.interrupt_after)
    parallel = {p.id: p for p in result.parallel_nodes}

    def rows(adjacency: dict[str, list[str]]) -> list[AdjacencyRow]:
        return [
            AdjacencyRow(
                node=node,
                successors=list(successors),
                error=node in error_nodes,
                inserted=node in parallel,
                interrupt=_interrupt(node, before, after),
                runs=list(parallel[node].branches) if node in parallel else [],
                terminal=node in (START, END),
            )
            for node, successors in adjacency.items()
        ]

    errors = [
        ErrorRow(e.code, e.message, e.node, _edge_text(e.edge), in_graph=e.node in result.flattened)
        for e in result.errors
    ]
    marks = {"error": sorted(error_nodes)} if error_nodes else {}
    return Preview(
        result=result,
        errors=errors,
        flattened=rows(result.flattened),
        compiled=rows(result.compiled),
        mermaid_source=mermaid_marked(result.mermaid_source, marks),
        mermaid_compiled=mermaid_marked(result.mermaid_compiled, marks),
        node_count=max(0, len(result.flattened) - 2),
        edge_count=sum(len(v) for v in result.flattened.values()),
    )
