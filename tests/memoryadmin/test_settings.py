"""Configuration: every documented variable is read, only settings.py reads the environment,
and a value the server cannot use stops it at start with a message naming the variable."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
APP_PACKAGES = ("memoryadmin", "sessions_app", "store_app", "graphs_app")
# Prefixes of the variables the server reads; BENCH_*, PG_URL and the like belong to the tools.
SERVER_PREFIXES = ("DJANGO_", "MEMORYADMIN_", "DATABASE_", "GUNICORN_", "PROMETHEUS_")
ENV_HELPERS = {"env_str", "env_bool", "env_int", "env_float", "env_list", "env_choice", "env_rate", "env_cron"}


def documented_variables() -> set[str]:
    """The variables `.env.example` sets (one `NAME=value` line each)."""
    names = set()
    for line in (ROOT / ".env.example").read_text().splitlines():
        match = re.match(r"([A-Z][A-Z0-9_]*)=", line)
        if match:
            names.add(match.group(1))
    return names


def _called_name(node: ast.Call) -> str:
    func = node.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return ast.unparse(func)
    return ""


def read_variables(path: Path, readers: set[str]) -> set[str]:
    """Names passed as the first argument, a string literal, to one of `readers` in `path`."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and _called_name(node) in readers and node.args:
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                names.add(first.value)
    return names


def test_every_variable_in_env_example_is_read_where_it_says():
    documented = documented_variables()
    by_settings = read_variables(ROOT / "memoryadmin" / "settings.py", ENV_HELPERS)
    by_gunicorn = read_variables(ROOT / "gunicorn.conf.py", {"_env_int", "os.environ.get"})
    assert documented, ".env.example lists no variable"
    for name in sorted(documented):
        if name.startswith("GUNICORN_"):
            assert name in by_gunicorn, f"{name} is in .env.example but gunicorn.conf.py does not read it"
        else:
            assert name in by_settings, f"{name} is in .env.example but memoryadmin/settings.py does not read it"
    # And the other way: nothing is read that .env.example does not document.
    assert by_settings <= documented, sorted(by_settings - documented)
    assert {n for n in by_gunicorn if n.startswith("GUNICORN_")} <= documented


def test_every_variable_the_docs_name_is_in_env_example():
    documented = documented_variables()
    prefixes = "|".join(SERVER_PREFIXES)
    pattern = re.compile(rf"\b(?:{prefixes})[A-Z0-9_]*[A-Z0-9]\b")
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for name in set(pattern.findall(doc.read_text())):
            assert name in documented, f"{doc.relative_to(ROOT)} names {name}, which .env.example does not list"


def _application_modules():
    for package in APP_PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = path.relative_to(ROOT)
            # The client library agents import reads no server settings; migrations are history.
            if "migrations" in relative.parts or relative.parts[:2] == ("memoryadmin", "integrations"):
                continue
            yield relative, path


def test_only_settings_reads_the_environment_or_defaults_a_setting():
    problems = []
    for relative, path in _application_modules():
        if relative == Path("memoryadmin/settings.py"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            text = ast.unparse(node) if isinstance(node, ast.Call | ast.Subscript) else ""
            if isinstance(node, ast.Call):
                called = _called_name(node)
                if called in {"os.getenv", "os.environ.get"}:
                    problems.append(f"{relative}:{node.lineno}: {text}")
                if called == "getattr" and node.args and ast.unparse(node.args[0]) == "settings":
                    problems.append(f"{relative}:{node.lineno}: {text} (define the setting in settings.py)")
            elif isinstance(node, ast.Subscript) and ast.unparse(node.value) == "os.environ":
                problems.append(f"{relative}:{node.lineno}: {text}")
    assert not problems, "\n".join(problems)


def start(**env: str) -> subprocess.CompletedProcess:
    """Load the settings in a fresh interpreter, as the server does at start."""
    base = {k: v for k, v in os.environ.items() if not k.startswith((*SERVER_PREFIXES, "PYTEST"))}
    env = {"DJANGO_SETTINGS_MODULE": "memoryadmin.settings", "DJANGO_DEBUG": "1", "DJANGO_SECRET_KEY": "x" * 50, **env}
    return subprocess.run(
        [sys.executable, "-c", "import django; django.setup(); from django.conf import settings; print(settings.DEBUG)"],
        cwd=ROOT,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_valid_values_start():
    result = start(
        MEMORYADMIN_TURN_WINDOW="3",
        MEMORYADMIN_TURN_SSE_POLL_SECONDS="0.25",
        MEMORYADMIN_THROTTLE_RATE="100/s",
        DJANGO_LOG_LEVEL="WARNING",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "True"


@pytest.mark.parametrize(
    "name, junk",
    [
        ("MEMORYADMIN_TURN_SSE_POLL_SECONDS", "soon"),
        ("MEMORYADMIN_TURN_WINDOW", "0"),
        ("MEMORYADMIN_MAX_BODY_BYTES", "16MB"),
        ("MEMORYADMIN_THROTTLE_RATE", "lots"),
        ("DJANGO_LOG_LEVEL", "chatty"),
        ("MEMORYADMIN_RETENTION_SCHEDULE", "at three"),
        ("MEMORYADMIN_WORKER_HEARTBEAT_SECONDS", "0"),
        ("DATABASE_WORKER_URL", "mysql://db/memoryadmin"),
    ],
)
def test_a_junk_value_is_refused_at_start_naming_the_variable(name, junk):
    result = start(**{name: junk})
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr and name in result.stderr and repr(junk) in result.stderr


def test_an_empty_variable_is_an_unset_one_and_a_copy_of_env_example_sets_none_of_its_empty_ones(tmp_path):
    # The real environment: empty means the default (SQLite here), as for every reader.
    result = start(DATABASE_URL="", DJANGO_TIME_ZONE="", MEMORYADMIN_LANGGRAPH_MESSAGES_CHANNEL="")
    assert result.returncode == 0, result.stderr
    # A .env: `NAME=` leaves NAME unset, so .env.example copied as it is sets none of its empty ones.
    from memoryadmin.settings import load_env_file

    env = tmp_path / ".env"
    env.write_text((ROOT / ".env.example").read_text() + "MEMORYADMIN_TEST_FILLED='kept'\n")
    before = dict(os.environ)
    try:
        for name in ("DATABASE_URL", "PROMETHEUS_MULTIPROC_DIR"):
            os.environ.pop(name, None)
        load_env_file(env)
        assert "DATABASE_URL" not in os.environ and "PROMETHEUS_MULTIPROC_DIR" not in os.environ
        assert os.environ["MEMORYADMIN_TEST_FILLED"] == "kept"
    finally:
        os.environ.clear()
        os.environ.update(before)
