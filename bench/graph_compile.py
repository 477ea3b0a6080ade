"""The graph compiler timed on large graphs, optionally against another revision of it.

    .venv/bin/python bench/graph_compile.py [--small] [--rounds 5] [--against REV] [--write]

The compiler is pure Python (graphs_app/compiler/, no database, no Django): each graph
below is compiled ``--rounds`` times in this process and the median is reported, as
CPU time of this process (what the compile costs, whatever else the machine runs) and
as wall time.

1. Chains of 1,000, 5,000 and 10,000 nodes.
2. 2,000 nodes and 10,000 edges: a chain plus random edges, so nearly every node is a
   fan-out whose branches never meet (1,952 ``parallel_no_convergence`` errors).
3. Parallel blocks: 2,500 stacked diamonds (10,000 nodes), blocks nested 3,333 deep
   around one another, and one node fanning out into 5,000 subgraphs of two entries.

``--against REV`` also loads graphs_app/compiler/ as it is at git revision REV (read
with ``git show``, into a temporary directory) and times it on the same graphs, with
its node and edge limits lifted so that every graph is compiled; its answers are
compared with this compiler's (the ``valid`` flag, the adjacency lists, the parallel
nodes, and the error codes with their nodes). A graph taking that compiler more than
``--budget`` seconds (default 60) is timed once. ``--small`` divides the sizes by 10.
``--write`` replaces the
"graph-compile" section of docs/benchmarks.md. Also run by ``make bench``.
"""

from __future__ import annotations

import argparse
import importlib
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from graphs_app.compiler import END, START, graph_compile  # noqa: E402
from run import log, write_section  # noqa: E402

LIMITS = {"max_nodes": 50_000, "max_edges": 100_000}
MODULES = ("__init__", "flatten", "mermaid", "model", "parallel", "parsing", "validation")


def spec_of(edges: list[tuple[str, str]]) -> dict[str, Any]:
    names = dict.fromkeys(n for edge in edges for n in edge if n not in (START, END))
    return {"nodes": [{"id": n} for n in names], "edges": [{"source": a, "target": b} for a, b in edges]}


def chain(count: int) -> dict[str, Any]:
    hops = [START, *(f"n{i}" for i in range(count)), END]
    return spec_of(list(zip(hops, hops[1:])))


def dense(count: int, edges: int, seed: int = 1) -> dict[str, Any]:
    rng = random.Random(seed)
    hops = [START, *(f"n{i}" for i in range(count)), END]
    pairs = list(zip(hops, hops[1:]))
    pairs += [(f"n{rng.randrange(count)}", f"n{rng.randrange(count)}") for _ in range(edges - len(pairs))]
    return spec_of(pairs)


def diamonds(count: int) -> dict[str, Any]:
    edges, previous = [], START
    for i in range(count):
        edges += [(previous, f"a{i}"), (f"a{i}", f"b{i}"), (f"a{i}", f"c{i}"), (f"b{i}", f"j{i}"), (f"c{i}", f"j{i}")]
        previous = f"j{i}"
    return spec_of([*edges, (previous, END)])


def onion(count: int) -> dict[str, Any]:
    """s_i fans out to x_i and s_{i+1}; x_i joins at j_i, and j_i leads to j_{i-1}."""
    edges = [(START, "s0"), ("j0", END), (f"s{count}", f"j{count - 1}")]
    for i in range(count):
        edges += [(f"s{i}", f"x{i}"), (f"s{i}", f"s{i + 1}"), (f"x{i}", f"j{i}")]
        if i:
            edges.append((f"j{i}", f"j{i - 1}"))
    return spec_of(edges)


def into_subgraphs(count: int) -> dict[str, Any]:
    inner = spec_of([(START, "P"), (START, "Q"), ("P", END), ("Q", END)])
    return {
        "nodes": [{"id": "S"}, {"id": "J"}, *({"id": f"B{i}", "subgraph": inner} for i in range(count))],
        "edges": [{"source": START, "target": "S"}, {"source": "J", "target": END},
                  *({"source": "S", "target": f"B{i}"} for i in range(count)),
                  *({"source": f"B{i}", "target": "J"} for i in range(count))],
    }


