"""Schema-driven fuzzing: every operation of /api/schema/, generated inputs, real API keys.

No input may produce a 500, and every answer must conform to the schema
(status code documented, body matching its schema, content type).
"""

from __future__ import annotations

import json
from urllib.parse import quote

import pytest
import schemathesis
from hypothesis import HealthCheck, settings

from memoryadmin.wsgi import application

schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", application)
# NUL characters are refused by design (PostgreSQL cannot store them) and tested on
# their own; generating them everywhere would only re-test that one rule.
schema.config.generation.update(allow_x00=False)
# A generated body larger than MEMORYADMIN_MAX_BODY_BYTES is refused unread with a 413, the
# API's answer to any such body (docs/api.md): a rejection of bad input like a 400.
_rejection = schema.config.checks.negative_data_rejection
_rejection.expected_statuses = [*_rejection.expected_statuses, "413"]


@pytest.fixture(autouse=True)
def keep_the_test_connection():
    """Calls go straight into the WSGI app, which closes connections when a request ends;
    the test's own connection (and its transaction) must survive, as Django's test client ensures."""
    from django.core.signals import request_finished, request_started
    from django.db import close_old_connections

    for signal in (request_started, request_finished):
        signal.disconnect(close_old_connections)
    yield
    for signal in (request_started, request_finished):
        signal.connect(close_old_connections)


@pytest.fixture
def auth_headers(db):
    from memoryadmin.apikeys import apikey_create
    from sessions_app.threads.services import thread_save_agent_state

    from ..conftest import make_user

    user = make_user("fuzzer")
    thread_save_agent_state(
        actor=user, thread_id="fuzz", agent_code="bot", context=[{"role": "user", "content": "hello"}]
    )
    return {"Authorization": f"Bearer {apikey_create(owner=user).plaintext}"}


@schema.parametrize()
@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_the_api_answers_every_generated_request_within_its_schema(case, auth_headers):
    # A random If-Match is rightly a 412, and so are If-None-Match: * on a thread the case
    # made and a random chain head; a random cursor is rightly a 400 (a cursor is what a
    # page's next or previous link gave): each has its own tests, the cursors below too.
    if case.headers:
        case.headers.pop("If-Match", None)
        case.headers.pop("If-None-Match", None)
    if isinstance(case.body, dict) and isinstance(case.body.get("head"), str) and case.operation.path.endswith("/append"):
        del case.body["head"]
    if case.query:
        case.query.pop("cursor", None)
    # A date range that ends before it starts is rightly a 400 naming its end, a rule between
    # two fields that a schema cannot state (tests/sessions_app/test_triage.py): a valid case
    # keeps one end of each range.
    generation = getattr(case.meta, "generation", None)
    if getattr(getattr(generation, "mode", None), "value", None) == "positive":
        for given in (case.query, case.body):
            if isinstance(given, dict):
                for field in ("created", "updated"):
                    if given.get(f"{field}_from") is not None:
                        given.pop(f"{field}_to", None)
    case.call_and_validate(headers=auth_headers)


# Inputs the generator does not reach (NUL is switched off above; the schema's patterns keep
# it from trailing newlines and path steps): ids that only look valid, NUL, forged cursors.
# "." and ".." go in bodies only: in a path, the client resolves them before sending.
BAD_IDS = ["x\n", "x" * 64 + "\n", ".", "..", "a\x00b", "t1\r"]
PATH_STEPS = {".", ".."}
BAD_CURSORS = ["cD1hYmM=", "cD05OTk5OTk5OTk5OTk5OTk5OTk5OTk5OQ==", "bz14", "a", "é"]
BAD_TEXT = ["b\x00t", "\x00"]
VALID_PATH = {"thread_id": "fuzz", "checkpoint_id": "cp-1", "graph_id": 1}
ID_FIELDS = ("thread_id", "checkpoint_id", "parent_checkpoint_id", "thread_ids")
TEXT_FIELDS = ("agent_code", "run_ids")
CONTEXT = [{"role": "user", "content": "hello"}]


def crafted_cases(operation):
    """(what, path parameters, query, body) of the hand-made cases for one operation."""
    names = {parameter.name for parameter in operation.path_parameters}
    query = {parameter.name for parameter in operation.query}
    path = {name: VALID_PATH[name] for name in names}
    for name in sorted(names & {"thread_id", "checkpoint_id"}):
        for bad in BAD_IDS:
            if bad not in PATH_STEPS:
                yield f"{name}={bad!r}", {**path, name: bad}, None, None
    if "cursor" in query:
        for bad in BAD_CURSORS:
            yield f"cursor={bad!r}", path, {"cursor": bad}, None
    if operation.body:
        properties = set()
        for alternative in operation.body:
            properties |= set((alternative.definition.get("schema") or {}).get("properties") or {})
        # Ids are refused when they only look like one; free text (agent codes, run ids) when
        # it holds what the database cannot store. The rest of the body is a valid one.
        for field in sorted(properties & {*ID_FIELDS, *TEXT_FIELDS}):
            for bad in (BAD_IDS + BAD_TEXT) if field in ID_FIELDS else BAD_TEXT:
                value = [bad] if field in ("run_ids", "thread_ids") else bad
                yield f"{field}={bad!r}", path, None, {"agent_code": "bot", "context": CONTEXT, field: value}



