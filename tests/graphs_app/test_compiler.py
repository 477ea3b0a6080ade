"""The graph compiler (graphs_app/compiler/): pure Python, so no database and no Django."""

from __future__ import annotations

import json
import random
import re
from typing import Any, TypedDict

import pytest

from graphs_app.compiler import (
    END,
    MAX_DEPTH,
    MAX_EDGES,
    MAX_ID_LENGTH,
    MAX_NODES,
    START,
    CompileResult,
    SpecError,
    from_langgraph_json,
    graph_compile,
)


def graph(*edges: str | dict[str, Any], nodes: list[Any] | None = None, **extra: Any) -> dict[str, Any]:
    """A spec from "A>B" shorthands and edge dicts; nodes default to every id the edges name."""
    parsed: list[dict[str, Any]] = []
    named: dict[str, None] = {}
    for edge in edges:
        if isinstance(edge, str):
            source, target = edge.split(">")
            edge = {"source": source, "target": target}
        parsed.append(edge)
        ends = [edge["source"], edge.get("target"), *edge.get("targets", {}).values()]
        named.update(dict.fromkeys(e for e in ends if e and e not in (START, END)))
    if nodes is None:
        nodes = [{"id": node_id} for node_id in named]
    return {"nodes": [n if isinstance(n, dict) else {"id": n} for n in nodes], "edges": parsed, **extra}


def cond(source: str, parallel: bool = False, condition: str = "route", **targets: str) -> dict[str, Any]:
    edge = {"source": source, "condition": condition, "targets": targets}
    if parallel:
        edge["parallel"] = True
    return edge


def seed_example(**extra: Any) -> dict[str, Any]:
    """The subgraph example of docs/graphs.md: A→B→C where B holds D→E, D→F, E→G, F→G."""
    b = graph("__start__>D", "D>E", "D>F", "E>G", "F>G", "G>__end__")
    return graph(
        "__start__>A", "A>B", "B>C", "C>__end__", nodes=["A", {"id": "B", "subgraph": b}, "C"], **extra
    )


def codes(result: CompileResult) -> list[tuple[str, str | None]]:
    return [(error.code, error.node) for error in result.errors]


# ---------------------------------------------------------------- flattening


def test_seed_example_flattens_exactly_as_in_the_design():
    result = graph_compile(seed_example())

    inner = {k: [t for t in v if t != END] for k, v in result.flattened.items() if k not in (START, END)}
    assert inner == {
        "A": ["B-D"],
        "B-D": ["B-E", "B-F"],
        "B-E": ["B-G"],
        "B-F": ["B-G"],
        "B-G": ["C"],
        "C": [],
    }
    assert result.flattened[START] == ["A"]
    assert result.flattened["C"] == [END]
    assert result.flattened[END] == []
    assert list(result.flattened) == [START, "A", "B-D", "B-E", "B-F", "B-G", "C", END]
    assert result.valid and result.errors == []


def test_seed_example_fan_out_becomes_one_parallel_node():
    result = graph_compile(seed_example())

    assert result.inserted_nodes == ["__parallel__B-D"]
    assert result.compiled["B-D"] == ["__parallel__B-D"]
    assert result.compiled["__parallel__B-D"] == ["B-G"]
    # The branch nodes stay, with their own edges: the parallel node runs them.
    assert result.compiled["B-E"] == ["B-G"] and result.compiled["B-F"] == ["B-G"]
    (node,) = result.parallel_nodes
    assert (node.source, node.branches, node.join, node.condition) == ("B-D", ["B-E", "B-F"], "B-G", None)


def test_nested_subgraphs_recurse_with_parent_child_ids():
    y = graph("__start__>Y", "Y>__end__")
    x = graph("__start__>X", "X>__end__", nodes=[{"id": "X", "subgraph": y}])
    spec = graph("__start__>A", "A>B", "B>C", "C>__end__", nodes=["A", {"id": "B", "subgraph": x}, "C"])

    result = graph_compile(spec)

    assert result.valid
    assert result.flattened == {START: ["A"], "A": ["B-X-Y"], "B-X-Y": ["C"], "C": [END], END: []}


