"""The graph endpoints: compile, and saved definitions (create, list, read, update, delete)."""

from __future__ import annotations

import pytest

from graphs_app.compiler import MAX_ID_LENGTH, MAX_NODES
from graphs_app.models import GraphDefinition
from graphs_app.specs import MAX_SPEC_BYTES

from .helpers import BROKEN, LANGGRAPH_EXPORT, REACT_AGENT, SEED_SUBGRAPH, chain, save

pytestmark = pytest.mark.django_db

COMPILE = "/api/v1/graphs/compile"
LIST = "/api/v1/graphs"


def detail(graph_id: int) -> str:
    return f"/api/v1/graphs/{graph_id}"


# ------------------------------------------------------------------------- compile


def test_it_compiles_the_seed_example_as_in_the_design(alice_api):
    response = alice_api.post(COMPILE, {"spec": SEED_SUBGRAPH}, format="json")
    assert response.status_code == 200
    body = response.json()
    assert body["valid"] is True and body["errors"] == []
    assert body["flattened"] == {
        "__start__": ["A"],
        "A": ["B-D"],
        "B-D": ["B-E", "B-F"],
        "B-E": ["B-G"],
        "B-F": ["B-G"],
        "B-G": ["C"],
        "C": ["__end__"],
        "__end__": [],
    }
    assert body["compiled"]["B-D"] == ["__parallel__B-D"]
    assert body["compiled"]["__parallel__B-D"] == ["B-G"]
    assert body["inserted_nodes"] == ["__parallel__B-D"]
    assert body["parallel_nodes"]["__parallel__B-D"]["branches"] == ["B-E", "B-F"]
    assert set(body["mermaid"]) == {"source", "compiled"}
    assert body["mermaid"]["compiled"].startswith("flowchart TD")
    assert {"interrupt_before", "interrupt_after"} <= set(body)


def test_an_invalid_graph_is_a_200_with_named_errors(alice_api):
    response = alice_api.post(COMPILE, {"spec": BROKEN}, format="json")
    assert response.status_code == 200
    body = response.json()
    assert body["valid"] is False
    found = {(e["code"], e.get("node")) for e in body["errors"]}
    assert ("duplicate_node", "fetch") in found
    assert ("unknown_node", "summarise") in found
    assert ("unreachable", "orphan") in found
    assert ("no_path_to_end", "stuck") in found
    assert ("unknown_interrupt", "publish") in found
    unknown = next(e for e in body["errors"] if e["code"] == "unknown_node")
    assert unknown["edge"] == {"source": "parse", "target": "summarise"}
    assert all(e["message"] for e in body["errors"])
    # What could be built is still there for the preview.
    assert body["flattened"]["__start__"] == ["fetch"]


def test_it_reads_langgraph_json(alice_api):
    body = alice_api.post(COMPILE, {"spec": LANGGRAPH_EXPORT}, format="json").json()
    assert body["valid"] is True
    assert body["flattened"] == {"__start__": ["agent"], "agent": ["__end__", "tools"], "tools": ["agent"], "__end__": []}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ([1, 2], "body"),
        ("just a string", "body"),
        ({}, "spec"),
        ({"graph": {}}, "spec"),
        ({"spec": None}, "spec"),
        ({"spec": "nodes"}, "spec"),
        ({"spec": {"edges": []}}, "spec.nodes"),
        ({"spec": {"nodes": [1]}}, "spec.nodes[0]"),
        ({"spec": {"nodes": [{"id": 7}]}}, "spec.nodes[0].id"),
        ({"spec": {"nodes": [], "edges": [{"source": "a"}]}}, "spec.edges[0]"),
        ({"spec": {"nodes": [], "edges": [{"source": "a", "targets": {}}]}}, "spec.edges[0].targets"),
        ({"spec": {"nodes": [{"id": "x" * (MAX_ID_LENGTH + 1)}]}}, "spec.nodes[0].id"),
    ],
)
def test_junk_is_a_400_naming_the_field(alice_api, body, field):
    response = alice_api.post(COMPILE, body, format="json")
    assert response.status_code == 400
    answer = response.json()
    assert answer["code"] == "invalid" and field in answer["errors"], answer


