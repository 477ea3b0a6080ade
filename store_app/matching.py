"""What a store `filter` and a store `query` mean (docs/store.md, rule ST6), stated once in Python.

PostgreSQL evaluates the same rules in SQL (`store_app.expressions`); SQLite
calls the functions below through registered SQL functions, so both backends
answer alike.

Filter, per value field (a top-level key of the item's value):
- a plain value or `{"$eq": v}`: the field exists and equals v as JSON (numbers
  by value, so 1 equals 1.0; true is not 1; objects and arrays exactly);
- `{"$ne": v}`: the field is missing or does not equal v;
- `{"$gt" | "$gte" | "$lt" | "$lte": v}` with v a number: the field is a number
  and compares as a number (9 < 10), never as text; with v a string: the field
  is a string and compares by code point. Other operand types are refused.
Several operators on one field and several fields all have to hold.

Query: the text of the item is its string values (nested ones included, keys
excluded). Items sharing at least one word with the query match; `score` says
how well. SQLite scores by term frequency over exact lower-cased words;
PostgreSQL by `ts_rank` over an English `tsvector` (stemmed, stop words dropped).
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from memoryadmin.errors import InvalidInput
from memoryadmin.jsoncheck import DEPTH_MAX, json_value_check, text_storable

OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte")
ORDERING_OPERATORS = ("$gt", "$gte", "$lt", "$lte")
MAX_FILTER_FIELDS = 32
MAX_FIELD_NAME = 256
MAX_QUERY_CHARS = 1000
MAX_QUERY_TERMS = 32

WORD_RE = re.compile(r"\w+")
_MISSING = object()


@dataclass(frozen=True)
class Condition:
    field: str
    op: str
    operand: Any

    def as_list(self) -> list[Any]:
        return [self.field, self.op, self.operand]


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _refuse(field: str, message: str) -> InvalidInput:
    return InvalidInput(f"{field}: {message}", fields={field: [message]})




def value_validate(value: Any, *, field: str = "value") -> dict[str, Any]:
    """A store value is a JSON object (LangGraph: `dict[str, Any]`), checked by the one check of
    JSON input (memoryadmin/jsoncheck.py): DEPTH_MAX levels, the small-value size."""
    if not isinstance(value, dict):
        raise _refuse(field, "must be a JSON object.")
    return json_value_check(value, field, depth_max=DEPTH_MAX)


def filter_validate(value: Any, *, field: str = "filter") -> tuple[Condition, ...]:
    """Parse a `filter` object into conditions; 400 naming the field on anything else."""
    if value is None:
        return ()
    if not isinstance(value, dict):
        raise _refuse(field, "must be a JSON object of value fields.")
    if len(value) > MAX_FILTER_FIELDS:
        raise _refuse(field, f"has {len(value)} fields; at most {MAX_FILTER_FIELDS}.")
    # Every operand is JSON jsonb can hold, and the filter is at most DEPTH_MAX deep, so the
    # comparisons below (which recurse into operands) stay within a bounded depth.
    value = json_value_check(value, field, depth_max=DEPTH_MAX)
    conditions: list[Condition] = []
    for name, spec in value.items():
        if not isinstance(name, str) or not text_storable(name) or len(name) > MAX_FIELD_NAME:
            raise _refuse(field, f"field names are at most {MAX_FIELD_NAME} characters without NUL.")
        operators = isinstance(spec, dict) and any(k.startswith("$") for k in spec)
        if not operators:
            conditions.append(Condition(name, "$eq", spec))
            continue
        for op, operand in spec.items():
            if op not in OPERATORS:
                raise _refuse(
                    field,
                    f"{name!r}: {op!r} is not an operator ({', '.join(OPERATORS)}); "
                    "an object mixing operators and fields is refused.",
                )
            if op in ORDERING_OPERATORS and not (_is_number(operand) or isinstance(operand, str)):
                raise _refuse(field, f"{name!r}: {op} compares numbers or strings, not {json.dumps(operand)}.")
            conditions.append(Condition(name, op, operand))
    return tuple(conditions)


def json_equal(left: Any, right: Any) -> bool:
    """JSON equality as PostgreSQL's jsonb `=`: numbers by value, booleans apart from numbers."""
    if isinstance(left, bool) or isinstance(right, bool):
        return isinstance(left, bool) and isinstance(right, bool) and left == right
    if _is_number(left) and _is_number(right):
        return left == right
    if isinstance(left, str) and isinstance(right, str):
        return left == right
    if left is None or right is None:
        return left is None and right is None
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(json_equal(a, b) for a, b in zip(left, right))
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(json_equal(left[k], right[k]) for k in left)
    return False


def condition_holds(value: Any, condition: Condition) -> bool:
    found = value.get(condition.field, _MISSING) if isinstance(value, dict) else _MISSING
    op, operand = condition.op, condition.operand
    if op == "$eq":
        return found is not _MISSING and json_equal(found, operand)
    if op == "$ne":
        return found is _MISSING or not json_equal(found, operand)
    if _is_number(operand):
        if not _is_number(found):
            return False
    elif not isinstance(found, str):
        return False
    if op == "$gt":
        return found > operand
    if op == "$gte":
        return found >= operand
    if op == "$lt":
        return found < operand
    return found <= operand


def conditions_hold(value: Any, conditions: tuple[Condition, ...] | list[Condition]) -> bool:
    return all(condition_holds(value, condition) for condition in conditions)


def query_terms(query: Any, *, field: str = "query") -> tuple[str, ...]:
    """The distinct lower-cased words of a query, in order. No words: no ranking."""
    if query is None:
        return ()
    if not isinstance(query, str):
        raise _refuse(field, "must be a string.")
    if len(query) > MAX_QUERY_CHARS:
        raise _refuse(field, f"is longer than {MAX_QUERY_CHARS} characters.")
    terms: list[str] = []
    for word in WORD_RE.findall(query.lower()):
        if word not in terms:
            terms.append(word)
        if len(terms) == MAX_QUERY_TERMS:
            break
    return tuple(terms)


def value_strings(value: Any) -> Iterator[str]:
    """The string values of a JSON document, depth first (keys are not text)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, dict):
            stack.extend(reversed(list(item.values())))
        elif isinstance(item, list):
            stack.extend(reversed(item))


def text_score(value: Any, terms: tuple[str, ...] | list[str]) -> float:
    """Term-frequency relevance in [0, 1): 0 when no query word occurs.

    Each query word adds tf / (tf + 1) (repeats help, with diminishing returns),
    averaged over the query's words, so covering more of them ranks higher.
    """
    if not terms:
        return 0.0
    counts = Counter(word for text in value_strings(value) for word in WORD_RE.findall(text.lower()))
    total = 0.0
    for term in terms:
        tf = counts.get(term, 0)
        total += tf / (tf + 1)
    score = total / len(terms)
    return score if math.isfinite(score) else 0.0