def test_edges_into_a_subgraph_with_several_entries_fan_out():
    b = graph("__start__>D1", "__start__>D2", "D1>J", "D2>J", "J>__end__")
    spec = graph("__start__>A", "A>B", "B>__end__", nodes=["A", {"id": "B", "subgraph": b}])

    result = graph_compile(spec)

    assert result.flattened["A"] == ["B-D1", "B-D2"]
    assert result.flattened["B-J"] == [END]
    assert result.compiled["A"] == ["__parallel__A"]
    assert result.compiled["__parallel__A"] == ["B-J"]


def test_conditional_edges_keep_their_outcomes_through_flattening():
    b = graph("__start__>D", cond("D", ok="__end__", again="D"))
    spec = graph(
        "__start__>A",
        cond("A", go="B", stop="__end__"),
        "B>C",
        "C>__end__",
        nodes=["A", {"id": "B", "subgraph": b}, "C"],
    )

    result = graph_compile(spec)

    assert result.valid, result.errors
    assert result.flattened["A"] == ["B-D", END]
    assert result.flattened["B-D"] == ["C", "B-D"]  # the subgraph's exit outcome now leads to C
    assert '-.->|"go"|' in result.mermaid_source
    assert result.inserted_nodes == []


def test_a_subgraph_node_with_a_conditional_edge_gives_it_to_every_exit():
    b = graph("__start__>P", cond("P", left="D", right="E"), "D>__end__", "E>__end__")
    spec = graph(
        "__start__>B", cond("B", yes="C", no="__end__"), "C>__end__", nodes=[{"id": "B", "subgraph": b}, "C"]
    )

    result = graph_compile(spec)

    assert result.valid, result.errors
    assert result.flattened["B-P"] == ["B-D", "B-E"]
    assert result.flattened["B-D"] == ["C", END] and result.flattened["B-E"] == ["C", END]
    assert result.mermaid_source.count('|"yes"|') == 2


# ---------------------------------------------------------------- validation errors


def nested(depth: int) -> dict[str, Any]:
    """`depth` subgraphs inside each other, the innermost holding one node."""
    inner = graph("__start__>leaf", "leaf>__end__")
    for _ in range(depth):
        inner = graph("__start__>s", "s>__end__", nodes=[{"id": "s", "subgraph": inner}])
    return inner


def sub(node_id: str, *edges: str | dict[str, Any], **extra: Any) -> dict[str, Any]:
    """A node holding a subgraph."""
    return {"id": node_id, "subgraph": graph(*edges, **extra)}


def case(name: str, spec: dict[str, Any], code: str, node: str | None, edge: dict[str, Any] | None = None) -> Any:
    return pytest.param(spec, code, node, edge, id=name)


