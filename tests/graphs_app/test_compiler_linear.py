"""Step 3 (and the flattening splice) at scale: the compiler's linear checks agree with the
plain per-fan-out search on every graph, and the raised limits hold."""

from __future__ import annotations

import random
from typing import Any

import pytest

from graphs_app.compiler import END, MAX_EDGES, MAX_NODES, START, SpecError, graph_compile
from graphs_app.compiler.flatten import Flattener, Route, _splice_plain
from graphs_app.compiler.parallel import parallel_nodes_insert
from graphs_app.compiler.parsing import Parser
from graphs_app.compiler.validation import graph_validate

from . import reference_parallel
from .helpers import chain
from .test_compiler import random_graph


def flattened(spec: dict[str, Any]) -> tuple[list[str], dict[str, Route]]:
    parsed = Parser().graph(spec, path="", depth=0)
    errors: list = []
    graph_validate(parsed, "", None, errors)
    flattener = Flattener(errors)
    flattener.add(parsed, prefix="", entry=START, exit=END)
    flattener.contract()
    keys = [START, *flattener.order, END]
    return keys, {key: flattener.routes.get(key) or Route() for key in keys}


def step_3(insert, keys, routes) -> tuple[list[str], dict, list[dict], list[dict]]:
    errors: list = []
    compiled_keys, compiled, parallel = insert(keys, routes, errors)
    shapes = {key: (route.targets, route.outcomes, route.condition) for key, route in compiled.items()}
    return compiled_keys, shapes, [{"id": p.id, **p.as_dict()} for p in parallel], [e.as_dict() for e in errors]


def assert_same_as_reference(spec: dict[str, Any]) -> None:
    keys, routes = flattened(spec)
    want = step_3(reference_parallel.parallel_nodes_insert, keys, routes)
    got = step_3(parallel_nodes_insert, keys, routes)
    assert got[:3] == want[:3], spec
    assert [(e["code"], e.get("node")) for e in got[3]] == [(e["code"], e.get("node")) for e in want[3]], spec
    for mine, theirs in zip(got[3], want[3]):
        if theirs["code"] == "parallel_no_convergence":
            # Both name the same fan-out; which meeting or way around they cite may differ.
            assert mine["message"].startswith(f'the parallel branches of "{theirs["node"]}" ('), mine
        else:
            assert mine == theirs