def graphs(scale: int) -> list[tuple[str, Callable[[], dict[str, Any]]]]:
    """The graphs timed; ``scale`` divides their sizes (10 for ``--small``)."""

    def n(count: int) -> int:
        return max(1, count // scale)

    return [
        (f"a chain of {n(1_000):,} nodes", lambda: chain(n(1_000))),
        (f"a chain of {n(5_000):,} nodes", lambda: chain(n(5_000))),
        (f"a chain of {n(10_000):,} nodes", lambda: chain(n(10_000))),
        (f"{n(2_000):,} nodes, {n(10_000):,} edges (a chain and random edges)", lambda: dense(n(2_000), n(10_000))),
        (f"{n(2_500):,} stacked diamonds ({4 * n(2_500):,} nodes)", lambda: diamonds(n(2_500))),
        (f"{n(3_333):,} blocks nested in one another ({3 * n(3_333) + 1:,} nodes)", lambda: onion(n(3_333))),
        (f"one node into {n(5_000):,} subgraphs of 2 entries ({2 * n(5_000) + 2:,} nodes once flattened)", lambda: into_subgraphs(n(5_000))),
    ]


def old_compiler(revision: str) -> Callable[[Any], Any]:
    """graphs_app/compiler/ at ``revision``, as a package of its own, limits lifted."""
    folder = Path(tempfile.mkdtemp(prefix="graph-compiler-"))
    package = folder / "compiler_at_revision"
    package.mkdir()
    for name in MODULES:
        source = subprocess.run(
            ["git", "show", f"{revision}:graphs_app/compiler/{name}.py"], cwd=ROOT, check=True, capture_output=True, text=True
        ).stdout
        (package / f"{name}.py").write_text(source)
    sys.path.insert(0, str(folder))
    compiler = importlib.import_module("compiler_at_revision")
    for module in (compiler, importlib.import_module("compiler_at_revision.parsing")):
        module.MAX_NODES, module.MAX_EDGES = LIMITS["max_nodes"], LIMITS["max_edges"]
    return compiler.graph_compile


def timed(compile_: Callable[[Any], Any], spec: Any, rounds: int, budget: float) -> tuple[float, float, Any]:
    """Median CPU and wall seconds of ``rounds`` compiles (one when the first is over budget)."""
    cpu, wall, result = [], [], None
    for _ in range(rounds):
        started_cpu, started_wall = time.process_time(), time.perf_counter()
        result = compile_(spec)
        cpu.append(time.process_time() - started_cpu)
        wall.append(time.perf_counter() - started_wall)
        if wall[-1] > budget:
            break
    return statistics.median(cpu), statistics.median(wall), result


def summary(result: Any) -> tuple:
    answer = result.as_dict()
    errors = [(e["code"], e.get("node")) for e in answer["errors"]]
    return answer["valid"], answer["flattened"], answer["compiled"], answer["parallel_nodes"], errors


def seconds(value: float) -> str:
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--small", action="store_true", help="graphs a tenth of the size")
    parser.add_argument("--against", metavar="REV", help="also time graphs_app/compiler/ at this git revision")
    parser.add_argument("--budget", type=float, default=60.0, help="seconds after which the other revision is timed once")
    parser.add_argument("--write", action="store_true", help="write the figures into docs/benchmarks.md")
    args = parser.parse_args()

    other = old_compiler(args.against) if args.against else None
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    rows = []
    for label, make in graphs(10 if args.small else 1):
        spec = make()
        cpu, wall, result = timed(lambda s: graph_compile(s, **LIMITS), spec, args.rounds, args.budget)
        row = [label, f"{seconds(cpu)} ({seconds(wall)})", f"{len(result.errors)}"]
        if other is not None:
            old_cpu, old_wall, old_result = timed(other, spec, args.rounds, args.budget)
            same = "yes" if summary(old_result) == summary(result) else "**no**"
            row[1:1] = [f"{seconds(old_cpu)} ({seconds(old_wall)})"]
            row += [f"{old_cpu / cpu:.1f}×", same]
        log(" | ".join(row))
        rows.append(row)

    against = f" against `{args.against}`" if other is not None else ""
    report = (
        f"Measured by `bench/graph_compile.py`{against} with Python {sys.version.split()[0]}, median of"
        f" {args.rounds} rounds, CPU time of the process (wall time in brackets), load average"
        f" {load_before:.1f} before and {os.getloadavg()[0]:.1f} after the run"
        f" ({time.perf_counter() - started:.0f} s in all).\n\n"
    )
    if other is not None:
        report += f"| graph | `{args.against}` | this compiler | errors | faster | same answer |\n|---|---:|---:|---:|---:|---|\n"
    else:
        report += "| graph | compile | errors |\n|---|---:|---:|\n"
    report += "".join("| " + " | ".join(row) + " |\n" for row in rows)
    print(report)
    if args.write:
        write_section("benchmarks.md", "graph-compile", report)


if __name__ == "__main__":
    main()
