"""bench/langgraph_steps.py runs end to end: its smallest configuration (`--tiny`), on a fresh
PostgreSQL database of its own, through gunicorn from gunicorn.conf.py, LangGraph's
InMemorySaver / PostgresSaver and MemoryAdminSaver. Only the shape of what it reports is
checked here; the figures are the benchmark's business, never a test's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

from ..conftest import IS_POSTGRES

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif(not IS_POSTGRES, reason="the benchmark compares savers on PostgreSQL"),
]
ROOT = Path(__file__).resolve().parents[2]
SAVERS = {"InMemorySaver", "PostgresSaver", "MemoryAdminSaver"}
STORES = {"InMemoryStore", "PostgresStore", "MemoryAdminStore"}


def _admin_url() -> str:
    db = connection.settings_dict
    auth = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/postgres"


def test_smallest_configuration_reports_every_measure(tmp_path):
    if os.environ.get("DJANGO_DB_POOLER") == "transaction":
        pytest.skip("PostgresSaver prepares its statements: it needs PostgreSQL's own sessions, not a transaction pooler")
    pytest.importorskip("langgraph.checkpoint.postgres")
    pytest.importorskip("langgraph.prebuilt")
    out = tmp_path / "figures.json"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "DATABASE_", "PYTEST"))},
        "BENCH_ADMIN_URL": _admin_url(),
        "BENCH_DB": f"lgsteps_test_{os.getpid()}",
    }
    result = subprocess.run(
        [sys.executable, "bench/langgraph_steps.py", "--tiny", "--json", str(out)],
        check=False, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    for heading in ("### Invoke", "### Checkpoint put", "### Storage after", "### Client CPU", "### Event loop",
                    "### Store", "### Against the targets"):
        assert heading in result.stdout
    fig = json.loads(out.read_text())
    rounds = fig["rounds"]
    assert fig["config"] == "tiny"

    assert len(fig["invoke"]) == 2
    for data in fig["invoke"].values():
        assert set(data["samples"]) == SAVERS
        assert all(len(samples) == rounds for samples in data["samples"].values())
        assert data["steps"] >= 4  # input, __start__, then the graph's own steps
        assert data["requests"] > 0 and data["up"] > 0 and data["down"] > 0

    assert sorted(int(size) for size in fig["put"]) == [10, 100]
    for samples in fig["put"].values():
        assert set(samples) == SAVERS and all(len(s) == rounds for s in samples.values())

    storage = fig["storage"]
    assert storage["turns"] == storage["planned"] == 3
    for name in ("PostgresSaver", "MemoryAdminSaver"):
        assert storage[name]["bytes"] > 0 and storage[name]["tables"]
    assert set(storage["PostgresSaver"]["tables"]) <= {"checkpoints", "checkpoint_blobs", "checkpoint_writes"}
    assert all(table.startswith("sessions_app_") for table in storage["MemoryAdminSaver"]["tables"])

    assert len(fig["cpu"]) == 2
    for samples in fig["cpu"].values():
        assert set(samples) == SAVERS and all(len(s) == rounds for s in samples.values())

    runs = {"ticker alone", "InMemorySaver", "AsyncPostgresSaver", "MemoryAdminSaver"}
    # Run again with the server's processes held off the loop's core where this machine lets the
    # benchmark move them (Linux, two cores or more, allowed to): both servers' runs, or neither.
    pinned = {"AsyncPostgresSaver, server off the loop's core", "MemoryAdminSaver, server off the loop's core"}
    assert set(fig["stalls"]) in (runs, runs | pinned)
    assert all(fig["stalls"][name]["puts"] > 0 for name in set(fig["stalls"]) - {"ticker alone"})

    assert set(fig["store"]) == {"put", "get"}
    for samples in fig["store"].values():
        assert set(samples) == STORES

    # Run alone, the in-process rows of bench/run.py's table are not there: that row says so.
    assert len(fig["targets"]) >= 10
    assert all(set(row) == {"measure", "figure", "target", "within"} for row in fig["targets"])
    assert [row["within"] for row in fig["targets"]].count(None) == 1
