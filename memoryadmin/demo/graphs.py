"""Demo graphs, and threads that ran on them, written through the services.

Loaded by ``manage.py demo_data``. The graphs cover each thing the compiler does: the
subgraph example of docs/graphs.md ("Worked example"), a ReAct loop (a conditional edge back and forth), a fan-out and
fan-in, an interrupt, LangGraph's own JSON, and one graph full of mistakes.
"""

from __future__ import annotations

from typing import Any

from sessions_app.checkpoints.lifecycle import thread_update_metadata
from sessions_app.checkpoints.services import checkpoint_input, checkpoint_put
from sessions_app.threads.services import thread_save_agent_state

from graphs_app.services import graph_create


def _edges(*pairs: str) -> list[dict[str, str]]:
    return [{"source": a, "target": b} for a, b in (pair.split(">") for pair in pairs)]


# The subgraph example of docs/graphs.md: A -> B -> C, where B holds D -> E, D -> F, E -> G, F -> G.
SEED_SUBGRAPH: dict[str, Any] = {
    "nodes": [
        {"id": "A"},
        {
            "id": "B",
            "subgraph": {
                "nodes": [{"id": "D"}, {"id": "E"}, {"id": "F"}, {"id": "G"}],
                "edges": _edges("__start__>D", "D>E", "D>F", "E>G", "F>G", "G>__end__"),
            },
        },
        {"id": "C"},
    ],
    "edges": _edges("__start__>A", "A>B", "B>C", "C>__end__"),
}

# The ReAct loop: the model answers or calls tools, the tools hand back to the model.
REACT_AGENT: dict[str, Any] = {
    "nodes": [{"id": "agent", "label": "call the model"}, {"id": "tools", "label": "run the tool calls"}],
    "edges": [
        {"source": "__start__", "target": "agent"},
        {"source": "agent", "condition": "should_continue", "targets": {"tool_calls": "tools", "answer": "__end__"}},
        {"source": "tools", "target": "agent"},
    ],
}

# Fan-out and fan-in: three searches run together, one node merges them.
RESEARCH_FANOUT: dict[str, Any] = {
    "nodes": [{"id": n} for n in ("plan", "search_web", "search_papers", "search_news", "synthesize", "review")],
    "edges": [
        *_edges(
            "__start__>plan",
            "plan>search_web",
            "plan>search_papers",
            "plan>search_news",
            "search_web>synthesize",
            "search_papers>synthesize",
            "search_news>synthesize",
            "synthesize>review",
        ),
        {"source": "review", "condition": "good_enough", "targets": {"yes": "__end__", "no": "plan"}},
    ],
}

# A person approves before anything is published (LangGraph's interrupt_before).
APPROVAL_INTERRUPT: dict[str, Any] = {
    "nodes": [{"id": "draft"}, {"id": "human_review"}, {"id": "publish"}],
    "edges": [
        *_edges("__start__>draft", "draft>human_review", "publish>__end__"),
        {"source": "human_review", "condition": "decision", "targets": {"approve": "publish", "revise": "draft"}},
    ],
    "interrupt_before": ["human_review"],
}

# What LangGraph prints for a compiled ReAct graph (`get_graph().to_json()`), stored as is:
# the compiler recognises the shape.
LANGGRAPH_EXPORT: dict[str, Any] = {
    "nodes": [
        {"id": "__start__", "type": "runnable", "data": {"id": ["langgraph", "_internal", "_runnable", "RunnableCallable"], "name": "__start__"}},
        {"id": "agent", "type": "runnable", "data": {"id": ["langgraph", "_internal", "_runnable", "RunnableCallable"], "name": "agent"}},
        {"id": "tools", "type": "runnable", "data": {"id": ["langgraph", "_internal", "_runnable", "RunnableCallable"], "name": "tools"}},
        {"id": "__end__"},
    ],
    "edges": [
        {"source": "__start__", "target": "agent"},
        {"source": "agent", "target": "__end__", "conditional": True},
        {"source": "agent", "target": "tools", "conditional": True},
        {"source": "tools", "target": "agent"},
    ],
}

