"""A thread drawn on its graph: the selector, its query count, the page and its panel."""

from __future__ import annotations

from typing import Any, TypedDict

import pytest

from graphs_app.selectors import PATH_LIMIT, graph_for_thread
from memoryadmin.errors import Forbidden
from sessions_app.checkpoints import services as checkpoint_services
from sessions_app.models import Thread
from sessions_app.threads.services import thread_save_agent_state

from ..conftest import login_client
from .helpers import APPROVAL_INTERRUPT, REACT_AGENT, SEED_SUBGRAPH, save
from sessions_app.checkpoints import lifecycle

pytestmark = pytest.mark.django_db


def new_thread(user, thread_id: str, agent_code: str = "bot", metadata: dict | None = None) -> Thread:
    thread_save_agent_state(
        actor=user, thread_id=thread_id, agent_code=agent_code, context=[{"role": "user", "content": "go"}]
    )
    if metadata is not None:
        lifecycle.thread_update_metadata(actor=user, thread_id=thread_id, metadata=metadata)
    return Thread.objects.get(thread_id=thread_id)


def put(user, thread_id: str, node_id: str, next_node_id: str, ns: str = "", checkpoint: Any = None, **extra):
    data = checkpoint_services.checkpoint_input(
        checkpoint=checkpoint if checkpoint is not None else {"channel_values": {}},
        checkpoint_ns=ns,
        node_id=node_id,
        next_node_id=next_node_id,
        **extra,
    )
    return checkpoint_services.checkpoint_put(actor=user, thread_id=thread_id, data=data)


def test_a_thread_names_no_graph(alice):
    save(alice, "react")
    thread = new_thread(alice, "t1", agent_code="other")
    assert graph_for_thread(actor=alice, thread=thread) is None


def test_the_metadata_name_wins_over_the_agent_code(alice):
    save(alice, "react", REACT_AGENT)
    named = save(alice, "approval", APPROVAL_INTERRUPT)
    thread = new_thread(alice, "t1", agent_code="react", metadata={"graph": "approval"})
    found = graph_for_thread(actor=alice, thread=thread)
    assert found.graph == named and found.matched_by == "metadata.graph"
    by_code = graph_for_thread(actor=alice, thread=new_thread(alice, "t2", agent_code="react"))
    assert by_code.graph.name == "react" and by_code.matched_by == "agent_code"


def test_only_the_thread_owners_graphs_count(alice, bob):
    save(bob, "react", REACT_AGENT)
    thread = new_thread(alice, "t1", agent_code="react", metadata={"graph": "react"})
    assert graph_for_thread(actor=alice, thread=thread) is None


def test_another_member_may_not_look(alice, bob, operator):
    save(alice, "react")
    thread = new_thread(alice, "t1", agent_code="react")
    with pytest.raises(Forbidden):
        graph_for_thread(actor=bob, thread=thread)
    assert graph_for_thread(actor=operator, thread=thread).graph.name == "react"


def test_the_path_follows_the_checkpoints_and_the_current_node_is_the_next_one(alice):
    save(alice, "approval", APPROVAL_INTERRUPT)
    new_thread(alice, "t1", metadata={"graph": "approval"})
    for node, upcoming in (("__start__", "draft"), ("draft", "human_review"), ("human_review", "draft"), ("draft", "human_review")):
        put(alice, "t1", node, upcoming)
    found = graph_for_thread(actor=alice, thread=Thread.objects.get(thread_id="t1"))
    assert found.path == ["__start__", "draft", "human_review", "draft"]
    assert found.current == "human_review"
    assert all(step.known for step in found.steps)
    assert "class n2 current" in found.mermaid  # n2 is human_review
    assert "classDef visited" in found.mermaid and "linkStyle" in found.mermaid


def test_a_finished_run_points_at_its_last_node(alice):
    save(alice, "react", REACT_AGENT)
    new_thread(alice, "t1", agent_code="react")
    for node, upcoming in (("__start__", "agent"), ("agent", "tools"), ("tools", "agent"), ("agent", "")):
        put(alice, "t1", node, upcoming)
    found = graph_for_thread(actor=alice, thread=Thread.objects.get(thread_id="t1"))
    assert found.path == ["__start__", "agent", "tools", "agent"] and found.current == "agent"


def test_subgraph_namespaces_and_parallel_steps_land_on_flattened_ids(alice):
    save(alice, "seed", SEED_SUBGRAPH)
    new_thread(alice, "t1", metadata={"graph": "seed"})
    for ns, node, upcoming in (
        ("", "__start__", "A"),
        ("", "A", "B"),
        ("B:task-1", "__start__", "D"),
        ("B:task-1", "D", "E,F"),
        ("B:task-1", "E,F", "G"),
        ("B:task-1", "G", ""),
        ("", "B", "C"),
    ):
        put(alice, "t1", node, upcoming, ns=ns)
    found = graph_for_thread(actor=alice, thread=Thread.objects.get(thread_id="t1"))
    assert found.path == ["__start__", "A", "B-D", "B-E", "B-F", "B-G"]
    assert found.current == "C"


def test_unknown_nodes_are_kept_and_flagged(alice):
    save(alice, "react", REACT_AGENT)
    new_thread(alice, "t1", agent_code="react")
    put(alice, "t1", "agent", "")
    put(alice, "t1", "<b>ghost</b>", "")
    found = graph_for_thread(actor=alice, thread=Thread.objects.get(thread_id="t1"))
    assert [(s.node, s.known) for s in found.steps] == [("agent", True), ("<b>ghost</b>", False)]


