"""Schema-driven fuzzing: every operation of /api/schema/, generated inputs, real API keys.

No input may produce a 500, and every answer must conform to the schema
(status code documented, body matching its schema, content type).
"""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, settings

from memoryadmin.wsgi import application

schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", application)
# NUL characters are refused by design (PostgreSQL cannot store them) and tested on
# their own; generating them everywhere would only re-test that one rule.
schema.config.generation.update(allow_x00=False)


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
    # A random If-Match is rightly a 412; optimistic concurrency has its own tests.
    if case.headers:
        case.headers.pop("If-Match", None)
    case.call_and_validate(headers=auth_headers)
