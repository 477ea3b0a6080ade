"""Query-parameter parsing shared by the API and the pages: each refuses junk with a 400 naming the parameter."""

from __future__ import annotations


from typing import Any


from memoryadmin.errors import InvalidInput
from memoryadmin.json import DepthExceeded, loads as json_loads
from memoryadmin.jsoncheck import DEPTH_MAX, json_value_check



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
            raise InvalidInput(f"{field_name} is not valid JSON.", fields={field_name: ["is not valid JSON."]}) from None
    if not isinstance(value, dict):
        raise InvalidInput(f"{field_name} must be a JSON object.", fields={field_name: ["must be a JSON object."]})
    return json_value_check(value, field_name, depth_max=DEPTH_MAX)

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
