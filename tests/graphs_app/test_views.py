"""Graph pages: list, editor, live preview fragment, LangGraph paste, rename; escaping; queries."""

from __future__ import annotations

import json
import re

import pytest

from graphs_app.models import GraphDefinition
from sessions_app.threads.services import thread_save_agent_state

from ..conftest import login_client
from .helpers import BROKEN, HOSTILE, LANGGRAPH_EXPORT, REACT_AGENT, SEED_SUBGRAPH, chain, save

pytestmark = pytest.mark.django_db


def test_the_list_shows_a_members_own_graphs_and_a_new_graph_link(client, alice, bob):
    save(alice, "react")
    save(bob, "bobs-graph")
    body = login_client(client, alice).get("/graphs/").content.decode()
    assert "react" in body and "bobs-graph" not in body
    assert 'href="/graphs/new/"' in body and "New graph" in body
    assert '<a href="/graphs/"' in body  # the nav link appears once the url name exists


def test_operators_see_everyones_graphs_with_owners(client, alice, bob, operator):
    save(alice, "react")
    save(bob, "bobs-graph", BROKEN)
    body = login_client(client, operator).get("/graphs/").content.decode()
    assert "react" in body and "bobs-graph" in body and "<th>Owner</th>" in body
    assert "has errors" in body and "Try a graph" in body


def test_the_list_search_returns_the_table_fragment_for_htmx(client, alice):
    save(alice, "react-agent")
    save(alice, "pipeline")
    login_client(client, alice)
    response = client.get("/graphs/?q=react", HTTP_HX_REQUEST="true", HTTP_HX_TARGET="graph-table")
    body = response.content.decode()
    assert body.lstrip().startswith('<div id="graph-table">') and "<html" not in body
    assert "react-agent" in body and "pipeline" not in body


@pytest.mark.parametrize("count", [5, 50])
def test_the_list_page_takes_the_same_queries_at_any_size(client, alice, count, django_assert_num_queries):
    for i in range(count):
        save(alice, f"g{i}", chain(30))
    login_client(client, alice)
    # session, user, role, the page of graphs
    with django_assert_num_queries(4):
        response = client.get("/graphs/")
    assert response.status_code == 200 and response.content.decode().count("/graphs/") > count


def test_the_editor_shows_the_spec_the_diagrams_and_the_tables(client, alice):
    graph = save(alice, "seed", SEED_SUBGRAPH)
    login_client(client, alice)
    response = client.get(f"/graphs/{graph.pk}/")
    body = response.content.decode()
    assert response.status_code == 200
    assert '<textarea name="spec"' in body and "&quot;subgraph&quot;" in body
    # Schema keys first, on PostgreSQL too (jsonb hands keys back sorted by length).
    assert body.index("&quot;nodes&quot;") < body.index("&quot;edges&quot;")
    assert body.index("&quot;id&quot;: &quot;B&quot;") < body.index("&quot;subgraph&quot;")
    assert 'hx-trigger="input changed delay:400ms"' in body and 'hx-post="/graphs/preview"' in body
    assert body.count('<pre class="mermaid"') == 2 and "flowchart TD" in body
    assert "__parallel__B-D" in body and "Inserted parallel nodes" in body
    assert 'data-node="B-D"' in body and "Before compilation" in body and "After compilation" in body
    assert "vendor/mermaid/mermaid.min.js" in body and "js/graphs.js" in body
    assert "Rename" in body and "Delete" in body and 'value="save"' in body


def test_graph_pages_allow_mermaids_inline_styles_but_never_inline_scripts(client, alice):
    graph = save(alice, "g")
    thread_save_agent_state(actor=alice, thread_id="t1", agent_code="g", context=[{"role": "user", "content": "hi"}])
    login_client(client, alice)
    for url in (f"/graphs/{graph.pk}/", "/graphs/new/", "/graphs/thread/t1/"):
        policy = client.get(url)["Content-Security-Policy"]
        directives = dict(d.strip().split(" ", 1) for d in policy.split(";") if d.strip())
        assert "'unsafe-inline'" in directives["style-src"], url
        assert directives["script-src"] == "'self'" and "unsafe-eval" not in policy
    assert "unsafe-inline" not in client.get("/graphs/")["Content-Security-Policy"]


def test_the_preview_fragment_shows_errors_on_their_nodes(client, alice):
    login_client(client, alice)
    response = client.post("/graphs/preview", {"spec": json.dumps(BROKEN)}, HTTP_HX_REQUEST="true")
    body = response.content.decode()
    assert response.status_code == 200 and "<html" not in body
    assert "error" in body and 'class="graph-errors"' in body
    assert '<li data-node="summarise"' in body and '<li data-node="orphan"' in body
    assert '<code class="node-ref in-graph">orphan</code>' in body
    assert '<code class="node-ref">summarise</code>' in body  # an unknown node: not in the diagram
    assert 'tr data-node="stuck" class="has-error' in body
    assert "classDef error" in body  # the faulty nodes are styled in the diagram too


def test_the_preview_explains_junk_with_a_200(client, alice):
    login_client(client, alice)
    for text, expected in (("{not json", "not JSON"), ('{"nodes": [1]}', "spec.nodes[0]"), ("", "not JSON")):
        response = client.post("/graphs/preview", {"spec": text}, HTTP_HX_REQUEST="true")
        assert response.status_code == 200 and expected in response.content.decode()


def test_a_large_graph_is_listed_but_not_drawn(client, alice):
    login_client(client, alice)
    body = client.post("/graphs/preview", {"spec": json.dumps(chain(400))}).content.decode()
    assert '<pre class="mermaid"' not in body and "is not drawn" in body and 'data-node="n399"' in body