THROUGH_B = ("__start__>B", "B>__end__")
A_TO_X = {"source": "A", "target": "X"}
ERROR_CASES = [
    case("unknown-target", graph("__start__>A", "A>X", nodes=["A"]), "unknown_node", "X", A_TO_X),
    case("unknown-source", graph("__start__>A", "A>__end__", "X>A", nodes=["A"]), "unknown_node", "X", {"source": "X", "target": "A"}),
    case(
        "unknown-conditional-target",
        graph("__start__>A", cond("A", yes="__end__", no="X"), nodes=["A"]),
        "unknown_node",
        "X",
        {"source": "A", "condition": "route", "targets": {"yes": "__end__", "no": "X"}},
    ),
    case("unknown-in-subgraph", graph(*THROUGH_B, nodes=[sub("B", "__start__>D", "D>X", nodes=["D"])]), "unknown_node", "B-X", {"source": "D", "target": "X"}),
    case("duplicate", graph("__start__>A", "A>__end__", nodes=["A", "A"]), "duplicate_node", "A"),
    case(
        "duplicate-after-flattening",
        graph("__start__>B", "B>B-D", "B-D>__end__", nodes=[sub("B", "__start__>D", "D>__end__"), "B-D"]),
        "duplicate_node",
        "B-D",
    ),
    case("no-entry", graph("A>__end__"), "no_entry", START),
    case("no-entry-in-subgraph", graph(*THROUGH_B, nodes=[sub("B", "D>__end__")]), "no_entry", "B"),
    case("unreachable", graph("__start__>A", "A>__end__", "Z>__end__"), "unreachable", "Z"),
    case("unreachable-in-subgraph", graph(*THROUGH_B, nodes=[sub("B", "__start__>D", "D>__end__", "Z>D")]), "unreachable", "B-Z"),
    case("no-path-to-end", graph("__start__>A", "A>__end__", "__start__>X", "X>X"), "no_path_to_end", "X"),
    case("unknown-interrupt", graph("__start__>A", "A>__end__", interrupt_before=["nope"]), "unknown_interrupt", "nope"),
    case(
        "unknown-interrupt-in-subgraph",
        graph(*THROUGH_B, nodes=[sub("B", "__start__>D", "D>__end__", interrupt_after=["E"])]),
        "unknown_interrupt",
        "B-E",
    ),
    case("reserved-start", graph("__start__>A", "A>__end__", nodes=["A", START], interrupt_before=[]), "reserved_id", START),
    case("empty-id", graph("__start__>A", "A>__end__", nodes=["A", ""]), "reserved_id", ""),
    case("reserved-in-subgraph", graph(*THROUGH_B, nodes=[sub("B", "__start__>D", "D>__end__", nodes=["D", END])]), "reserved_id", "B-__end__"),
    case("too-deep", nested(MAX_DEPTH + 1), "too_deep", "-".join(["s"] * (MAX_DEPTH + 1))),
    case("edge-from-end", graph("__start__>A", "A>__end__", "__end__>A"), "invalid_edge", None, {"source": END, "target": "A"}),
    case("edge-to-start", graph("__start__>A", "A>__start__", "A>__end__"), "invalid_edge", None, {"source": "A", "target": START}),
    case(
        "plain-and-conditional",
        graph("__start__>A", "A>B", cond("A", x="B"), "B>__end__"),
        "conflicting_edges",
        "A",
        {"source": "A", "condition": "route", "targets": {"x": "B"}},
    ),
]


@pytest.mark.parametrize("spec, code, node, edge", ERROR_CASES)
def test_each_error_names_its_node_or_edge(spec, code, node, edge):
    result = graph_compile(spec)

    assert not result.valid
    matching = [e for e in result.errors if e.code == code]
    assert matching, result.errors
    assert matching[0].node == node
    assert matching[0].edge == edge
    assert matching[0].message
    assert json.dumps(result.as_dict())  # an invalid graph is still a full answer


def test_nesting_up_to_the_limit_is_fine():
    result = graph_compile(nested(MAX_DEPTH))

    assert result.valid, result.errors
    assert result.flattened[START] == ["s-" * MAX_DEPTH + "leaf"]


def test_two_conditions_cannot_be_chained_through_a_subgraph_entry():
    b = graph(cond("__start__", d="D", e="E"), "D>__end__", "E>__end__")
    spec = graph("__start__>A", cond("A", go="B", stop="__end__"), "B>__end__", nodes=["A", {"id": "B", "subgraph": b}])

    result = graph_compile(spec)

    assert ("subgraph_edge_conflict", "A") in codes(result)