def blocks(rng: random.Random, size: int) -> dict[str, Any]:
    """Nested and stacked parallel blocks, chains, and a few stray edges and conditions."""
    free = [f"v{i}" for i in range(size)]
    nodes: list[str] = []
    edges: list[dict[str, Any]] = []

    def build(entry: str, exit: str, budget: int, depth: int) -> None:
        if budget <= 0 or depth > 6 or not free:
            edges.append({"source": entry, "target": exit})
        elif rng.random() < 0.4:
            middle = free.pop()
            nodes.append(middle)
            build(entry, middle, budget // 2, depth + 1)
            build(middle, exit, budget // 2, depth + 1)
        else:
            count = rng.randint(2, 3)
            for _ in range(count):
                if free:
                    branch = free.pop()
                    nodes.append(branch)
                    edges.append({"source": entry, "target": branch})
                    build(branch, exit, budget // count - 1, depth + 1)

    build(START, END, size, 0)
    for _ in range(rng.randint(0, 3)):
        source, target = rng.choice(nodes), rng.choice([*nodes, END])
        if rng.random() < 0.3:
            targets = {"x": target, "y": rng.choice(nodes)}
            edges.append({"source": source, "condition": "c", "targets": targets, "parallel": rng.random() < 0.5})
        else:
            edges.append({"source": source, "target": target})
    return {"nodes": [{"id": n} for n in nodes], "edges": edges}


def test_step_3_agrees_with_the_plain_search_on_random_graphs():
    rng = random.Random(20261201)
    for _ in range(1500):
        assert_same_as_reference(random_graph(rng))


def test_step_3_agrees_with_the_plain_search_on_nested_and_stacked_blocks():
    rng = random.Random(7)
    for _ in range(1500):
        assert_same_as_reference(blocks(rng, rng.randint(3, 60)))


def ladder(count: int) -> dict[str, Any]:
    """s0 fans out to a0 and s1, s1 to a1 and s2, …: blocks nested in one another, one join."""
    edges = [(START, "s0"), ("J", END)]
    for i in range(count):
        edges += [(f"s{i}", f"a{i}"), (f"a{i}", "J"), (f"s{i}", f"s{i + 1}" if i + 1 < count else "t"), ]
    edges.append(("t", "J"))
    names = dict.fromkeys(n for edge in edges for n in edge if n not in (START, END))
    return {"nodes": [{"id": n} for n in names], "edges": [{"source": a, "target": b} for a, b in edges]}


def onion(count: int) -> dict[str, Any]:
    """Blocks nested like an onion, each with its own join: s_i fans out to x_i and s_{i+1}."""
    edges = [(START, "s0"), ("j0", END), (f"s{count}", f"j{count - 1}")]
    for i in range(count):
        edges += [(f"s{i}", f"x{i}"), (f"s{i}", f"s{i + 1}"), (f"x{i}", f"j{i}")]
        if i:
            edges.append((f"j{i}", f"j{i - 1}"))
    names = dict.fromkeys(n for edge in edges for n in edge if n not in (START, END))
    return {"nodes": [{"id": n} for n in names], "edges": [{"source": a, "target": b} for a, b in edges]}


@pytest.mark.parametrize("make", [ladder, onion])
def test_deeply_nested_blocks_compile_as_the_plain_search_says(make):
    spec = make(300)
    assert_same_as_reference(spec)
    result = graph_compile(spec)
    assert result.valid and len(result.inserted_nodes) == 300


def test_a_nested_block_entered_from_outside_is_still_searched():
    # x enters b1's block through its branch p, so the block around it cannot step over it:
    # outer branches a and x both reach p.
    spec = {
        "nodes": [{"id": n} for n in ["S", "a", "x", "b1", "p", "q", "J1", "J"]],
        "edges": [
            {"source": START, "target": "S"},
            {"source": "S", "target": "a"}, {"source": "S", "target": "x"},
            {"source": "a", "target": "b1"},
            {"source": "b1", "target": "p"}, {"source": "b1", "target": "q"},
            {"source": "p", "target": "J1"}, {"source": "q", "target": "J1"},
            {"source": "x", "target": "p"},
            {"source": "J1", "target": "J"},
            {"source": "J", "target": END},
        ],
    }
    assert_same_as_reference(spec)
    result = graph_compile(spec)
    assert [(e.code, e.node) for e in result.errors] == [("parallel_no_convergence", "S")]


def test_a_chain_of_ten_thousand_nodes_compiles():
    result = graph_compile(chain(10_000))
    assert result.valid and len(result.flattened) == 10_002
    assert result.compiled == result.flattened


def test_the_limits_can_be_lowered_and_name_the_field():
    with pytest.raises(SpecError) as raised:
        graph_compile(chain(51), max_nodes=50)
    assert raised.value.path == "nodes[50]"
    with pytest.raises(SpecError) as raised:
        graph_compile(chain(30), max_edges=30)
    assert raised.value.path == "edges[30]"
    assert graph_compile(chain(50), max_nodes=50, max_edges=51).valid
    assert MAX_NODES >= 10_000 and MAX_EDGES > MAX_NODES


def test_splicing_in_place_equals_the_copying_splice():
    rng = random.Random(3)
    for _ in range(2000):
        targets = list(dict.fromkeys(rng.choice("abcdefgh") for _ in range(rng.randint(1, 8))))
        placeholder = rng.choice([*targets, "z"])
        new = list(dict.fromkeys(rng.choice("abcdefghij") for _ in range(rng.randint(0, 4))))
        route = Route(list(targets))
        _splice_plain(route, placeholder, new, set(route.targets), near=rng.randint(0, 8))
        assert route.targets == Route(list(targets)).replaced(placeholder, new).targets


def test_one_node_into_many_subgraphs_flattens_to_their_entries():
    inner = {
        "nodes": [{"id": "P"}, {"id": "Q"}],
        "edges": [{"source": START, "target": "P"}, {"source": START, "target": "Q"},
                  {"source": "P", "target": END}, {"source": "Q", "target": END}],
    }
    count = 2000
    spec = {
        "nodes": [{"id": "S"}, {"id": "J"}, *({"id": f"B{i}", "subgraph": inner} for i in range(count))],
        "edges": [{"source": START, "target": "S"}, {"source": "J", "target": END},
                  *({"source": "S", "target": f"B{i}"} for i in range(count)),
                  *({"source": f"B{i}", "target": "J"} for i in range(count))],
    }
    result = graph_compile(spec)
    assert result.valid
    assert result.flattened["S"] == [f"B{i}-{n}" for i in range(count) for n in "PQ"]
    assert result.parallel_nodes[0].join == "J"
