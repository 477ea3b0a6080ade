"""Query-parameter parsing shared by the API and the pages: each refuses junk with a 400 naming the parameter."""

from __future__ import annotations


import orjson
from typing import Any


from memoryadmin.errors import InvalidInput
from memoryadmin.jsoncheck import json_storage_problem



LIST_LIMIT_DEFAULT = 100

LIST_LIMIT_MAX = 1000

def parse_limit(value: Any, *, default: int = LIST_LIMIT_DEFAULT, maximum: int = LIST_LIMIT_MAX, field_name: str = "limit") -> int:
    """An integer from 1 to `maximum`; `default` when absent (None). Anything else is a 400."""
    if value is None:
        return default
    try:
        number = int(value)
    except (TypeError, ValueError):
        number = 0
    if isinstance(value, bool) or number < 1 or number > maximum:
        message = f"must be an integer from 1 to {maximum}."
        raise InvalidInput(f"{field_name} {message}", fields={field_name: [message]})
    return number

PAGE_OFFSET_MAX = 1_000_000


def parse_page(value: Any, *, page_size: int, field_name: str = "page") -> int:
    """A page number of a list shown `page_size` rows at a time; 1 when absent or blank.

    At most the page that starts PAGE_OFFSET_MAX rows in: past it a number would
    overflow the database's OFFSET (a 500), and no one pages that far by hand.
    """
    if value is None or value == "":
        return 1
    return parse_limit(value, default=1, maximum=PAGE_OFFSET_MAX // page_size + 1, field_name=field_name)

def parse_json_object(value: Any, field_name: str) -> dict[str, Any]:
    """A JSON object given as a query-string value or already parsed; {} when absent (None)."""
    if value is None:
        return {}
    if isinstance(value, str):
        try:
            # orjson, as the API's parser: no NaN, no infinity, no lone surrogate.
            value = orjson.loads(value)
        except orjson.JSONDecodeError:
            raise InvalidInput(f"{field_name} is not valid JSON.", fields={field_name: ["is not valid JSON."]}) from None
    if not isinstance(value, dict):
        raise InvalidInput(f"{field_name} must be a JSON object.", fields={field_name: ["must be a JSON object."]})
    problem = json_storage_problem(value)
    if problem:
        raise InvalidInput(f"{field_name} {problem}.", fields={field_name: [f"{problem}."]})
    return value

def parse_choice(value: Any, field_name: str, choices, default: str) -> str:
    """One of `choices`; `default` when absent (None)."""
    if value is None:
        return default
    if not isinstance(value, str) or value not in choices:
        message = f"must be one of {', '.join(sorted(choices))}."
        raise InvalidInput(f"{field_name} {message}", fields={field_name: [message]})
    return value

def parse_offset(value: Any, maximum: int = 1_000_000) -> int:
    if value is None:
        return 0
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= maximum:
        message = f"must be an integer from 0 to {maximum}."
        raise InvalidInput(f"offset {message}", fields={"offset": [message]})
    return value
