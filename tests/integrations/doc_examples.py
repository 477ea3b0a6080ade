"""The HTTP examples of a doc page, read and run against a live server, so a page cannot drift from the API.

A page writes each example as two fenced `http` blocks, a request then its answer:

    ```http                               ```http
    POST /api/v1/threads/wf-1/checkpoints  HTTP/1.1 201 Created
    Authorization: Bearer {key}            ETag: {etag}
    Content-Type: application/json
                                           {"checkpoint_id": "cp-1", "created_at": "…"}
    {"checkpoint_id": "cp-1", …}           ```
    ```

The rules of the comparison (D1–D4):

D1. `{name}` in a request is replaced by a value: an API key the test made, or
    a value remembered from an earlier answer.
D2. The answer's status must be the one shown, and each header shown must be
    there with that value.
D3. The answer's JSON must hold every field shown, recursively; fields not shown
    may be there too. Lists must have the length shown.
D4. `"…"` matches any value; a string `{name}` (a whole JSON string, or a whole
    header value) matches anything the first time and is remembered, and must
    be equal when it appears again.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

BLOCK = re.compile(r"^```http\n(.*?)^```", re.M | re.S)
PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")
ANY = "…"


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: str


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: Any
    has_body: bool


@dataclass
class Example:
    line: int
    request: Request
    answer: Answer


@dataclass
class Memory:
    """The values the examples are filled with (rule D1) and remember (rule D4)."""

    values: dict[str, str] = field(default_factory=dict)

    def fill(self, text: str) -> str:
        def value(match: re.Match) -> str:
            name = match.group(1)
            if name not in self.values:
                raise AssertionError(f"{{{name}}} is used before any answer gave it")
            return self.values[name]

        return PLACEHOLDER.sub(value, text)


def _head_and_body(text: str) -> tuple[list[str], str]:
    head, _, body = text.partition("\n\n")
    return [line for line in head.splitlines() if line.strip()], body.strip()


def _headers(lines: list[str]) -> dict[str, str]:
    headers = {}
    for line in lines:
        name, _, value = line.partition(":")
        headers[name.strip()] = value.strip()
    return headers


def examples_of(*, page: Path) -> list[Example]:
    """Every request/answer pair of a page, in order; a lone or misplaced block is an error."""
    text = page.read_text(encoding="utf-8")
    blocks = [(text.count("\n", 0, match.start()) + 1, match.group(1)) for match in BLOCK.finditer(text)]
    if len(blocks) % 2:
        raise AssertionError(f"{page.name}: {len(blocks)} http blocks; each request needs its answer")
    examples = []
    for (line, request_text), (answer_line, answer_text) in zip(blocks[::2], blocks[1::2]):
        lines, body = _head_and_body(request_text)
        method, _, path = lines[0].partition(" ")
        if not method.isupper() or not path.startswith("/"):
            raise AssertionError(f"{page.name}:{line}: a request starts with METHOD /path, not {lines[0]!r}")
        answer_lines, answer_body = _head_and_body(answer_text)
        status = re.match(r"HTTP/1\.1 (\d{3})\b", answer_lines[0])
        if not status:
            raise AssertionError(f"{page.name}:{answer_line}: an answer starts with HTTP/1.1 <status>, not {answer_lines[0]!r}")
        examples.append(
            Example(
                line=line,
                request=Request(method, path.strip(), _headers(lines[1:]), body),
                answer=Answer(
                    int(status.group(1)),
                    _headers(answer_lines[1:]),
                    json.loads(answer_body) if answer_body else None,
                    bool(answer_body),
                ),
            )
        )
    return examples


def _match_value(expected: str, actual: Any, memory: Memory, where: str) -> None:
    whole = PLACEHOLDER.fullmatch(expected)
    if expected == ANY:
        return
    if whole:
        name = whole.group(1)
        if name in memory.values:
            assert actual == memory.values[name], f"{where}: {actual!r} is not the {{{name}}} seen before"
        else:
            memory.values[name] = actual
        return
    assert actual == expected, f"{where}: {actual!r} != {expected!r}"


def match(expected: Any, actual: Any, memory: Memory, where: str = "body") -> None:
    """`actual` holds what `expected` shows (rules D3, D4)."""
    if isinstance(expected, str):
        _match_value(expected, actual, memory, where)
    elif isinstance(expected, dict):
        assert isinstance(actual, dict), f"{where}: {actual!r} is not an object"
        for key, value in expected.items():
            assert key in actual, f"{where}: no field {key!r} in {sorted(actual)}"
            match(value, actual[key], memory, f"{where}.{key}")
    elif isinstance(expected, list):
        assert isinstance(actual, list) and len(actual) == len(expected), f"{where}: {actual!r} is not {len(expected)} long"
        for index, (item, got) in enumerate(zip(expected, actual)):
            match(item, got, memory, f"{where}[{index}]")
    else:
        assert type(actual) is type(expected) and actual == expected, f"{where}: {actual!r} != {expected!r}"


def run_example(*, example: Example, base_url: str, memory: Memory, client: httpx.Client) -> None:
    """Send one example's request and hold its answer to what the page shows (rules D1–D4)."""
    request = example.request
    headers = {name: memory.fill(value) for name, value in request.headers.items()}
    response = client.request(
        request.method,
        base_url.rstrip("/") + memory.fill(request.path),
        headers=headers,
        content=memory.fill(request.body).encode() if request.body else None,
    )
    where = f"line {example.line}: {request.method} {request.path}"
    expected = example.answer
    assert response.status_code == expected.status, f"{where}: {response.status_code} {response.text[:300]}"
    for name, value in expected.headers.items():
        assert name in response.headers, f"{where}: no {name} header"
        _match_value(value, response.headers[name], memory, f"{where}: {name}")
    if expected.has_body:
        match(expected.body, response.json(), memory, where)
