"""The graph editor in a real browser: live preview, Mermaid drawing under the CSP, LangGraph paste,
and a thread drawn on its graph."""

from __future__ import annotations

import json
import re
import pytest
from playwright.sync_api import expect

from memoryadmin.demo import graphs as graphs_demo
from memoryadmin.demo.graphs import BROKEN, REACT_AGENT
from graphs_app.models import GraphDefinition
from graphs_app.services import graph_create

from memoryadmin.management.commands.demo_data import DEMO_USERS

from ..conftest import make_user
from .conftest import shot


def sign_in(page, live_server, username: str, password: str = "memoryadmin") -> None:
    """As conftest's sign_in, but whatever page the sign-in lands on."""
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    page.wait_for_url(lambda url: "/accounts/login/" not in url)

pytestmark = pytest.mark.django_db(transaction=True)

HOSTILE_ID = '"><script>alert(1)</script><img src=x onerror=alert(2)>'


@pytest.fixture
def demo():
    """The demo users and the graph demo alone, so these tests do not depend on other demos."""
    users = {name: make_user(name, role, password="memoryadmin") for name, role in DEMO_USERS}
    graphs_demo.load(users)


def open_editor(page, live_server, name: str) -> None:
    page.goto(f"{live_server.url}/graphs/")
    page.click(f"#graph-table a:text-is('{name}')")
    page.wait_for_selector("#id_spec")


def test_typing_a_change_updates_the_preview_and_mermaid_draws_it(page, live_server, demo):
    sign_in(page, live_server, "alice")
    open_editor(page, live_server, "react-agent")
    diagrams = page.locator("#graph-preview .mermaid-svg svg")
    expect(diagrams).to_have_count(2)
    assert page.locator("#graph-preview pre.mermaid[data-processed=error]").count() == 0

    # Add a critic between the tools and the agent, by typing into the JSON.
    spec = json.loads(page.input_value("#id_spec"))
    spec["nodes"].append({"id": "critic"})
    spec["edges"] = [e for e in spec["edges"] if e.get("source") != "tools"] + [
        {"source": "tools", "target": "critic"},
        {"source": "critic", "target": "agent"},
    ]
    page.fill("#id_spec", "")
    page.locator("#id_spec").press_sequentially(json.dumps(spec), delay=0)
    expect(page.locator("#graph-preview tr[data-node=critic]").first).to_be_visible()
    expect(page.locator("#graph-preview .mermaid-svg svg").first).to_contain_text("critic")
    expect(page.locator("#graph-preview .mermaid-svg svg")).to_have_count(2)
    expect(page.locator(".preview-status")).to_contain_text("Valid")
    shot(page, "graph-editor")

    # Save it: stored, and the page comes back with the message.
    page.click("button[value=save]")
    page.wait_for_selector("text=Saved.")
    assert {"id": "critic"} in GraphDefinition.objects.get(name="react-agent", owner__username="alice").spec["nodes"]
    assert page.errors == []


def test_errors_are_listed_and_marked_on_the_diagram(page, live_server, demo):
    sign_in(page, live_server, "alice")
    page.goto(f"{live_server.url}/graphs/new/")
    page.wait_for_selector("#graph-preview .mermaid-svg svg")
    page.fill("#id_spec", "{ not json")
    expect(page.locator(".preview-status")).to_contain_text("Not a graph yet")
    page.fill("#id_spec", json.dumps(BROKEN, indent=2))
    expect(page.locator(".graph-errors li[data-node=orphan]")).to_be_visible()
    expect(page.locator("#graph-preview .mermaid-svg svg")).to_have_count(2)
    # The faulty nodes carry the error class in the drawing, and pointing at an error
    # highlights its row in the tables.
    assert page.locator("#graph-preview .mermaid-svg svg .node.error").count() >= 3
    page.hover(".graph-errors li[data-node=stuck]")
    expect(page.locator(".adjacency tr.highlighted[data-node=stuck]").first).to_be_visible()
    shot(page, "graph-errors")
    assert page.errors == []


