"""Request-parameter parsing shared by the API and the pages: the one place a parameter's
text (a query string, a form field) or JSON value becomes a Python value.

Every parser takes the raw value (None when absent) and the parameter's name, and
refuses what it cannot use with InvalidInput naming that parameter: a 400 with
`{"errors": {name: [why]}}` from the API, a 400 page (or fragment) from the dashboard,
never a 500. Blank text ("", as a form's empty field sends it) counts as absent for
numbers, booleans, cursors and dates; a choice is blank only when a caller says so.

Numbers are bounded so that nothing reaches SQL that the database cannot hold: a huge
`?page=`, `?offset=` or `?before=` is a 400 naming it, not an overflow.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection
from datetime import date
from typing import Any


from memoryadmin.errors import InvalidInput
from memoryadmin.json import DepthExceeded, loads as json_loads
from memoryadmin.jsoncheck import DEPTH_MAX, json_value_check

LIST_LIMIT_DEFAULT = 100
LIST_LIMIT_MAX = 1000
# The deepest page a paged list serves; past it the list is searched or filtered instead.
PAGE_MAX = 100_000
# The deepest row a paged page starts at (an OFFSET), whatever the page size.
PAGE_OFFSET_MAX = 1_000_000
# Keyset cursors and row ids: below PostgreSQL's and SQLite's largest bigint (2**63 - 1).
CURSOR_MAX = 10**18 - 1
_INTEGER_RE = re.compile(r"[+-]?[0-9]{1,30}")
_DAY_RE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_TRUE = frozenset({"true", "1", "yes", "on"})
_FALSE = frozenset({"false", "0", "no", "off"})


def invalid(name: str, problem: str) -> InvalidInput:
    """The error every parser raises: "<name> <problem>", with `problem` listed under `name`."""
    return InvalidInput(f"{name} {problem}", fields={name: [problem]})


class Collected:
    """Parse several parameters and refuse them together: every bad one named in one 400.

        errors = Collected()
        page = errors.take(lambda: parse_page(data.get("page")))
        ...
        errors.raise_any()
    """

    def __init__(self) -> None:
        self.fields: dict[str, list[str]] = {}
        self.messages: list[str] = []

    def take(self, parse, default: Any = None) -> Any:
        try:
            return parse()
        except InvalidInput as exc:
            for name, problems in exc.fields.items():
                self.fields.setdefault(name, []).extend(problems)
            self.messages.append(exc.message)
            return default

    def add(self, name: str, problem: str) -> None:
        self.take(lambda: _raise(invalid(name, problem)))

    def raise_any(self) -> None:
        if self.fields:
            raise InvalidInput("; ".join(self.messages), fields=self.fields)


def _raise(error: InvalidInput) -> Any:
    raise error


def _blank(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def _bounds(minimum: float | None, maximum: float | None) -> str:
    if minimum is not None and maximum is not None:
        return f"from {minimum} to {maximum}"
    if minimum is not None:
        return f"at least {minimum}"
    return f"at most {maximum}"


def parse_int(
    value: Any, *, name: str, default: Any = None, minimum: int | None = None, maximum: int | None = None
) -> Any:
    """An integer: a JSON integer (not a boolean, not a float) or its decimal text; `default` when blank."""
    if _blank(value):
        return default
    number = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and _INTEGER_RE.fullmatch(value.strip()):
        number = int(value.strip())
    bounded = minimum is not None or maximum is not None
    out_of_range = number is not None and (
        (minimum is not None and number < minimum) or (maximum is not None and number > maximum)
    )
    if number is None or out_of_range:
        raise invalid(name, f"must be an integer {_bounds(minimum, maximum)}." if bounded else "must be an integer.")
    return number


def parse_number(
    value: Any, *, name: str, default: Any = None, minimum: float | None = None, maximum: float | None = None
) -> Any:
    """A finite number: a JSON number (not a boolean) or its decimal text; `default` when blank."""
    if _blank(value):
        return default
    number = None
    if isinstance(value, int | float) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            number = None
    if number is None or (isinstance(number, float) and not math.isfinite(number)):
        raise invalid(name, "must be a number.")
    if (minimum is not None and number < minimum) or (maximum is not None and number > maximum):
        raise invalid(name, f"must be a number {_bounds(minimum, maximum)}.")
    return number


def parse_limit(value: Any, *, default: int = LIST_LIMIT_DEFAULT, maximum: int = LIST_LIMIT_MAX, field_name: str = "limit") -> int:
    """A page size from 1 to `maximum`; `default` when absent."""
    return parse_int(value, name=field_name, default=default, minimum=1, maximum=maximum)


def parse_offset(value: Any, maximum: int = 1_000_000, *, name: str = "offset") -> int:
    """Rows to skip, from 0 to `maximum`; 0 when absent."""
    return parse_int(value, name=name, default=0, minimum=0, maximum=maximum)


def parse_page(value: Any, *, maximum: int = PAGE_MAX, name: str = "page", page_size: int | None = None) -> int:
    """A page number of a paged list, from 1 to `maximum`; 1 when absent. With `page_size`,
    also at most the page that starts PAGE_OFFSET_MAX rows in: no one pages further by hand,
    and the list is searched or filtered instead."""
    if page_size:
        maximum = min(maximum, PAGE_OFFSET_MAX // page_size + 1)
    return parse_int(value, name=name, default=1, minimum=1, maximum=maximum)


def parse_cursor(value: Any, *, name: str, default: int | None = None) -> int | None:
    """A keyset cursor (`before`, `after`): the id or seq a page ends at, from 0 to CURSOR_MAX."""
    return parse_int(value, name=name, default=default, minimum=0, maximum=CURSOR_MAX)


def parse_bool(value: Any, *, name: str, default: bool) -> bool:
    """A JSON boolean, or true/false, 1/0, yes/no, on/off in any case (a ticked checkbox sends "on" or its value)."""
    if _blank(value):
        return default
    if isinstance(value, bool):
        return value
    text = value.strip().lower() if isinstance(value, str) else None
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise invalid(name, "must be true or false.")


def parse_choice(value: Any, field_name: str, choices: Collection[str], default: str) -> str:
    """One of `choices` (named in the error in their order, or sorted when they are a set);
    `default` when absent (None). A blank string is a value like any other: callers where
    blank means "any" pass `value or None`."""
    if value is None:
        return default
    if not isinstance(value, str) or value not in choices:
        named = choices if isinstance(choices, list | tuple) else sorted(choices)
        raise invalid(field_name, f"must be one of {', '.join(named)}.")
    return value


def parse_date(value: Any, *, name: str) -> date | None:
    """A day as YYYY-MM-DD; None when blank. (date.fromisoformat alone would also take 20240131 or weeks.)"""
    if _blank(value):
        return None
    text = value.strip() if isinstance(value, str) else ""
    try:
        if not _DAY_RE.fullmatch(text):
            raise ValueError(text)
        return date.fromisoformat(text)
    except ValueError:
        raise invalid(name, "must be a date (YYYY-MM-DD).") from None

def parse_json_object(value: Any, field_name: str) -> dict[str, Any]:
    """A JSON object given as a query-string value or already parsed; {} when absent (None).

    A filter or metadata: DEPTH_MAX levels and the small-value size (memoryadmin/jsoncheck.py).
    """
    if value is None:
        return {}
    if isinstance(value, str):
        try:
            # The API's parser: no NaN, no infinity, no lone surrogate, integers exact.
            value = json_loads(value, depth_max=DEPTH_MAX, field=field_name)
        except DepthExceeded as exc:
            raise InvalidInput(str(exc), fields={field_name: [f"is nested deeper than {exc.limit} levels."]}) from None
        except ValueError:
            raise invalid(field_name, "is not valid JSON.") from None
    if not isinstance(value, dict):
        raise invalid(field_name, "must be a JSON object.")
    return json_value_check(value, field_name, depth_max=DEPTH_MAX)