def test_a_lone_edge_into_a_conditional_subgraph_entry_takes_the_condition():
    b = graph(cond("__start__", d="D", e="E"), "D>__end__", "E>__end__")
    spec = graph("__start__>A", "A>B", "B>__end__", nodes=["A", {"id": "B", "subgraph": b}])

    result = graph_compile(spec)

    assert result.valid, result.errors
    assert result.flattened["A"] == ["B-D", "B-E"]
    assert result.inserted_nodes == []  # a condition picks one, nothing runs in parallel


# ---------------------------------------------------------------- parallel nodes


def test_fan_out_with_chains_and_sub_dags_converges_on_the_join():
    spec = graph("__start__>A", "A>X", "A>Y", "A>Z", "X>J", "Y>P", "P>J", "Z>Q1", "Z>Q2", "Q1>R", "Q2>R", "R>J", "J>__end__")

    result = graph_compile(spec)

    assert result.valid, result.errors
    assert result.compiled["A"] == ["__parallel__A"]
    assert result.compiled["__parallel__A"] == ["J"]
    # Z's own fan-out is a nested parallel block with its own node.
    assert result.compiled["Z"] == ["__parallel__Z"] and result.compiled["__parallel__Z"] == ["R"]
    assert {p.id: p.branches for p in result.parallel_nodes} == {"__parallel__A": ["X", "Y", "Z"], "__parallel__Z": ["Q1", "Q2"]}
    assert list(result.compiled).index("__parallel__A") == list(result.compiled).index("A") + 1


def test_parallel_conditional_edge_gets_a_parallel_node_holding_the_condition():
    spec = graph("__start__>A", cond("A", parallel=True, condition="pick", x="X", y="Y"), "X>J", "Y>J", "J>__end__")

    result = graph_compile(spec)

    assert result.valid, result.errors
    assert result.flattened["A"] == ["X", "Y"]
    assert result.compiled["A"] == ["__parallel__A"] and result.compiled["__parallel__A"] == ["J"]
    (node,) = result.parallel_nodes
    assert (node.condition, node.targets, node.join) == ("pick", {"x": ["X"], "y": ["Y"]}, "J")
    assert '==>|"x"|' in result.mermaid_compiled
    assert '-.->|"x"|' in result.mermaid_source


def test_a_plain_conditional_edge_is_not_parallel():
    result = graph_compile(graph("__start__>A", cond("A", x="X", y="Y"), "X>__end__", "Y>__end__"))

    assert result.valid and result.inserted_nodes == []
    assert result.compiled == result.flattened


def test_branches_going_straight_to_end_converge_there():
    result = graph_compile(graph("__start__>A", "A>X", "A>Y", "X>__end__", "Y>__end__"))

    assert result.valid, result.errors
    assert result.compiled["__parallel__A"] == [END]


@pytest.mark.parametrize(
    "edges",
    [
        pytest.param(["A>X", "A>Y", "X>__end__", "Y>J", "J>__end__"], id="one-branch-ends-the-other-continues"),
        pytest.param(["A>X", "A>Y", "X>P", "P>__end__", "Y>Q", "Q>__end__"], id="chains-only-meeting-at-end"),
        pytest.param(["A>X", "A>Y", "A>Z", "X>K", "Y>K", "K>J", "Z>J", "J>__end__"], id="two-branches-meet-early"),
        pytest.param(["A>X", "A>Y", "X>J", "X>A", "Y>J", "J>__end__"], id="branch-loops-back-to-source"),
        pytest.param(["A>X", "A>__end__", "X>__end__"], id="a-branch-is-end-itself"),
    ],
)
def test_branches_that_do_not_converge_on_one_node_are_refused(edges):
    result = graph_compile(graph("__start__>A", *edges))

    assert ("parallel_no_convergence", "A") in codes(result)
    assert result.compiled["A"] == result.flattened["A"]  # left as it was
    assert "__parallel__A" not in result.inserted_nodes


