"""The OpenAPI schema of the graph endpoints says what the server accepts: what it compiles
fits the schema, and what it refuses with a 400 does not."""

from __future__ import annotations

import re

import pytest
from jsonschema import Draft4Validator

from graphs_app.api.serializers import NAME_PATTERN
from graphs_app.compiler import MAX_ID_LENGTH
from graphs_app.specs import name_validate
from memoryadmin.errors import InvalidInput

from .helpers import APPROVAL_INTERRUPT, BROKEN, HOSTILE, LANGGRAPH_EXPORT, REACT_AGENT, RESEARCH_FANOUT, SEED_SUBGRAPH, chain

pytestmark = pytest.mark.django_db

COMPILE = "/api/v1/graphs/compile"


@pytest.fixture
def components(client):
    return client.get("/api/schema/?format=json").json()["components"]


def validator(components, name: str) -> Draft4Validator:
    # OpenAPI 3.0 schemas are JSON Schema draft 4 plus `nullable`, which no case here uses.
    return Draft4Validator({"$ref": f"#/components/schemas/{name}", "components": components})


@pytest.mark.parametrize(
    "spec",
    [SEED_SUBGRAPH, REACT_AGENT, RESEARCH_FANOUT, APPROVAL_INTERRUPT, BROKEN, HOSTILE, LANGGRAPH_EXPORT, chain(3)],
)
def test_what_the_server_compiles_fits_the_schema(alice_api, components, spec):
    assert validator(components, "GraphCompileRequestRequest").is_valid({"spec": spec})
    assert alice_api.post(COMPILE, {"spec": spec}, format="json").status_code == 200


@pytest.mark.parametrize(
    "spec",
    [
        None,
        [],
        {},
        {"nodes": "a"},
        {"nodes": [{"id": 5}]},
        {"nodes": [{"id": "a" * (MAX_ID_LENGTH + 1)}]},
        {"nodes": [{"id": "a", "subgraph": "b"}]},
        {"nodes": [], "edges": [{"source": "__start__"}]},
        {"nodes": [], "edges": [{"source": "__start__", "target": "__end__", "targets": {"x": "__end__"}}]},
        {"nodes": [], "edges": [{"source": "__start__", "condition": "c", "targets": {}}]},
        {"nodes": [], "edges": [{"source": "__start__", "targets": {"x": "__end__"}}]},
        {"nodes": [], "edges": [{"source": "__start__", "condition": "c", "targets": {"x": "__end__"}, "parallel": "yes"}]},
        {"nodes": [], "interrupt_before": [1]},
        {"nodes": [{"id": "__start__", "type": "schema"}], "edges": [{"source": 1.5, "target": "a"}]},
        {"nodes": [{"id": 2**64, "type": "runnable"}]},
    ],
)
def test_what_the_server_refuses_the_schema_refuses(alice_api, components, spec):
    assert not validator(components, "GraphCompileRequestRequest").is_valid({"spec": spec})
    response = alice_api.post(COMPILE, {"spec": spec}, format="json")
    assert response.status_code == 400 and any(field.startswith("spec") for field in response.json()["errors"])


def test_an_update_needs_a_name_a_spec_or_both(alice_api, components):
    update = validator(components, "GraphUpdateRequest")
    assert not update.is_valid({}) and not update.is_valid({"title": "x"})
    assert update.is_valid({"name": "n"}) and update.is_valid({"spec": REACT_AGENT})


@pytest.mark.parametrize(
    "name", ["a", " a ", "", "   ", "a" * 100, "a" * 101, " " + "a" * 100 + " ", "a\x01b", "tab\there", "x\u3000y", "\u3000x\u3000"]
)
def test_the_name_pattern_is_the_name_rule(name):
    try:
        name_validate(name)
        accepted = True
    except InvalidInput:
        accepted = False
    assert bool(re.search(NAME_PATTERN, name)) is accepted