def test_pasting_langgraph_json_fills_the_editor(page, live_server, demo):
    sign_in(page, live_server, "bob")
    page.goto(f"{live_server.url}/graphs/new/")
    page.wait_for_selector("#graph-preview .mermaid-svg svg")
    page.click("summary:has-text('Paste LangGraph JSON')")
    exported = GraphDefinition.objects.get(owner__username="alice", name="langgraph-export").spec
    page.fill("textarea[name=langgraph]", json.dumps(exported))
    page.click("button:has-text('Convert')")
    # (no wait_for_function: the page's CSP refuses the eval Playwright would need)
    expect(page.locator("#id_spec")).to_have_value(re.compile('"condition": "branch"'))
    expect(page.locator("#graph-preview tr[data-node=tools]").first).to_be_visible()
    expect(page.locator("#graph-preview .mermaid-svg svg")).to_have_count(2)
    assert page.errors == []


def test_hostile_ids_stay_text_in_the_editor_and_the_drawing(page, live_server, demo):
    alerts: list[str] = []
    page.on("dialog", lambda dialog: (alerts.append(dialog.message), dialog.dismiss()))
    from django.contrib.auth import get_user_model

    bob = get_user_model().objects.get(username="bob")
    spec = {"nodes": [{"id": HOSTILE_ID}], "edges": [{"source": "__start__", "target": HOSTILE_ID}, {"source": HOSTILE_ID, "target": "__end__"}]}
    graph = graph_create(actor=bob, name="<b>hostile</b>", spec=spec).graph
    sign_in(page, live_server, "bob")
    page.goto(f"{live_server.url}/graphs/{graph.pk}/")
    expect(page.locator("#graph-preview .mermaid-svg svg")).to_have_count(2)
    assert page.inner_text("h1") == "<b>hostile</b>"
    assert HOSTILE_ID in page.inner_text("#graph-preview .adjacency")
    assert page.locator("#graph-preview img").count() == 0 and page.locator("#graph-preview script").count() == 0
    assert alerts == [] and page.errors == []


def test_a_thread_is_drawn_on_its_graph(page, live_server, demo):
    sign_in(page, live_server, "operator")
    page.goto(f"{live_server.url}/threads/launch-post/")
    page.click("dd a:text-is('view')")
    page.wait_for_selector("#thread-graph-panel .mermaid-svg svg")
    assert page.locator("#thread-graph-panel svg .node.current").count() == 1
    assert page.locator("#thread-graph-panel svg .node.visited").count() == 2
    assert page.inner_text(".current-node") == "human_review"
    page.click("#thread-graph-panel a.refresh")
    page.wait_for_selector("#thread-graph-panel .mermaid-svg svg")
    shot(page, "thread-graph")
    assert page.errors == []


def test_operators_try_graphs_out_without_a_save_button(page, live_server, demo):
    sign_in(page, live_server, "operator")
    page.goto(f"{live_server.url}/graphs/new/")
    page.wait_for_selector("#graph-preview .mermaid-svg svg")
    assert page.locator("button[value=save]").count() == 0
    page.fill("#id_spec", json.dumps(REACT_AGENT))
    expect(page.locator("#graph-preview tr[data-node=tools]").first).to_be_visible()
    assert page.errors == []


def view_box(locator) -> list[float]:
    return [float(v) for v in locator.get_attribute("viewBox").split()]