def test_crafted_ids_text_and_cursors_get_a_documented_4xx(auth_headers):
    from schemathesis.checks import not_a_server_error
    from schemathesis.core.failures import FailureGroup
    from schemathesis.specs.openapi.checks import (
        content_type_conformance,
        response_schema_conformance,
        status_code_conformance,
    )

    sent, failures = 0, []
    for result in schema.get_all_operations():
        operation = result.ok()
        for what, path, query, body in crafted_cases(operation):
            kwargs = {"path_parameters": path, "query": query}
            if body is not None:
                kwargs.update(body=body, media_type="application/json")
            case = operation.Case(**{k: v for k, v in kwargs.items() if v is not None})
            response = case.call(headers=auth_headers)
            sent += 1
            try:
                case.validate_response(
                    response, checks=[not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
                )
            except FailureGroup as exc:
                failures.append(f"{operation.label} {what}: {str(exc).splitlines()[2:5]}")
                continue
            if not 400 <= response.status_code < 500:
                failures.append(f"{operation.label} {what}: {response.status_code}")
    assert not failures, "\n".join(failures)
    assert sent > 150

def _wrapped(depth: int) -> list:
    value: list = []
    for _ in range(depth - 1):
        value = [value]
    return value


# JSON that used to turn reads into 500s: deeper than metadata may be, deeper than a body may
# be (in the range that was stored and then broke every read of it), and numbers jsonb gives
# back changed (or that orjson alone reads as floats).
HOSTILE = {
    "numbers": {"a": 1e16, "b": 1.5e17, "c": -0.0, "d": 1e20, "e": 2**70, "f": -(2**63), "g": 5e-324},
    "deep": {"v": _wrapped(70)},
    # Last, so that what is read back as the latest (agent state, the thread's values) is it.
    "deeper": {"v": _wrapped(600)},
}
# Reads over everything the fuzzer's user holds: whatever a hostile body managed to store.
READS = (
    ("post", "/api/v1/threads/search", '{"limit": 1000}'),
    ("post", "/api/v1/store/items/search", '{"limit": 1000}'),
)


# Generated examples only (no coverage phase): the hostile parts are what this test adds.
hostile_schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", application)
hostile_schema.config.generation.update(allow_x00=False)
hostile_schema.config.phases.update(phases=["fuzzing"])


def _with(body, hostile):
    """The generated body with `hostile` added to each object it holds, and where
    the body carries what is stored and read back (agent state, a checkpoint's values), there."""
    if not isinstance(body, dict):
        return body
    out = {key: _with(value, hostile) if isinstance(value, dict) else value for key, value in body.items()}
    out["x"] = hostile
    if "context" in out:
        out["extra_state"] = {"x": hostile}
    if isinstance(out.get("checkpoint"), dict):
        out["checkpoint"]["channel_values"] = {"x": hostile}
    return out


# The numbers as every read must give them back: the same doubles and integers (-0.0 as 0.0).
NUMBERS_BACK = {key: (type(value).__name__, repr(0.0 if value == 0 else value)) for key, value in HOSTILE["numbers"].items()}
# What a read may answer at most: stored JSON is cut at 200 levels, plus the answer's own.
ANSWER_DEPTH_MAX = 210


def _walk(answer) -> tuple[int, list[dict]]:
    """How deep an answer is, and the objects in it holding exactly the hostile numbers' keys."""
    deepest, found = 0, []
    stack = [(answer, 1)] if isinstance(answer, dict | list) else []
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if isinstance(item, dict) and item.keys() == HOSTILE["numbers"].keys():
            found.append(item)
        stack.extend((inner, depth + 1) for inner in (item.values() if isinstance(item, dict) else item) if isinstance(inner, dict | list))
    return deepest, found


def _reads(client, headers) -> list[tuple[str, str, str | None]]:
    """Reads over everything the fuzzer's user holds, each of its threads' state included."""
    listed = client.get("/api/v1/threads?limit=500", headers=headers)
    assert listed.status_code == 200, listed.data[:200]
    ids = [row["thread_id"] for row in json.loads(listed.data)["results"]]
    per_thread = [
        read
        for thread_id in ids
        for read in (
            ("post", f"/api/v1/threads/{quote(thread_id, safe='')}/history", '{"limit": 100}'),
            ("get", f"/api/v1/threads/{quote(thread_id, safe='')}/agent-state", None),
        )
    ]
    return [*READS, *per_thread]


@hostile_schema.parametrize()
@settings(max_examples=2, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_deep_json_and_edge_numbers_in_any_body_never_make_a_500(case, auth_headers):
    from schemathesis.specs.openapi.checks import positive_data_acceptance
    from werkzeug.test import Client as WerkzeugClient

    if case.headers:
        # The fuzzer's own key only: a generated one is a 401 before the body is looked at.
        for name in ("If-Match", "X-Api-Key", "Authorization"):
            case.headers.pop(name, None)
    if not isinstance(case.body, dict | list):
        return
    generated = case.body
    for hostile in HOSTILE.values():
        case.body = _with(generated, hostile)
        # Refusing such a body is right (a 400 naming the field); failing on it is not.
        case.call_and_validate(headers=auth_headers, excluded_checks=[positive_data_acceptance])
    # Nor may anything it stored make a later read fail, answer JSON nested without bound, or
    # give the numbers back changed. (Straight into the WSGI app as the calls
    # above: Django's test client would reconnect the signal that closes the test's connection.)
    client = WerkzeugClient(application)
    for method, url, body in _reads(client, auth_headers):
        response = client.open(url, method=method.upper(), data=body, headers={**auth_headers, "Content-Type": "application/json"})
        assert response.status_code == 200, (case.operation.label, url, response.data[:200])
        depth, numbers = _walk(json.loads(response.data))
        assert depth <= ANSWER_DEPTH_MAX, (case.operation.label, url, depth)
        for found in numbers:
            assert {key: (type(value).__name__, repr(value)) for key, value in found.items()} == NUMBERS_BACK, (url, found)
