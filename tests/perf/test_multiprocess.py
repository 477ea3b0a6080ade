"""Past one process: gunicorn with two worker processes (gunicorn.conf.py) on one database.

Concurrent writers landing on different processes lose nothing and never collide,
and /metrics, answered by whichever worker, counts the requests of all of them.
PostgreSQL only: the workers are separate processes on the test database.
"""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from pathlib import Path

import httpx
import pytest
from django.db import connection
from prometheus_client.parser import text_string_to_metric_families

from memoryadmin.apikeys import apikey_create
from sessions_app.models import Block, Checkpoint, Thread

from ..conftest import IS_POSTGRES

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif(not IS_POSTGRES, reason="worker processes share the database only on PostgreSQL"),
    pytest.mark.django_db(transaction=True),
]
ROOT = Path(__file__).resolve().parents[2]
CLIENTS = 12
PER_CLIENT = 8


def _free_port() -> int:
    with closing(socket.socket()) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _database_url() -> str:
    db = connection.settings_dict
    auth = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


@pytest.fixture
def server(tmp_path):
    """gunicorn from gunicorn.conf.py: two worker processes, so concurrent requests must spread."""
    port = _free_port()
    metrics_dir = tmp_path / "metrics"
    env = {
        # DJANGO_DB_POOLER is kept: behind PgBouncer the server must not prepare statements.
        **{k: v for k, v in os.environ.items() if not (k.startswith(("DJANGO_", "PYTEST")) and k != "DJANGO_DB_POOLER")},
        "DATABASE_URL": _database_url(),
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
        "DJANGO_DEBUG": "0",
        "DJANGO_LOG_LEVEL": "WARNING",
        "GUNICORN_BIND": f"127.0.0.1:{port}",
        "GUNICORN_WORKERS": "2",
        "GUNICORN_ACCESS_LOG": "",
        "GUNICORN_LOG_LEVEL": "warning",
        "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "-c", "gunicorn.conf.py"], cwd=ROOT, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(200):
            try:
                if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.05)
        else:
            raise RuntimeError("gunicorn did not start: " + proc.stdout.read().decode()[-2000:])
        yield base, proc, metrics_dir
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _together(jobs):
    barrier = threading.Barrier(len(jobs))

    def start(job):
        barrier.wait()
        return job()

    with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        return [f.result() for f in [pool.submit(start, job) for job in jobs]]


def _worker_pids(metrics_dir: Path, master: int) -> set[int]:
    """Processes that counted something: each writes its own counter_<pid>.db."""
    pids = {int(path.stem.rpartition("_")[2]) for path in metrics_dir.glob("counter_*.db")}
    return pids - {master}


def _counted(base: str, method: str) -> int:
    text = httpx.get(f"{base}/metrics", timeout=10).text
    total = 0
    for family in text_string_to_metric_families(text):
        if family.name == "http_requests":
            total += sum(s.value for s in family.samples if s.name == "http_requests_total" and s.labels["method"] == method)
    return int(total)


def test_two_workers_pushing_checkpoints_to_one_thread_lose_nothing(alice, server):
    base, proc, metrics_dir = server
    key = apikey_create(owner=alice).plaintext
    url = f"{base}/api/v1/threads/mp-race/checkpoints"

    def client(n):
        def job():
            statuses = []
            with httpx.Client(headers={"Authorization": f"Bearer {key}"}, timeout=60) as http:
                for i in range(PER_CLIENT):
                    body = {"checkpoint": {"channel_values": {"step": i}}, "metadata": {"client": n, "i": i}}
                    statuses.append(http.post(url, json=body).status_code)
            return statuses

        return job

    results = _together([client(n) for n in range(CLIENTS)])
    assert [s for statuses in results for s in statuses] == [201] * (CLIENTS * PER_CLIENT)
    thread = Thread.objects.get(thread_id="mp-race")
    seen = sorted((m["client"], m["i"]) for m in Checkpoint.objects.filter(thread=thread).values_list("metadata", flat=True))
    assert seen == [(n, i) for n in range(CLIENTS) for i in range(PER_CLIENT)]
    assert len(_worker_pids(metrics_dir, proc.pid)) == 2


def test_growing_saves_from_two_workers_keep_seq_unique(alice, server):
    base, proc, _ = server
    key = apikey_create(owner=alice).plaintext
    url = f"{base}/api/v1/threads/mp-grow/agent-state"
    turns = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i}"} for i in range(10 + 2 * CLIENTS)]

    def put(n):
        def job():
            with httpx.Client(headers={"Authorization": f"Bearer {key}"}, timeout=60) as http:
                return http.put(url, json={"agent_code": "bot", "context": turns[:n]})

        return job

    put(10)()
    responses = _together([put(10 + 2 * (i + 1)) for i in range(CLIENTS)])
    assert [r.status_code for r in responses] == [200] * CLIENTS
    thread = Thread.objects.get(thread_id="mp-grow")
    seqs = list(Block.objects.filter(thread=thread).values_list("seq", flat=True))
    assert len(seqs) == len(set(seqs)) and thread.last_seq == max(seqs)
    # Every block a save reported is there, archived or active.
    assert len(seqs) == 10 + sum(r.json()["appended"] for r in responses)
    active = list(Block.objects.filter(thread=thread, archived=False).order_by("seq").values_list("position", flat=True))
    assert active == list(range(len(active))) == list(range(thread.active_count))


def test_metrics_sum_the_requests_of_every_worker(alice, server):
    base, proc, metrics_dir = server
    sent = 0
    # Bursts of concurrent requests until both workers have served some (a sync worker
    # serves one request at a time, so a burst spreads over the two).
    for _ in range(50):
        _together([lambda: httpx.get(f"{base}/healthz", timeout=10)] * 8)
        sent += 8
        if len(_worker_pids(metrics_dir, proc.pid)) == 2:
            break
    assert len(_worker_pids(metrics_dir, proc.pid)) == 2
    # The fixture's readiness probes are GETs too: count them as well, from a baseline.
    before = _counted(base, "GET")
    _together([lambda: httpx.get(f"{base}/healthz", timeout=10)] * 16)
    # One /metrics GET (the baseline read) lands between the two reads.
    assert _counted(base, "GET") == before + 16 + 1
