"""What the pages draw: marks on the compiler's Mermaid, preview rows; and the demo data."""

from __future__ import annotations

import pytest

from memoryadmin.demo import graphs as demo
from graphs_app.compiler import graph_compile
from graphs_app.diagrams import mermaid_marked, preview_build
from graphs_app.models import GraphDefinition
from graphs_app.selectors import graph_for_thread
from sessions_app.models import Thread

from ..conftest import make_user
from .helpers import BROKEN, HOSTILE, HOSTILE_ID, REACT_AGENT, SEED_SUBGRAPH


def declared(source: str) -> dict[str, str]:
    """Mermaid id of each label, read the simple way for the checks below."""
    ids = {}
    for line in source.splitlines():
        line = line.strip()
        if line.startswith("n") and '"' in line and "--" not in line and "==" not in line:
            ids[line.split('"')[1]] = line.split("[")[0].split("(")[0].split("{")[0]
    return ids


def test_marks_land_on_the_nodes_they_name():
    result = graph_compile(SEED_SUBGRAPH)
    marked = mermaid_marked(result.mermaid_source, {"visited": ["A", "B-D"], "current": ["B-E"]})
    ids = declared(result.mermaid_source)
    assert f"class {ids['A']},{ids['B-D']} visited" in marked
    assert f"class {ids['B-E']} current" in marked
    assert marked.startswith(result.mermaid_source.rstrip("\n"))


def test_marks_find_ids_the_compiler_escaped():
    result = graph_compile(HOSTILE)
    marked = mermaid_marked(result.mermaid_source, {"error": [HOSTILE_ID, "a]-->b", "missing"]})
    assert marked.splitlines()[-1] == "    class n1,n3 error"


def test_the_path_thickens_the_links_it_took():
    result = graph_compile(REACT_AGENT)
    # n0 __start__, n1 agent, n2 tools, n3 __end__; links: n0-n1, n1-n2, n1-n3, n2-n1
    marked = mermaid_marked(result.mermaid_source, {}, path=["__start__", "agent", "tools", "agent"])
    assert marked.splitlines()[-1].startswith("    linkStyle 0,1,3 ")


def test_nothing_is_added_when_nothing_matches():
    result = graph_compile(REACT_AGENT)
    assert mermaid_marked(result.mermaid_source, {"visited": ["ghost"]}, path=["ghost"]) == result.mermaid_source


def test_the_preview_rows_carry_errors_interrupts_and_parallel_nodes():
    preview = preview_build(graph_compile(BROKEN))
    rows = {row.node: row for row in preview.flattened}
    assert rows["stuck"].error and rows["orphan"].error and not rows["left"].error
    assert rows["__start__"].terminal
    unknown = next(e for e in preview.errors if e.code == "unknown_node")
    assert unknown.node == "summarise" and not unknown.in_graph and unknown.edge == "parse → summarise"

    seed = preview_build(graph_compile({**SEED_SUBGRAPH, "interrupt_after": ["A"]}))
    compiled = {row.node: row for row in seed.compiled}
    assert compiled["__parallel__B-D"].inserted and compiled["__parallel__B-D"].runs == ["B-E", "B-F"]
    assert compiled["A"].interrupt == "after"
    assert seed.node_count == 6


@pytest.mark.django_db
def test_the_demo_graphs_and_threads_load_through_the_services():
    users = {name: make_user(name, role) for name, role in (("admin", "admin"), ("operator", "operator"), ("alice", "member"), ("bob", "member"))}
    demo.load(users)
    alices = {g.name: g for g in GraphDefinition.objects.filter(owner=users["alice"])}
    assert set(alices) == set(demo.GRAPHS)
    assert [name for name, g in alices.items() if not g.valid] == ["broken-example"]
    assert alices["seed-004-subgraph"].node_count == 6 and alices["langgraph-export"].valid

    react = graph_for_thread(actor=users["operator"], thread=Thread.objects.get(thread_id="weather-react"))
    assert react.graph.name == "react-agent" and react.path == ["__start__", "agent", "tools", "agent"]
    paused = graph_for_thread(actor=users["alice"], thread=Thread.objects.get(thread_id="launch-post"))
    assert paused.matched_by == "agent_code" and paused.current == "human_review"
    seed = graph_for_thread(actor=users["bob"], thread=Thread.objects.get(thread_id="bob-seed-004"))
    assert seed.path == ["__start__", "A", "B-D", "B-E", "B-F", "B-G"] and seed.current == "C"


def test_long_labels_are_wrapped_and_cut_for_drawing():
    from graphs_app.diagrams import LABEL_LINES, LABEL_WIDTH, label_lines

    assert label_lines("plan") == ["plan"]
    assert label_lines("plan the search and then read every result twice") == [
        "plan the search and then", "read every result twice"
    ]
    cut = label_lines("x" * 256)
    assert len(cut) == LABEL_LINES and all(len(line) <= LABEL_WIDTH for line in cut)
    assert cut[-1].endswith("…") and "".join(cut).rstrip("…") == "x" * (LABEL_WIDTH * LABEL_LINES - 1)
    # A separator in the second half of a line is where it breaks.
    assert label_lines("research-subgraph-with-a-long-name-D")[0] == "research-subgraph-with-a-"


def test_the_drawn_diagram_wraps_labels_and_keeps_every_full_id_for_tooltips():
    import json

    from graphs_app.diagrams import diagram_for_page

    long_id = "L" * 200 + HOSTILE_ID
    spec = {
        "nodes": [{"id": long_id}, {"id": HOSTILE_ID}],
        "edges": [{"source": "__start__", "target": long_id},
                  {"source": long_id, "condition": "c", "targets": {"o" * 90: HOSTILE_ID, "stop": "__end__"}},
                  {"source": HOSTILE_ID, "target": "__end__"}],
    }
    result = graph_compile(spec)
    diagram = diagram_for_page(result.mermaid_source)
    labels = json.loads(diagram.labels)
    ids = declared(result.mermaid_source)
    assert labels[ids["__start__"]] == "__start__"
    assert set(labels.values()) == {"__start__", "__end__", long_id, HOSTILE_ID}
    long_mermaid_id = next(key for key, value in labels.items() if value == long_id)
    long_line = next(line for line in diagram.source.splitlines() if line.strip().startswith(long_mermaid_id + "["))
    assert long_line.count("<br>") == 2 and "#8230;" in long_line and "L" * 29 not in long_line
    outcome = next(line for line in diagram.source.splitlines() if "-.->" in line and "stop" not in line)
    assert outcome.count("<br>") == 2
    # <br> is the only markup: the hostile id stays entity-coded, and short labels are untouched.
    assert "<script" not in diagram.source and "<img" not in diagram.source
    assert diagram.source.replace("<br>", "").count("<") == 0
    assert f'["{HOSTILE_ID}"]' not in diagram.source
    unchanged = [line for line in result.mermaid_source.splitlines() if '"' not in line or "__" in line]
    assert len(unchanged) >= 4 and all(line in diagram.source.splitlines() for line in unchanged)


def test_subgraph_boxes_survive_the_marks_and_the_wrapping():
    from graphs_app.diagrams import diagram_for_page

    result = graph_compile(SEED_SUBGRAPH)
    marked = mermaid_marked(result.mermaid_compiled, {"error": ["B-E"]})
    drawn = diagram_for_page(marked).source
    assert 'subgraph g' in drawn and '["B"]' in drawn and drawn.count("    end") == 1
    assert "class " in drawn and "classDef error" in drawn
