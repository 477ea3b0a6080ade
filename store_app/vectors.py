"""What an item's index is (docs/store.md, rule ST10), stated once: field paths, the texts at them, vectors.

LangGraph's `index`: `False` (the item is not embedded), a list of field paths,
or `None` (the store's default fields, `["$"]` unless configured). A path is
LangGraph's syntax: `$` (the whole value as sorted JSON), `a.b`, `list[0]`,
`list[-1]`, `list[*]`, `*` (every value of an object or a list), and
`{a,b.c}` (several fields). Each text found at a path gets one vector; when a
path yields several texts they are named `path.0`, `path.1`… as LangGraph names
them. Vectors are lists of `dims` finite numbers, stored as float32; a search
scores an item by the best cosine similarity of its vectors with the query's.
"""

from __future__ import annotations

import array
import json
import math
import operator
from typing import Any

from memoryadmin.errors import InvalidInput

# pgvector's `vector` takes 16,000 dimensions; embedders in use stay far below this.
DIMS_MAX = 4096
MAX_INDEX_PATHS = 32
MAX_PATH_CHARS = 256
# A vector's name: its path, and ".<n>" when the path found several texts (StoreVector.path).
MAX_VECTOR_NAME_CHARS = 320
# One item's texts, all paths together: a `[*]` over a long list is refused, not embedded a thousand times.
MAX_VECTORS_PER_ITEM = 64
DEFAULT_FIELDS = ("$",)
FLOAT32_MAX = 3.0e38


def _refuse(field: str, message: str) -> InvalidInput:
    return InvalidInput(f"{field}: {message}", fields={field: [message]})


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def index_paths_validate(index: Any, *, field: str = "index") -> tuple[str, ...] | bool | None:
    """`False`, `None` or a list of field paths (non-empty strings, at most 32 of 256 characters)."""
    if index is None or index is False:
        return index
    if not isinstance(index, list) or not all(isinstance(path, str) for path in index):
        raise _refuse(field, "must be false, null or a list of field paths.")
    if len(index) > MAX_INDEX_PATHS:
        raise _refuse(field, f"has {len(index)} paths; at most {MAX_INDEX_PATHS}.")
    for path in index:
        if not path or len(path) > MAX_PATH_CHARS:
            raise _refuse(field, f"a path is 1 to {MAX_PATH_CHARS} characters.")
    return tuple(index)


def dims_validate(dims: Any, *, field: str = "dims") -> int:
    if not isinstance(dims, int) or isinstance(dims, bool) or not 1 <= dims <= DIMS_MAX:
        raise _refuse(field, f"must be a whole number from 1 to {DIMS_MAX}.")
    return dims


def vector_validate(vector: Any, *, dims: int | None, field: str, name: str = "the vector") -> list[float]:
    """A list of finite numbers: exactly `dims` of them when the caller said how many (a
    length other than `dims` names the field), else 1 to DIMS_MAX, its length being its dims."""
    if not isinstance(vector, list):
        raise _refuse(field, f"{name} must be a list of numbers.")
    if dims is not None and len(vector) != dims:
        raise _refuse(field, f"{name} has {len(vector)} numbers; dims is {dims}.")
    if not 1 <= len(vector) <= DIMS_MAX:
        raise _refuse(field, f"{name} must have 1 to {DIMS_MAX} numbers.")
    if not all(_is_number(x) and math.isfinite(x) for x in vector):
        raise _refuse(field, f"{name} must hold finite numbers only.")
    # float32 overflows past 3.4e38: such a number would be stored as infinity.
    if any(abs(x) > FLOAT32_MAX for x in vector):
        raise _refuse(field, f"{name} holds a number too large for float32.")
    return [float(x) for x in vector]


def vectors_validate(vectors: Any, *, dims: Any, field: str = "vectors") -> dict[str, list[float]]:
    """A put's vectors: an object of field path -> vector; each of `dims` numbers when `dims` is given."""
    if not isinstance(vectors, dict):
        raise _refuse(field, "must be an object of field path to vector.")
    if dims is not None:
        dims = dims_validate(dims)
    if len(vectors) > MAX_VECTORS_PER_ITEM:
        raise _refuse(field, f"has {len(vectors)} vectors; at most {MAX_VECTORS_PER_ITEM} per item.")
    checked = {}
    for path, vector in vectors.items():
        if len(path) > MAX_VECTOR_NAME_CHARS:
            raise _refuse(field, f"a path is at most {MAX_VECTOR_NAME_CHARS} characters.")
        checked[path] = vector_validate(vector, dims=dims, field=field, name=f"{path!r}")
    return checked