def test_a_conditional_edge_inside_a_parallel_branch_is_refused():
    spec = graph("__start__>A", "A>X", "A>Y", cond("X", a="P", b="Q"), "P>J", "Q>J", "Y>J", "J>__end__")

    result = graph_compile(spec)

    assert codes(result) == [("parallel_conditional_branch", "X")]


def test_inserted_node_ids_never_collide_with_real_ones():
    spec = graph("__start__>A", "A>X", "A>Y", "X>__parallel__A", "Y>__parallel__A", "__parallel__A>__end__")

    result = graph_compile(spec)

    assert result.inserted_nodes == ["__parallel__A_2"]
    assert result.compiled["__parallel__A_2"] == ["__parallel__A"]


# ---------------------------------------------------------------- cycles


def test_agent_tool_loops_and_self_loops_are_legal():
    spec = graph(
        "__start__>agent",
        cond("agent", tools="tools", reflect="agent", done="__end__"),
        "tools>agent",
    )

    result = graph_compile(spec)

    assert result.valid, result.errors
    assert result.flattened["agent"] == ["tools", "agent", END]


def test_a_parallel_block_inside_a_loop_still_finds_its_join():
    spec = graph("__start__>A", "A>X", "A>Y", "X>J", "Y>J", cond("J", again="A", done="__end__"))

    result = graph_compile(spec)

    assert result.valid, result.errors
    assert result.compiled["__parallel__A"] == ["J"]


def test_a_plain_cycle_with_no_exit_has_no_path_to_end():
    result = graph_compile(graph("__start__>A", "A>B", "B>A"))

    assert set(codes(result)) == {("no_path_to_end", "A"), ("no_path_to_end", "B")}


# ---------------------------------------------------------------- interrupts


def test_interrupts_map_through_flattening():
    spec = seed_example(interrupt_before=["B", "C"], interrupt_after=["B", "A"])
    spec["nodes"][1]["subgraph"]["interrupt_before"] = ["E"]

    result = graph_compile(spec)

    assert result.valid, result.errors
    assert result.interrupt_before == ["B-D", "B-E", "C"]  # B's entry, the subgraph's own, C
    assert result.interrupt_after == ["A", "B-G"]  # B's exit
    assert "class n2,n3,n6 interruptBefore" in result.mermaid_source


def test_interrupts_on_a_subgraph_with_several_entries_and_exits():
    b = graph("__start__>D1", "__start__>D2", "D1>__end__", "D2>__end__")
    spec = graph(
        "__start__>B", "B>__end__", nodes=[{"id": "B", "subgraph": b}], interrupt_before=["B"], interrupt_after=["B"]
    )

    result = graph_compile(spec)

    assert result.interrupt_before == ["B-D1", "B-D2"]
    assert result.interrupt_after == ["B-D1", "B-D2"]
    assert "interruptBoth" in result.mermaid_source


# ---------------------------------------------------------------- mermaid


HOSTILE = 'a"b<script>alert(1)</script>|]];end\n%%'
NODE_LINE = re.compile(r'^    n\d+(\(\["[^"<>\[\]|]*"\]\)|\["[^"<>\[\]|]*"\]|\{\{"[^"<>\[\]|]*"\}\})$')
EDGE_LINE = re.compile(r'^    n\d+ (-->|-\.->|==>)(\|"[^"<>|]*"\|)? n\d+$')
CLASS_LINE = re.compile(r"^    (classDef \w+ [^\n]+|class n\d+(,n\d+)* \w+)$")


def test_mermaid_ids_are_generated_and_hostile_labels_escaped():
    edges = [(START, HOSTILE), (HOSTILE, "X"), (HOSTILE, "Y"), ("Y", "J"), ("J", END)]
    spec = graph(*[{"source": s, "target": t} for s, t in edges], cond("X", **{'"|x': "J"}))
    spec["interrupt_before"] = [HOSTILE]

    result = graph_compile(spec)

    for source in (result.mermaid_source, result.mermaid_compiled):
        lines = source.splitlines()
        assert lines[0] == "flowchart TD"
        for line in lines[1:]:
            assert NODE_LINE.match(line) or EDGE_LINE.match(line) or CLASS_LINE.match(line), line
        assert "<script>" not in source and HOSTILE not in source
        assert '["a#34;b#60;script#62;alert#40;1#41;#60;/script#62;#124;#93;#93;#59;end#10;#37;#37;"]' in source
    assert '-.->|"#34;#124;x"|' in result.mermaid_source