@pytest.mark.parametrize("count", [3, 120])
def test_the_selector_takes_two_queries_at_any_size(alice, count, django_assert_num_queries):
    save(alice, "react", REACT_AGENT)
    new_thread(alice, "t1", agent_code="react")
    for i in range(count):
        put(alice, "t1", "agent" if i % 2 else "tools", "tools" if i % 2 else "agent")
    thread = Thread.objects.get(thread_id="t1")
    with django_assert_num_queries(2):  # the graph, the checkpoints' node ids
        found = graph_for_thread(actor=alice, thread=thread)
    assert len(found.path) == count


def test_long_histories_are_cut_to_the_newest_checkpoints(alice, monkeypatch):
    monkeypatch.setattr("graphs_app.selectors.PATH_LIMIT", 5)
    save(alice, "react", REACT_AGENT)
    new_thread(alice, "t1", agent_code="react")
    for i in range(8):
        put(alice, "t1", "agent" if i % 2 else "tools", "")
    found = graph_for_thread(actor=alice, thread=Thread.objects.get(thread_id="t1"))
    assert found.truncated and len(found.path) == 5 and found.path[-1] == "agent"
    assert PATH_LIMIT >= 100


def test_a_real_langgraph_run_is_drawn_on_the_graph_it_exported(alice):
    """LangGraph's own checkpoints, stored through the checkpoint service, which reads
    the nodes that ran from versions_seen; the graph is the app's get_graph().to_json()."""
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import START, StateGraph

    builder = StateGraph(LoopState)
    builder.add_node("agent", lambda state: {"n": state["n"] + 1})
    builder.add_node("tools", lambda state: {"n": state["n"]})
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", loop_route, ["tools", "__end__"])
    builder.add_edge("tools", "agent")
    saver = InMemorySaver()
    app = builder.compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "lg-1"}}
    app.invoke({"n": 0}, config)

    save(alice, "react-lg", app.get_graph().to_json())
    new_thread(alice, "lg-1", agent_code="react-lg")
    for item in reversed(list(saver.list(config))):  # oldest first, as they were written
        parent = item.parent_config["configurable"]["checkpoint_id"] if item.parent_config else None
        data = checkpoint_services.checkpoint_input(
            checkpoint=dict(item.checkpoint), metadata=dict(item.metadata), parent_checkpoint_id=parent
        )
        checkpoint_services.checkpoint_put(
            actor=alice, thread_id="lg-1", data=data, checkpoint_id=item.config["configurable"]["checkpoint_id"]
        )
    found = graph_for_thread(actor=alice, thread=Thread.objects.get(thread_id="lg-1"))
    assert found.path == ["__start__", "agent", "tools", "agent", "tools", "agent"]
    assert found.current == "agent"
    assert found.result.valid and all(step.known for step in found.steps)


class LoopState(TypedDict):
    n: int


def loop_route(state: LoopState) -> str:
    return "tools" if state["n"] < 3 else "__end__"


# ------------------------------------------------------------------------- pages


def test_the_page_draws_the_path_and_escapes_checkpoint_node_ids(client, alice):
    save(alice, "react", REACT_AGENT)
    new_thread(alice, "t1", agent_code="react")
    put(alice, "t1", "__start__", "agent")
    put(alice, "t1", "<script>alert(1)</script>", "tools")
    login_client(client, alice)
    body = client.get("/graphs/thread/t1/").content.decode()
    assert '<pre class="mermaid"' in body and "classDef current" in body
    assert '<ol class="graph-path">' in body and "(not in the graph)" in body
    assert "<script>alert(1)" not in body and "&lt;script&gt;alert(1)&lt;/script&gt;" in body
    assert 'class="current-node">tools<' in body
    assert 'href="/graphs/' in body and "named by agent_code" in body


def test_the_panel_is_an_htmx_fragment(client, alice):
    save(alice, "react", REACT_AGENT)
    new_thread(alice, "t1", agent_code="react")
    put(alice, "t1", "agent", "tools")
    login_client(client, alice)
    body = client.get("/graphs/thread/t1/", HTTP_HX_REQUEST="true").content.decode()
    assert body.lstrip().startswith('<section id="thread-graph-panel"') and "<html" not in body
    assert 'hx-get="/graphs/thread/t1/"' in body


def test_a_thread_without_a_graph_says_how_to_name_one(client, alice):
    new_thread(alice, "t1", agent_code="nothing-here")
    login_client(client, alice)
    response = client.get("/graphs/thread/t1/")
    assert response.status_code == 200 and "metadata.graph" in response.content.decode()


def test_the_page_refuses_another_members_thread(client, alice, bob):
    save(alice, "react")
    new_thread(alice, "t1", agent_code="react")
    login_client(client, bob)
    assert client.get("/graphs/thread/t1/").status_code == 403
    assert client.get("/graphs/thread/no-such-thread/").status_code == 404
    assert client.get("/graphs/thread/bad%20id/").status_code == 400


@pytest.mark.parametrize("count", [3, 60])
def test_the_page_takes_the_same_queries_at_any_size(client, alice, count, django_assert_num_queries):
    save(alice, "react", REACT_AGENT)
    new_thread(alice, "t1", agent_code="react")
    for i in range(count):
        put(alice, "t1", "agent" if i % 2 else "tools", "")
    login_client(client, alice)
    # session, user, role, thread, graph, checkpoints
    with django_assert_num_queries(6):
        assert client.get("/graphs/thread/t1/").status_code == 200


def test_the_thread_page_links_to_its_graph(client, alice):
    new_thread(alice, "t1")
    login_client(client, alice)
    assert 'href="/graphs/thread/t1/"' in client.get("/threads/t1/").content.decode()
