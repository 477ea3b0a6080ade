"""Thread ids as memoryadmin takes them, checked before any request, and ids in URL paths.

memoryadmin keeps a thread under an id of 1 to 64 characters of `A-Z a-z 0-9 _ . : @ $ -`,
other than `search` (the route of LangGraph's thread search) and `.` or `..` (path steps to
any HTTP client); the server refuses any
other id with a 400 naming `thread_id`. LangGraph's own savers take any string, so a
graph may be given an id memoryadmin cannot keep (`user/42`, `a b`, `ü`, `x\\n`, a 65th
character): the client refuses it at once, with `MemoryAdminInvalid` naming
`thread_id`, rather than send requests that cannot succeed (a read would find nothing
and a graph would run from an empty state before its first write is refused).
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote

from .errors import MemoryAdminInvalid

THREAD_ID_MAX = 64
THREAD_ID_RULE = f'1 to {THREAD_ID_MAX} characters of A-Z a-z 0-9 _ . : @ $ -, and not "search", "." or ".."'
# The server's rule (sessions_app.threads.models.THREAD_ID_RE); \Z, not $, so no trailing newline slips by.
# "." and ".." are refused: browsers and HTTP clients resolve them as path steps.
THREAD_ID_RE = re.compile(r"(?!(?:search|\.|\.\.)\Z)[A-Za-z0-9_.:@$-]{1,64}\Z")


def thread_id_checked(value: Any) -> str:
    """The thread id as the server will read it, or `MemoryAdminInvalid` naming `thread_id`.

    Ints and UUIDs are taken as their text, as LangGraph does with a thread id
    that is not a string.
    """
    if isinstance(value, bytes | bytearray | bool) or value is None:
        text = None
    else:
        text = str(value)
    if text is None or not THREAD_ID_RE.match(text):
        problem = f"thread_id must be {THREAD_ID_RULE}; got {value!r}."
        raise MemoryAdminInvalid(
            400,
            {"code": "invalid", "detail": problem, "errors": {"thread_id": [f"must be {THREAD_ID_RULE}."]}},
            message=f"refused before any request: {problem}",
        )
    return text


def path_segment(value: Any) -> str:
    """`value` as one URL path segment: every reserved character percent-encoded.

    A segment of dots only (`.`, `..`) is encoded too: httpx would otherwise read it
    as a relative step and send the request to another path.
    """
    quoted = quote(str(value), safe="")
    return "%2E" * len(quoted) if quoted and set(quoted) == {"."} else quoted


__all__ = ["THREAD_ID_MAX", "THREAD_ID_RULE", "path_segment", "thread_id_checked"]