@pytest.mark.parametrize("raw", [b"{not json", b"[" * 5000 + b"]" * 5000, b'{"spec": NaN}'])
def test_unparsable_bodies_are_a_400(alice_api, raw):
    response = alice_api.generic("POST", COMPILE, raw, content_type="application/json")
    assert response.status_code == 400 and response.json()["code"] == "parse_error"


def test_a_huge_graph_is_refused_and_the_largest_allowed_compiles(alice_api):
    too_big = alice_api.post(COMPILE, {"spec": chain(MAX_NODES + 1)}, format="json")
    assert too_big.status_code == 400
    assert f"spec.nodes[{MAX_NODES}]" in too_big.json()["errors"]
    largest = alice_api.post(COMPILE, {"spec": chain(MAX_NODES)}, format="json")
    assert largest.status_code == 200 and largest.json()["valid"] is True
    assert len(largest.json()["flattened"]) == MAX_NODES + 2


def test_deep_subgraphs_are_an_error_not_a_crash(alice_api):
    spec: dict = {"nodes": [{"id": "x"}], "edges": [{"source": "__start__", "target": "x"}, {"source": "x", "target": "__end__"}]}
    for _ in range(40):
        spec = {
            "nodes": [{"id": "x", "subgraph": spec}],
            "edges": [{"source": "__start__", "target": "x"}, {"source": "x", "target": "__end__"}],
        }
    body = alice_api.post(COMPILE, {"spec": spec}, format="json").json()
    assert body["valid"] is False and any(e["code"] == "too_deep" for e in body["errors"])


def test_compiling_needs_credentials_and_writes_nothing(anon_api, operator_api):
    assert anon_api.post(COMPILE, {"spec": REACT_AGENT}, format="json").status_code == 401
    assert operator_api.post(COMPILE, {"spec": REACT_AGENT}, format="json").status_code == 200
    assert not GraphDefinition.objects.exists()


# --------------------------------------------------------------------- definitions


def test_it_saves_lists_reads_updates_and_deletes_a_graph(alice_api, alice):
    created = alice_api.post(LIST, {"name": "react", "spec": REACT_AGENT}, format="json")
    assert created.status_code == 201
    body = created.json()
    assert body["name"] == "react" and body["owner"] == "alice" and body["spec"] == REACT_AGENT
    assert body["valid"] is True and body["node_count"] == 2 and body["compile"]["valid"] is True
    graph_id = body["id"]

    listed = alice_api.get(LIST).json()
    assert [g["name"] for g in listed["results"]] == ["react"]
    assert "spec" not in listed["results"][0]

    read = alice_api.get(detail(graph_id)).json()
    # PostgreSQL's jsonb keeps no key order, so the outcomes of a condition may come back reordered.
    assert read["spec"] == REACT_AGENT and sorted(read["compile"]["flattened"]["agent"]) == ["__end__", "tools"]

    renamed = alice_api.put(detail(graph_id), {"name": "react-v2"}, format="json")
    assert renamed.status_code == 200 and renamed.json()["name"] == "react-v2"
    assert renamed.json()["spec"] == REACT_AGENT  # a key left out is kept

    replaced = alice_api.put(detail(graph_id), {"spec": SEED_SUBGRAPH}, format="json").json()
    assert replaced["name"] == "react-v2" and replaced["node_count"] == 6
    assert replaced["compile"]["inserted_nodes"] == ["__parallel__B-D"]

    assert alice_api.delete(detail(graph_id)).status_code == 204
    assert alice_api.get(detail(graph_id)).status_code == 404
    assert not GraphDefinition.objects.exists()


def test_an_invalid_but_well_formed_graph_is_stored_with_its_errors(alice_api):
    response = alice_api.post(LIST, {"name": "draft", "spec": BROKEN}, format="json")
    assert response.status_code == 201
    body = response.json()
    assert body["valid"] is False and body["compile"]["errors"]
    assert GraphDefinition.objects.get(name="draft").valid is False
    assert alice_api.get(LIST).json()["results"][0]["valid"] is False


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"spec": REACT_AGENT}, "name"),
        ({"name": "   ", "spec": REACT_AGENT}, "name"),
        ({"name": "x" * 101, "spec": REACT_AGENT}, "name"),
        ({"name": "tab\there", "spec": REACT_AGENT}, "name"),
        ({"name": 12, "spec": REACT_AGENT}, "name"),
        ({"name": "g"}, "spec"),
        ({"name": "g", "spec": [1]}, "spec"),
        ({"name": "g", "spec": {"nodes": [{"id": None}]}}, "spec.nodes[0].id"),
        ({"name": "g", "spec": {**REACT_AGENT, "notes": "a\u0000b"}}, "spec.notes"),
        ({"name": "g", "spec": {**REACT_AGENT, "notes": "x" * MAX_SPEC_BYTES}}, "spec"),
    ],
)
def test_saving_junk_is_a_400_naming_the_field_and_stores_nothing(alice_api, body, field):
    response = alice_api.post(LIST, body, format="json")
    assert response.status_code == 400
    assert field in response.json()["errors"], response.json()
    assert not GraphDefinition.objects.exists()


