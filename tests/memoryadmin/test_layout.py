"""The floors of docs/architecture.md ("The map"), checked on every module's imports.

Each application module sits on one floor; a module imports only from its own floor or
lower ones, modules import each other without a cycle, another Django app's models are
read through that app's selectors (only operations and the project top read them
directly), and no module is longer than 600 lines. Imports are read with `ast`, both at
module level and inside functions: a deferred import is a dependency all the same.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("memoryadmin", "sessions_app", "store_app", "graphs_app")
MAX_LINES = 600

FLOORS = ("core", "store", "threads", "checkpoints", "turns", "graphs", "operations", "top")
# The project top: what wires the apps together or fills them with demo data.
TOP_MODULES = {"memoryadmin.urls", "memoryadmin.settings", "memoryadmin.management.commands.demo_data"}


def floor_of(module: str) -> str:
    def within(package: str) -> bool:
        return module == package or module.startswith(package + ".")

    if module in TOP_MODULES or within("memoryadmin.demo"):
        return "top"
    if within("memoryadmin.operations"):
        return "operations"
    if within("memoryadmin"):
        return "core"
    if within("store_app"):
        return "store"
    if within("sessions_app.threads"):
        return "threads"
    if within("sessions_app.checkpoints"):
        return "checkpoints"
    if within("sessions_app"):
        # sessions_app.turns, and the app's own modules above its three domains: its
        # AppConfig, the models registry Django and the migrations read, the URL includes.
        return "turns"
    if within("graphs_app"):
        return "graphs"
    raise AssertionError(f"{module} is on no floor")


def django_app_of(module: str) -> str:
    """The Django app a module belongs to (operations is an app of its own inside memoryadmin)."""
    if module.startswith("memoryadmin.operations"):
        return "operations"
    return module.split(".")[0]


@cache
def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if "migrations" in parts:
                continue
            if parts[-1] == "__init__":
                parts = parts[:-1]
            name = ".".join(parts)
            found[name] = path
    return found


def _known(name: str) -> str | None:
    """The application module `name` is, or is inside (an attribute of a module)."""
    known = modules()
    while name:
        if name in known:
            return name
        name = name.rpartition(".")[0]
    return None


@cache
def imports() -> dict[str, dict[str, int]]:
    """For every module, the application modules it imports, each with the first line doing so."""
    known = modules()
    graph: dict[str, dict[str, int]] = {}
    for name, path in known.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found: dict[str, int] = {}
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join(anchor + ([node.module] if node.module else []))
                # `from a import b` imports module a.b when there is one, else a's attribute b.
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
            for target in targets:
                module = _known(target)
                if module and module != name:
                    found.setdefault(module, node.lineno)
        graph[name] = found
    return graph


def test_the_scan_sees_the_code():
    found = imports()
    assert len(found) > 100
    # Known imports, so that the checks below cannot pass on an empty or broken scan.
    assert "sessions_app.checkpoints.selectors" in found["graphs_app.selectors"]
    assert "sessions_app.threads.models" in found["sessions_app.checkpoints.models"]
    assert "memoryadmin.params" in found["memoryadmin.selectors"]
    assert "graphs_app.compiler.model" in found["graphs_app.compiler.parsing"]
    assert {floor_of(name) for name in found} == set(FLOORS)


def test_no_module_imports_a_higher_floor():
    rank = {floor: index for index, floor in enumerate(FLOORS)}
    problems = [
        f"{module} ({floor_of(module)}) imports {target} ({floor_of(target)}) at line {line}"
        for module, targets in imports().items()
        for target, line in targets.items()
        if rank[floor_of(target)] > rank[floor_of(module)]
    ]
    assert not problems, "\n".join(problems)


def test_another_apps_models_are_read_through_its_selectors():
    direct = {"operations", "top"}
    problems = [
        f"{module} imports {target} at line {line}"
        for module, targets in imports().items()
        for target, line in targets.items()
        if floor_of(module) not in direct
        and target.rpartition(".")[2] == "models"
        and django_app_of(target) != django_app_of(module)
        and not target.startswith("memoryadmin.models")  # API keys and audit events: the core's own
    ]
    assert not problems, "\n".join(problems)


def test_modules_import_each_other_without_a_cycle():
    graph = imports()
    state: dict[str, int] = {}  # 1 on the current path, 2 done
    cycles = []

    def visit(start: str) -> None:
        # Iterative depth-first search: the path is the stack of (module, its remaining targets).
        path = [(start, iter(sorted(graph[start])))]
        state[start] = 1
        while path:
            module, pending = path[-1]
            for target in pending:
                if state.get(target) == 1:
                    names = [m for m, _ in path]
                    cycles.append(names[names.index(target) :] + [target])
                elif target not in state:
                    state[target] = 1
                    path.append((target, iter(sorted(graph[target]))))
                    break
            else:
                state[module] = 2
                path.pop()

    for module in sorted(graph):
        if module not in state:
            visit(module)
    assert not cycles, "\n".join(" -> ".join(cycle) for cycle in cycles)


def test_no_application_module_is_over_600_lines():
    too_long = {
        str(path.relative_to(ROOT)): lines
        for path in modules().values()
        if (lines := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert not too_long, too_long