def test_subgraphs_are_drawn_as_named_boxes_and_the_diagram_zooms_and_pans(page, live_server, demo):
    from django.contrib.auth import get_user_model

    alice = get_user_model().objects.get(username="alice")
    research = {
        "nodes": [{"id": "search"}, {"id": "read"}, {"id": "digest"}],
        "edges": [{"source": "__start__", "target": "search"}, {"source": "__start__", "target": "read"},
                  {"source": "search", "target": "digest"}, {"source": "read", "target": "digest"},
                  {"source": "digest", "target": "__end__"}],
    }
    spec = {
        "nodes": [{"id": "plan"}, {"id": "research", "subgraph": research}, {"id": "write"}],
        "edges": [{"source": "__start__", "target": "plan"}, {"source": "plan", "target": "research"},
                  {"source": "research", "target": "write"}, {"source": "write", "target": "__end__"}],
    }
    graph = graph_create(actor=alice, name="grouped", spec=spec).graph
    sign_in(page, live_server, "alice")
    page.goto(f"{live_server.url}/graphs/{graph.pk}/")
    svg = page.locator("#graph-preview .mermaid-svg svg").first
    expect(svg).to_be_visible()

    # The subgraph is a box named after it, around its three nodes.
    cluster = svg.locator("g.cluster").first
    expect(cluster).to_contain_text("research")
    box = cluster.bounding_box()
    for node in ("research-search", "research-read", "research-digest"):
        inner = svg.locator("g.node", has_text=node).first.bounding_box()
        assert box["x"] <= inner["x"] and inner["x"] + inner["width"] <= box["x"] + box["width"] + 1
        assert box["y"] <= inner["y"] and inner["y"] + inner["height"] <= box["y"] + box["height"] + 1
    plan = svg.locator("g.node", has_text="plan").first.bounding_box()
    assert plan["y"] + plan["height"] <= box["y"] or plan["y"] >= box["y"] + box["height"]

    # Zoom in with the button: the visible part of the drawing shrinks around the middle.
    tools = page.locator("#graph-preview .diagram-tools").first
    before, scale = view_box(svg), float(svg.get_attribute("data-scale"))
    tools.locator("button[title='Zoom in']").click()
    zoomed = view_box(svg)
    assert zoomed[2] == pytest.approx(before[2] / 1.25, rel=0.01)
    assert float(svg.get_attribute("data-scale")) == pytest.approx(scale * 1.25, rel=0.01)
    # Drag to pan: the view moves against the pointer.
    holder = page.locator("#graph-preview .mermaid-svg").first.bounding_box()
    page.mouse.move(holder["x"] + 100, holder["y"] + 100)
    page.mouse.down()
    page.mouse.move(holder["x"] + 160, holder["y"] + 140, steps=4)
    page.mouse.up()
    panned = view_box(svg)
    assert panned[0] < zoomed[0] and panned[1] < zoomed[1] and panned[2] == pytest.approx(zoomed[2])
    # Ctrl + wheel zooms out; the keyboard works once the diagram has the focus.
    page.mouse.move(holder["x"] + 50, holder["y"] + 50)
    page.keyboard.down("Control")
    page.mouse.wheel(0, 200)
    page.keyboard.up("Control")
    assert view_box(svg)[2] > panned[2]
    page.locator("#graph-preview .mermaid-svg").first.focus()
    page.keyboard.press("0")
    fit = view_box(svg)
    assert fit[2] >= before[2] * 0.99 or fit[3] >= before[3] * 0.99
    shot(page, "graph-groups")
    assert page.errors == []


def test_a_long_label_is_wrapped_and_cut_with_the_full_id_on_hover(page, live_server, demo):
    alerts: list[str] = []
    page.on("dialog", lambda dialog: (alerts.append(dialog.message), dialog.dismiss()))
    from django.contrib.auth import get_user_model

    bob = get_user_model().objects.get(username="bob")
    long_id = ("summarise every document " * 11)[:236] + HOSTILE_ID[:20]
    assert len(long_id) == 256
    spec = {
        "nodes": [{"id": long_id}, {"id": HOSTILE_ID}, {"id": "short"}],
        "edges": [{"source": "__start__", "target": long_id}, {"source": long_id, "target": HOSTILE_ID},
                  {"source": HOSTILE_ID, "target": "short"}, {"source": "short", "target": "__end__"}],
    }
    graph = graph_create(actor=bob, name="long-labels", spec=spec).graph
    sign_in(page, live_server, "bob")
    page.goto(f"{live_server.url}/graphs/{graph.pk}/")
    svg = page.locator("#graph-preview .mermaid-svg svg").first
    expect(svg).to_be_visible()

    node = svg.locator("g.node", has=page.locator("title", has_text=long_id)).first
    assert node.locator("title").text_content() == long_id
    assert node.bounding_box()["width"] < 320  # wrapped, not one 256-character line
    drawn = node.locator(".nodeLabel").first.text_content()
    assert drawn.endswith("…") and len(drawn) < 100
    # Drawn at its own size, not shrunk to a thumbnail by the one long node.
    assert float(svg.get_attribute("data-scale")) == 1
    short = svg.locator("g.node", has_text="short").first.bounding_box()
    assert short["height"] > 20
    # The hostile id is a tooltip and a label, as text.
    hostile = svg.locator("g.node", has=page.locator("title", has_text=HOSTILE_ID)).first
    assert hostile.locator("title").text_content() == HOSTILE_ID
    assert page.locator("#graph-preview svg img, #graph-preview svg script").count() == 0
    node.hover()
    shot(page, "graph-long-labels")
    assert alerts == [] and page.errors == []