def test_start_end_and_parallel_nodes_have_their_own_shapes():
    result = graph_compile(seed_example())

    assert 'n0(["__start__"])' in result.mermaid_compiled
    assert '{{"__parallel__B-D"}}' in result.mermaid_compiled
    assert "classDef parallel" in result.mermaid_compiled
    assert "==>" not in result.mermaid_source


# ---------------------------------------------------------------- junk input


JUNK = [
    (None, "spec"),
    ([], "spec"),
    ("graph", "spec"),
    ({}, "nodes"),
    ({"nodes": "A"}, "nodes"),
    ({"nodes": None}, "nodes"),
    ({"nodes": [1]}, "nodes[0]"),
    ({"nodes": [{"id": "A"}, {"id": "B"}, {"name": "C"}]}, "nodes[2].id"),
    ({"nodes": [{"id": 3}]}, "nodes[0].id"),
    ({"nodes": [{"id": "A", "subgraph": []}]}, "nodes[0].subgraph"),
    ({"nodes": [{"id": "A", "subgraph": {"nodes": [{"id": "D"}, {"id": None}]}}]}, "nodes[0].subgraph.nodes[1].id"),
    ({"nodes": [], "edges": {}}, "edges"),
    ({"nodes": [], "edges": ["A>B"]}, "edges[0]"),
    ({"nodes": [], "edges": [{"target": "A"}]}, "edges[0].source"),
    ({"nodes": [], "edges": [{"source": "A"}]}, "edges[0]"),
    ({"nodes": [], "edges": [{"source": "A", "target": "B", "targets": {"x": "B"}}]}, "edges[0]"),
    ({"nodes": [], "edges": [{"source": "A", "target": ["B"]}]}, "edges[0].target"),
    ({"nodes": [], "edges": [{"source": "A", "condition": "c", "targets": {}}]}, "edges[0].targets"),
    ({"nodes": [], "edges": [{"source": "A", "condition": "c", "targets": ["B"]}]}, "edges[0].targets"),
    ({"nodes": [], "edges": [{"source": "A", "condition": "c", "targets": {"x": 1}}]}, 'edges[0].targets["x"]'),
    ({"nodes": [], "edges": [{"source": "A", "targets": {"x": "B"}}]}, "edges[0].condition"),
    ({"nodes": [], "edges": [{"source": "A", "condition": "c", "targets": {"x": "B"}, "parallel": "yes"}]}, "edges[0].parallel"),
    ({"nodes": [], "interrupt_before": "A"}, "interrupt_before"),
    ({"nodes": [], "interrupt_after": ["A", 2]}, "interrupt_after[1]"),
    ({"nodes": [{"id": "x" * (MAX_ID_LENGTH + 1)}]}, "nodes[0].id"),
    ({"nodes": [{"id": f"n{i}"} for i in range(MAX_NODES + 1)]}, f"nodes[{MAX_NODES}]"),
    ({"nodes": [], "edges": [{"source": "A", "target": "B"}] * (MAX_EDGES + 1)}, f"edges[{MAX_EDGES}]"),
]


@pytest.mark.parametrize("spec, path", JUNK, ids=[path for _, path in JUNK])
def test_junk_that_is_not_a_graph_raises_spec_error_naming_the_field(spec, path):
    with pytest.raises(SpecError) as raised:
        graph_compile(spec)

    assert raised.value.path == path
    assert str(raised.value).startswith(f"{path}: ")


