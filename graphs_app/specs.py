"""Input checks for graph specs and names, shared by the API, the pages and the services.

No database here: ``spec_compile`` turns the compiler's ``SpecError`` into the 400 that
every surface answers with, and ``spec_check_storable`` adds what only matters once a
spec is stored (size, characters the database refuses).
"""

from __future__ import annotations

import unicodedata
from typing import Any

import orjson
from django.conf import settings

from memoryadmin.jsoncheck import json_size

from memoryadmin.errors import InvalidInput

from .compiler import CompileResult, SpecError, graph_compile
from .models import NAME_MAX

# A stored spec is at most this many bytes of JSON: room for a graph at the compiler's
# limits with short ids; the cap stops ignored extra keys (notes, labels) from turning a
# definition into a blob store.
MAX_SPEC_BYTES = 1024 * 1024
# The dashboard's textarea: the same cap, with room for indentation.
MAX_SPEC_TEXT = 2 * MAX_SPEC_BYTES
MAX_PATH = 300


def spec_field(path: str) -> str:
    """The field an error names: ``spec`` itself or ``spec.nodes[2].id``."""
    return "spec" if path in ("", "spec") else f"spec.{path}"


def spec_limits() -> dict[str, int]:
    """The compiler's limits as the settings give them (MEMORYADMIN_GRAPH_MAX_NODES, _EDGES)."""
    return {"max_nodes": settings.MEMORYADMIN_GRAPH_MAX_NODES, "max_edges": settings.MEMORYADMIN_GRAPH_MAX_EDGES}


def spec_compile(spec: Any) -> CompileResult:
    """Compile, answering junk (not a graph at all) with a 400 that names the field.

    A well-formed but wrong graph is not an error here: it compiles to ``valid=False``.
    """
    try:
        return graph_compile(spec, **spec_limits())
    except SpecError as exc:
        field = spec_field(exc.path)
        raise InvalidInput(f"{field}: {exc.problem}", fields={field: [exc.problem]}) from None


def spec_parse_text(text: str) -> Any:
    """JSON typed into the dashboard, parsed with the API's parser (same depth limit,
    no NaN, no lone surrogates), or a 400 on ``spec``."""
    if len(text) > MAX_SPEC_TEXT:
        raise InvalidInput(
            f"spec is longer than {MAX_SPEC_TEXT} characters.", fields={"spec": [f"at most {MAX_SPEC_TEXT} characters."]}
        )
    try:
        return orjson.loads(text.encode("utf-8", "surrogatepass"))
    except orjson.JSONDecodeError as exc:
        raise InvalidInput(f"spec is not JSON: {exc}", fields={"spec": [f"is not JSON: {exc}"]}) from None


def _bad_text(value: str) -> str | None:
    if "\x00" in value:
        return "holds a NUL character (U+0000)"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "holds a lone surrogate, which is not valid Unicode"
    return None


def spec_check_storable(spec: Any) -> None:
    """What the database must be able to store: JSON, at most MAX_SPEC_BYTES, and no
    string (or key) with U+0000 or a lone surrogate, which PostgreSQL refuses."""
    # Depth first, children pushed in reverse: the first bad string in document order is named.
    stack: list[tuple[Any, str]] = [(spec, "spec")]
    while stack:
        value, where = stack.pop()
        if isinstance(value, str):
            problem = _bad_text(value)
            if problem:
                raise InvalidInput(f"{where} {problem}.", fields={where: [f"{problem}."]})
        elif isinstance(value, dict):
            children = []
            for key, inner in value.items():
                problem = _bad_text(key) if isinstance(key, str) else None
                if problem:
                    raise InvalidInput(f"{where} has a key that {problem}.", fields={where: [f"has a key that {problem}."]})
                # Paths are echoed in the answer: keep them short whatever the keys are.
                children.append((inner, f"{where}.{key}"[:MAX_PATH]))
            stack.extend(reversed(children))
        elif isinstance(value, list):
            stack.extend(reversed([(inner, f"{where}[{index}]"[:MAX_PATH]) for index, inner in enumerate(value)]))
    try:
        size = json_size(spec)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"spec cannot be stored as JSON: {exc}", fields={"spec": [str(exc)]}) from None
    if size > MAX_SPEC_BYTES:
        message = f"is {size} bytes of JSON; a stored graph is at most {MAX_SPEC_BYTES}."
        raise InvalidInput(f"spec {message}", fields={"spec": [message]})


def name_validate(name: Any) -> str:
    """1..NAME_MAX characters after trimming, no control characters: threads name their
    graph by this (metadata.graph or the agent code), so it must be plain text."""
    if not isinstance(name, str) or not name.strip():
        raise InvalidInput("name is required.", fields={"name": ["is required."]})
    name = name.strip()
    if len(name) > NAME_MAX:
        message = f"at most {NAME_MAX} characters."
        raise InvalidInput(f"name is longer than {NAME_MAX} characters.", fields={"name": [message]})
    if _bad_text(name) or any(unicodedata.category(ch) in ("Cc", "Cs") for ch in name):
        raise InvalidInput("name holds control characters.", fields={"name": ["must not hold control characters."]})
    return name


# PostgreSQL's jsonb keeps no key order (it sorts keys by length, then bytes), so a stored
# spec comes back as {"edges", "nodes", ...}. The editor shows every spec in this order,
# whichever database it came from; keys not listed here follow in the order they come.
_KEY_ORDER = {
    key: index
    for index, key in enumerate(
        ("nodes", "edges", "interrupt_before", "interrupt_after", "id", "subgraph", "source", "target", "condition", "targets", "parallel")
    )
}


def spec_pretty(spec: Any) -> str:
    """The spec as indented JSON for the editor, schema keys first."""

    def ordered(value: Any) -> Any:
        if isinstance(value, dict):
            keys = sorted(value, key=lambda k: _KEY_ORDER.get(k, len(_KEY_ORDER)))
            return {key: ordered(value[key]) for key in keys}
        if isinstance(value, list):
            return [ordered(item) for item in value]
        return value

    return orjson.dumps(ordered(spec), option=orjson.OPT_INDENT_2).decode()


def node_count(result: CompileResult) -> int:
    """Real nodes of the flattened graph (without __start__ and __end__)."""
    return max(0, len(result.flattened) - 2)