def float32(vector: list[float]) -> array.array:
    """The vector as it is stored: each number rounded to float32."""
    return array.array("f", vector)


def norm(vector) -> float:
    return math.sqrt(math.fsum(x * x for x in vector))


def cosine(query, query_norm: float, vector, vector_norm: float) -> float:
    """Cosine similarity; 0 when either vector is all zeros (LangGraph's in-memory store answers 0 too)."""
    if query_norm == 0 or vector_norm == 0:
        return 0.0
    return sum(map(operator.mul, query, vector)) / (query_norm * vector_norm)


# LangGraph's field paths. The same syntax and the same texts as
# langgraph.store.base.embed.get_text_at_path, which the tests hold this to.


def tokenize_path(path: str) -> list[str]:
    """`a.b[0].{c,d}` -> ["a", "b", "[0]", "{c,d}"]: brackets and braces are tokens of their own."""
    tokens: list[str] = []
    current: list[str] = []
    i = 0
    while i < len(path):
        char = path[i]
        if char in "[{":
            if current:
                tokens.append("".join(current))
                current = []
            closing = "]" if char == "[" else "}"
            depth, start = 1, i
            i += 1
            while i < len(path) and depth > 0:
                if path[i] == char:
                    depth += 1
                elif path[i] == closing:
                    depth -= 1
                i += 1
            tokens.append(path[start:i])
            continue
        if char == ".":
            if current:
                tokens.append("".join(current))
                current = []
        else:
            current.append(char)
        i += 1
    if current:
        tokens.append("".join(current))
    return tokens


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _leaf_texts(value: Any) -> list[str]:
    if isinstance(value, (str, int, float, bool)):
        return [str(value)]
    if isinstance(value, (list, dict)):
        return [_dumps(value)]
    return []


def _walk(value: Any, tokens: list[str], position: int) -> list[str]:
    if position >= len(tokens):
        return _leaf_texts(value)
    token = tokens[position]
    found: list[str] = []
    if token.startswith("[") and token.endswith("]"):
        if not isinstance(value, list):
            return []
        index = token[1:-1]
        if index == "*":
            for element in value:
                found += _walk(element, tokens, position + 1)
            return found
        try:
            number = int(index)
        except ValueError:
            return []
        if number < 0:
            number += len(value)
        if 0 <= number < len(value):
            found += _walk(value[number], tokens, position + 1)
        return found
    if token.startswith("{") and token.endswith("}"):
        if not isinstance(value, dict):
            return []
        for name in (part.strip() for part in token[1:-1].split(",")):
            current: Any = value
            for step in tokenize_path(name):
                current = current.get(step) if isinstance(current, dict) and step in current else None
                if current is None:
                    break
            # A multi-field selection reads object fields only, and skips nulls.
            if current is not None and tokenize_path(name):
                found += _leaf_texts(current)
        return found
    if token == "*":
        children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
        for child in children:
            found += _walk(child, tokens, position + 1)
        return found
    if isinstance(value, dict) and token in value:
        return _walk(value[token], tokens, position + 1)
    return []


def texts_at(value: Any, path: str) -> list[str]:
    """The texts at one field path of a value: `$` is the whole value as sorted JSON."""
    if not path or path == "$":
        return [_dumps(value)]
    return _walk(value, tokenize_path(path), 0)


def indexed_texts(value: dict, paths: tuple[str, ...] | list[str]) -> list[tuple[str, str]]:
    """(vector name, text) for each text at the paths, named as LangGraph names them; at most 64."""
    named: list[tuple[str, str]] = []
    for path in paths:
        texts = texts_at(value, path)
        if len(texts) > 1:
            named += [(f"{path}.{i}", text) for i, text in enumerate(texts)]
        elif texts:
            named.append((path, texts[0]))
    if len(named) > MAX_VECTORS_PER_ITEM:
        raise _refuse("index", f"the paths yield {len(named)} texts; at most {MAX_VECTORS_PER_ITEM} per item.")
    return named