def random_graph(rng: random.Random, depth: int = 0) -> dict[str, Any]:
    ids = [f"n{i}" for i in range(rng.randint(0, 7))] + rng.sample([START, END, "", "n1"], k=1)
    pick = lambda: rng.choice(ids + [START, END, "ghost"])  # noqa: E731
    nodes = [{"id": i} for i in ids]
    for node in nodes:
        if depth < 3 and rng.random() < 0.15:
            node["subgraph"] = random_graph(rng, depth + 1)
    edges: list[dict[str, Any]] = []
    for _ in range(rng.randint(0, 14)):
        if rng.random() < 0.25:
            outcomes = {f"o{k}": pick() for k in range(rng.randint(1, 3))}
            edges.append({"source": pick(), "condition": "c", "targets": outcomes, "parallel": rng.random() < 0.4})
        else:
            edges.append({"source": pick(), "target": pick()})
    return {
        "nodes": nodes,
        "edges": edges,
        "interrupt_before": [pick() for _ in range(rng.randint(0, 2))],
        "interrupt_after": [pick() for _ in range(rng.randint(0, 2))],
    }


def test_random_graphs_always_compile_to_a_full_answer():
    rng = random.Random(20240611)
    for _ in range(1500):
        result = graph_compile(random_graph(rng))

        answer = json.loads(json.dumps(result.as_dict()))
        assert answer["valid"] == (answer["errors"] == [])
        for adjacency in (answer["flattened"], answer["compiled"]):
            assert all(target in adjacency for targets in adjacency.values() for target in targets)


def test_a_large_graph_compiles():
    # 450 stacked diamonds: 1800 nodes and 450 parallel nodes, near the node limit.
    edges, previous = [], START
    for i in range(450):
        edges += [f"{previous}>a{i}", f"a{i}>b{i}", f"a{i}>c{i}", f"b{i}>j{i}", f"c{i}>j{i}"]
        previous = f"j{i}"
    result = graph_compile(graph(*edges, f"{previous}>__end__"))

    assert result.valid and len(result.inserted_nodes) == 450


def test_dense_random_graphs_refuse_every_fan_out_that_never_converges():
    # Random edges make nearly every node a fan-out whose branches never meet: the worst
    # case for step 3, which must not search the whole graph once per fan-out
    # (bench/graph_compile.py times it).
    rng = random.Random(1)
    chain = [f"{START}>n0", *(f"n{i}>n{i + 1}" for i in range(1999)), f"n1999>{END}"]
    extra = [f"n{rng.randrange(2000)}>n{rng.randrange(2000)}" for _ in range(10_000 - len(chain))]

    result = graph_compile(graph(*chain, *extra))

    assert not result.valid and {e.code for e in result.errors} == {"parallel_no_convergence"}
    fan_outs = {source for source, targets in result.flattened.items() if len(targets) > 1}
    assert {e.node for e in result.errors} <= fan_outs and len(result.errors) > 1900


def test_as_dict_has_the_api_shape():
    answer = graph_compile(seed_example()).as_dict()

    assert set(answer) == {
        "valid", "errors", "flattened", "compiled", "inserted_nodes", "parallel_nodes",
        "interrupt_before", "interrupt_after", "mermaid",
    }
    assert set(answer["mermaid"]) == {"source", "compiled"}
    assert answer["parallel_nodes"]["__parallel__B-D"]["branches"] == ["B-E", "B-F"]
    error = graph_compile(graph("__start__>A", "A>X", nodes=["A"])).as_dict()["errors"][0]
    assert set(error) == {"code", "message", "node", "edge"}


# ---------------------------------------------------------------- LangGraph JSON