# Every kind of mistake the preview points at: a duplicate id, an edge to a missing node,
# a node nothing reaches, a dead end, branches that never meet, an interrupt on nothing.
BROKEN: dict[str, Any] = {
    "nodes": [{"id": n} for n in ("fetch", "fetch", "parse", "orphan", "left", "right", "stuck")],
    "edges": _edges(
        "__start__>fetch",
        "fetch>parse",
        "parse>summarise",
        "parse>left",
        "parse>right",
        "left>__end__",
        "right>stuck",
        "stuck>stuck",
    ),
    "interrupt_after": ["publish"],
}

GRAPHS: dict[str, dict[str, Any]] = {
    "seed-004-subgraph": SEED_SUBGRAPH,
    "react-agent": REACT_AGENT,
    "research-fanout": RESEARCH_FANOUT,
    "approval-interrupt": APPROVAL_INTERRUPT,
    "langgraph-export": LANGGRAPH_EXPORT,
    "broken-example": BROKEN,
}

REACT_CONTEXT = [
    {"role": "system", "content": "You answer with the help of tools."},
    {"role": "user", "content": "Is it warmer in Lisbon or in Porto right now?"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "call_l1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Lisbon\"}"}},
            {"id": "call_p1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Porto\"}"}},
        ],
    },
    {"role": "tool", "tool_call_id": "call_l1", "name": "get_weather", "content": "{\"temp_c\": 21}"},
    {"role": "tool", "tool_call_id": "call_p1", "name": "get_weather", "content": "{\"temp_c\": 17}"},
    {"role": "assistant", "content": "Lisbon: 21 °C against 17 °C in Porto, so Lisbon is warmer."},
]


def _checkpoints(actor, thread_id: str, steps: list[tuple[str, str, str]]) -> None:
    """One checkpoint per step (namespace, node that ran, node due next), oldest first."""
    parent = None
    for index, (ns, node_id, next_node_id) in enumerate(steps):
        data = checkpoint_input(
            checkpoint={"channel_values": {"step": index}},
            metadata={"source": "input" if index == 0 else "loop", "step": index - 1},
            checkpoint_ns=ns,
            parent_checkpoint_id=parent if not ns else None,
            node_id=node_id,
            next_node_id=next_node_id,
        )
        put = checkpoint_put(actor=actor, thread_id=thread_id, data=data, checkpoint_id=f"{thread_id}-{index:03d}")
        if not ns:
            parent = put.checkpoint_id


def load(users: dict) -> None:
    alice, bob = users["alice"], users["bob"]
    for name, spec in GRAPHS.items():
        graph_create(actor=alice, name=name, spec=spec)
    graph_create(actor=bob, name="research-fanout", spec=RESEARCH_FANOUT)
    graph_create(actor=bob, name="seed-004-subgraph", spec=SEED_SUBGRAPH)

    # Threads on their graphs: the conversation through the agent-state service, the
    # steps through the checkpoint service.
    thread_save_agent_state(actor=alice, thread_id="weather-react", agent_code="assistant", context=REACT_CONTEXT)
    thread_save_agent_state(
        actor=alice,
        thread_id="launch-post",
        agent_code="approval-interrupt",  # no metadata: the agent code names the graph
        context=[{"role": "user", "content": "Draft the launch post for Friday."}],
    )
    thread_save_agent_state(
        actor=bob,
        thread_id="bob-seed-004",
        agent_code="pipeline",
        context=[{"role": "user", "content": "Run the A-B-C pipeline on the March data."}],
    )
    thread_update_metadata(actor=alice, thread_id="weather-react", metadata={"graph": "react-agent"})
    _checkpoints(
        alice,
        "weather-react",
        [("", "__start__", "agent"), ("", "agent", "tools"), ("", "tools", "agent"), ("", "agent", "")],
    )
    # Paused by the interrupt before human_review: the current node is human_review.
    _checkpoints(alice, "launch-post", [("", "__start__", "draft"), ("", "draft", "human_review")])
    # A subgraph's checkpoints carry its namespace (LangGraph: "B:<task id>"); the view
    # draws them on the flattened ids B-D, B-E...
    thread_update_metadata(actor=bob, thread_id="bob-seed-004", metadata={"graph": "seed-004-subgraph"})
    _checkpoints(
        bob,
        "bob-seed-004",
        [
            ("", "__start__", "A"),
            ("", "A", "B"),
            ("B:task-1", "__start__", "D"),
            ("B:task-1", "D", "E,F"),
            ("B:task-1", "E,F", "G"),
            ("B:task-1", "G", ""),
            ("", "B", "C"),
        ],
    )