def test_a_nul_in_a_node_id_is_refused_before_the_database_sees_it(alice_api):
    spec = {"nodes": [{"id": "a\u0000"}], "edges": [{"source": "__start__", "target": "a\u0000"}]}
    response = alice_api.post(LIST, {"name": "nul", "spec": spec}, format="json")
    assert response.status_code == 400 and "spec.nodes[0].id" in response.json()["errors"]
    # Compiling (nothing stored) is fine with it.
    assert alice_api.post(COMPILE, {"spec": spec}, format="json").status_code == 200


def test_a_duplicate_name_is_a_409_and_other_owners_may_reuse_it(alice_api, bob_api):
    assert alice_api.post(LIST, {"name": "react", "spec": REACT_AGENT}, format="json").status_code == 201
    again = alice_api.post(LIST, {"name": " react ", "spec": SEED_SUBGRAPH}, format="json")
    assert again.status_code == 409 and "name" in again.json()["errors"]
    assert GraphDefinition.objects.get(name="react").spec == REACT_AGENT
    assert bob_api.post(LIST, {"name": "react", "spec": REACT_AGENT}, format="json").status_code == 201


def test_renaming_onto_a_taken_name_is_a_409_and_changes_nothing(alice_api, alice):
    save(alice, "one")
    two = save(alice, "two", SEED_SUBGRAPH)
    response = alice_api.put(detail(two.pk), {"name": "one", "spec": REACT_AGENT}, format="json")
    assert response.status_code == 409
    two.refresh_from_db()
    assert two.name == "two" and two.spec == SEED_SUBGRAPH
    # Renaming to its own name is not a conflict.
    assert alice_api.put(detail(two.pk), {"name": "two"}, format="json").status_code == 200


def test_an_update_needs_name_or_spec(alice_api, alice):
    graph = save(alice, "g")
    response = alice_api.put(detail(graph.pk), {"other": 1}, format="json")
    assert response.status_code == 400 and "body" in response.json()["errors"]
    assert alice_api.put(detail(graph.pk), [1], format="json").status_code == 400


def test_a_missing_graph_is_a_404(alice_api):
    for method in ("get", "put", "delete"):
        assert getattr(alice_api, method)(detail(987654), {"name": "x"}, format="json").status_code == 404
    assert alice_api.get(detail(2**70)).status_code == 404


def test_the_list_filters_by_name_and_owner(alice, bob, alice_api, operator_api):
    save(alice, "react-agent")
    save(alice, "pipeline")
    save(bob, "react-bob")
    assert [g["name"] for g in alice_api.get(LIST + "?q=react").json()["results"]] == ["react-agent"]
    everyone = {g["name"] for g in operator_api.get(LIST + "?q=react").json()["results"]}
    assert everyone == {"react-agent", "react-bob"}
    assert [g["name"] for g in operator_api.get(LIST + "?owner=bob").json()["results"]] == ["react-bob"]
    # A member's owner filter does not widen what they see.
    assert {g["owner"] for g in alice_api.get(LIST + "?owner=bob").json()["results"]} <= {"alice"}


@pytest.mark.parametrize("count", [5, 50])
def test_the_list_takes_the_same_queries_at_any_size(alice, alice_api, count, django_assert_num_queries):
    for i in range(count):
        save(alice, f"g{i}", chain(20))
    # key lookup with its owner's role, its last_used_at, the page of graphs (owners joined)
    with django_assert_num_queries(3):
        body = alice_api.get(LIST + "?limit=100").json()
    assert len(body["results"]) == count