LANGGRAPH_JSON = {
    "nodes": [
        {"id": "__start__", "type": "runnable", "data": {"id": ["langgraph"], "name": "__start__"}},
        {"id": "agent", "type": "runnable", "data": {"id": ["langgraph"], "name": "agent"}},
        {"id": "tools", "type": "runnable", "data": {"id": ["langgraph"], "name": "tools"}},
        {"id": "__end__"},
    ],
    "edges": [
        {"source": "__start__", "target": "agent"},
        {"source": "agent", "target": "__end__", "data": "done", "conditional": True},
        {"source": "agent", "target": "tools", "conditional": True},
        {"source": "tools", "target": "agent"},
    ],
}


def test_langgraph_json_is_converted_grouping_conditional_edges():
    assert from_langgraph_json(LANGGRAPH_JSON) == {
        "nodes": [{"id": "agent"}, {"id": "tools"}],
        "edges": [
            {"source": "__start__", "target": "agent"},
            {"source": "agent", "condition": "branch", "targets": {"done": "__end__", "tools": "tools"}},
            {"source": "tools", "target": "agent"},
        ],
        "interrupt_before": [],
        "interrupt_after": [],
    }


def test_graph_compile_detects_langgraph_json():
    result = graph_compile(LANGGRAPH_JSON)

    assert result.valid, result.errors
    assert result.flattened == {START: ["agent"], "agent": [END, "tools"], "tools": ["agent"], END: []}


def test_langgraph_json_junk_raises_spec_error():
    with pytest.raises(SpecError) as raised:
        graph_compile({"nodes": [{"id": "__start__", "type": "runnable"}], "edges": [{"source": "__start__"}]})

    assert raised.value.path == "edges[0].target"


class LoopState(TypedDict):
    steps: int


def loop_step(state: LoopState) -> dict[str, int]:
    return {"steps": state["steps"] + 1}


def loop_route(state: LoopState) -> str:
    return "finish" if state["steps"] > 2 else "act"


def test_a_real_langgraph_state_graph_compiles():
    graph_module = pytest.importorskip("langgraph.graph")
    builder = graph_module.StateGraph(LoopState)
    builder.add_node("agent", loop_step)
    builder.add_node("tools", loop_step)
    builder.add_edge(graph_module.START, "agent")
    builder.add_conditional_edges("agent", loop_route, {"act": "tools", "finish": graph_module.END})
    builder.add_edge("tools", "agent")

    result = graph_compile(builder.compile().get_graph().to_json())

    assert result.valid, result.errors
    assert set(result.flattened["agent"]) == {"tools", END}
    assert result.flattened["tools"] == ["agent"]
    assert '-.->|"finish"|' in result.mermaid_source


def test_mermaid_draws_each_subgraph_as_a_named_box_around_its_nodes():
    inner = graph("__start__>X", "X>__end__")
    nested = graph("__start__>D", "D>Y", "Y>__end__", nodes=["D", {"id": "Y", "subgraph": inner}])
    spec = graph("__start__>A", "A>B", "B>C", "C>__end__", nodes=["A", {"id": 'B"<b>', "subgraph": nested}, "C"])
    spec["edges"] = [{**e, "source": 'B"<b>'} if e["source"] == "B" else ({**e, "target": 'B"<b>'} if e.get("target") == "B" else e) for e in spec["edges"]]
    lines = graph_compile(spec).mermaid_source.splitlines()
    start = next(i for i, line in enumerate(lines) if "subgraph" in line)
    assert lines[start] == '    subgraph g3["B#34;#60;b#62;"]'
    assert lines[start + 1].strip().endswith('["B#34;#60;b#62;-D"]')
    assert lines[start + 2].strip().startswith("subgraph") and lines[start + 2].endswith('["B#34;#60;b#62;-Y"]')
    assert lines[start + 3].strip().endswith('["B#34;#60;b#62;-Y-X"]')
    assert lines[start + 4] == "        end" and lines[start + 5] == "    end"
    assert '["C"]' in lines[start + 6]
    assert sum(line.strip() == "end" for line in lines) == 2