def test_hostile_ids_are_escaped_in_the_preview_and_the_editor(client, alice):
    graph = save(alice, "hostile", HOSTILE)
    login_client(client, alice)
    preview = client.post("/graphs/preview", {"spec": json.dumps(HOSTILE)}).content.decode()
    page = client.get(f"/graphs/{graph.pk}/").content.decode()
    for body in (preview, page):
        assert "<script>alert(1)" not in body and "<img src=x" not in body and "<b>x</b>" not in body
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body
    assert "</textarea><b>" not in page
    # Inside the Mermaid text the compiler already turned markup into entity codes.
    assert "#60;script#62;" in preview
    # The tooltips' full ids travel as JSON in an attribute, escaped like any attribute.
    labels = re.search(r'data-labels="([^"]*)"', preview).group(1)
    assert "&lt;script&gt;" in labels and "<" not in labels and "&quot;" in labels


def test_agent_named_graphs_are_escaped_in_the_list_and_title(client, alice):
    save(alice, "<script>alert('n')</script>")
    login_client(client, alice)
    body = client.get("/graphs/").content.decode()
    assert "<script>alert('n')" not in body and "&lt;script&gt;alert(&#x27;n&#x27;)&lt;/script&gt;" in body


def test_a_member_creates_a_graph_from_the_new_page(client, alice):
    login_client(client, alice)
    page = client.get("/graphs/new/")
    assert page.status_code == 200 and "&quot;nodes&quot;" in page.content.decode()  # a starter graph
    response = client.post("/graphs/new/", {"name": "fresh", "spec": json.dumps(REACT_AGENT), "action": "save"})
    graph = GraphDefinition.objects.get(name="fresh")
    assert response.status_code == 302 and response["Location"] == f"/graphs/{graph.pk}/"
    assert graph.owner == alice and graph.spec == REACT_AGENT and graph.valid


def test_the_new_page_keeps_the_input_and_names_the_problem(client, alice):
    save(alice, "taken")
    login_client(client, alice)
    junk = client.post("/graphs/new/", {"name": "g", "spec": '{"nodes": [{"id": 3}]}', "action": "save"})
    assert junk.status_code == 400 and "spec.nodes[0].id" in junk.content.decode()
    not_json = client.post("/graphs/new/", {"name": "g", "spec": "{oops", "action": "save"})
    assert not_json.status_code == 400 and "is not JSON" in not_json.content.decode()
    assert "{oops" in not_json.content.decode()
    taken = client.post("/graphs/new/", {"name": "taken", "spec": json.dumps(REACT_AGENT), "action": "save"})
    assert taken.status_code == 409 and "already have a graph" in taken.content.decode()
    assert GraphDefinition.objects.count() == 1


def test_check_without_javascript_previews_without_saving(client, alice):
    login_client(client, alice)
    response = client.post("/graphs/new/", {"name": "g", "spec": json.dumps(BROKEN), "action": "preview"})
    assert response.status_code == 200 and "duplicate_node" in response.content.decode()
    assert not GraphDefinition.objects.exists()


def test_the_owner_saves_a_new_spec_and_renames(client, alice):
    graph = save(alice, "react")
    save(alice, "other")
    login_client(client, alice)
    response = client.post(f"/graphs/{graph.pk}/", {"spec": json.dumps(BROKEN), "action": "save"})
    assert response.status_code == 302
    graph.refresh_from_db()
    assert graph.spec == BROKEN and graph.valid is False
    assert "Saved, with errors to fix." in client.get(f"/graphs/{graph.pk}/").content.decode()
    client.post(f"/graphs/{graph.pk}/rename", {"name": "react-v2"})
    graph.refresh_from_db()
    assert graph.name == "react-v2"
    client.post(f"/graphs/{graph.pk}/rename", {"name": "other"})
    graph.refresh_from_db()
    assert graph.name == "react-v2"
    assert "Not renamed" in client.get(f"/graphs/{graph.pk}/").content.decode()


def test_the_owner_deletes_from_the_page(client, alice):
    graph = save(alice, "react")
    login_client(client, alice)
    response = client.post(f"/graphs/{graph.pk}/delete")
    assert response.status_code == 302 and response["Location"] == "/graphs/"
    assert not GraphDefinition.objects.exists()


def test_pasting_langgraph_json_converts_it_into_the_editor(client, alice):
    login_client(client, alice)
    response = client.post("/graphs/convert", {"langgraph": json.dumps(LANGGRAPH_EXPORT)}, HTTP_HX_REQUEST="true")
    body = response.content.decode()
    assert response.status_code == 200 and body.lstrip().startswith('<div id="spec-source">')
    assert "&quot;condition&quot;: &quot;branch&quot;" in body and "&quot;source&quot;: &quot;__start__&quot;" in body
    assert "&quot;type&quot;" not in body  # LangGraph's node details are dropped
    assert "load" in body  # the swapped textarea asks for a fresh preview
    bad = client.post("/graphs/convert", {"langgraph": "[1]", "spec": "{}"}, HTTP_HX_REQUEST="true").content.decode()
    assert "not LangGraph" in bad and "convert-error" in bad
    # Without JavaScript the whole editor comes back with the converted definition.
    page = client.post("/graphs/convert", {"langgraph": json.dumps(LANGGRAPH_EXPORT), "name": "lg"})
    assert page.status_code == 200 and "<html" in page.content.decode() and 'value="lg"' in page.content.decode()


def test_the_editor_page_takes_a_bounded_number_of_queries(client, alice, django_assert_num_queries):
    graph = save(alice, "big", chain(1500))
    login_client(client, alice)
    # session, user, role, the graph
    with django_assert_num_queries(4):
        assert client.get(f"/graphs/{graph.pk}/").status_code == 200
