"""Bodies sent chunked (Transfer-Encoding, no Content-Length), over real sockets.

gunicorn de-chunks bodies and marks its input terminated: there a chunked body is read
and size-checked exactly like one with Content-Length. The development server (Django's
threaded WSGI server, the one `live_server` runs) cannot read one: 411, nothing written.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import orjson
import pytest
from django.db import connection

from memoryadmin.apikeys import apikey_create
from sessions_app.models import Block, Thread
from sessions_app.threads.services import thread_save_agent_state

from .servers import ROOT, free_port

pytestmark = pytest.mark.django_db(transaction=True)

LIMIT = 64 * 1024
CONTEXT = [{"role": "user", "content": "hello"}]


def chunked(body: dict, piece: int = 7) -> Iterator[bytes]:
    """The JSON of `body` in small pieces: httpx sends an iterator chunked, without Content-Length."""
    data = orjson.dumps(body)
    for start in range(0, len(data), piece):
        yield data[start : start + piece]


def database_url() -> str:
    db = connection.settings_dict
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    auth = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


@pytest.fixture
def gunicorn(tmp_path):
    port = free_port()
    env = {
        # DJANGO_DB_POOLER is kept: behind PgBouncer the server must not prepare statements.
        **{k: v for k, v in os.environ.items() if not (k.startswith(("DJANGO_", "PYTEST", "MEMORYADMIN_")) and k != "DJANGO_DB_POOLER")},
        "DATABASE_URL": database_url(),
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
        "DJANGO_LOG_LEVEL": "WARNING",
        "MEMORYADMIN_MAX_BODY_BYTES": str(LIMIT),
        "GUNICORN_BIND": f"127.0.0.1:{port}",
        "GUNICORN_WORKERS": "1",
        "GUNICORN_ACCESS_LOG": "",
        "GUNICORN_LOG_LEVEL": "warning",
        "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "metrics"),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "-c", "gunicorn.conf.py"], cwd=ROOT, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"{base}/metrics", timeout=1)
                break
            except httpx.HTTPError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("gunicorn did not start: " + proc.stdout.read().decode()[-2000:]) from None
                time.sleep(0.1)
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.fixture
def key(alice):
    thread_save_agent_state(actor=alice, thread_id="t1", agent_code="bot", context=CONTEXT)
    return {"Authorization": f"Bearer {apikey_create(owner=alice).plaintext}", "Content-Type": "application/json"}


def send(method: str, url: str, headers: dict, body) -> httpx.Response:
    response = httpx.request(method, url, headers=headers, content=body, timeout=30)
    return response


def test_gunicorn_honours_chunked_bodies_like_sized_ones(gunicorn, key):
    api = f"{gunicorn}/api/v1"
    created = send("POST", f"{api}/threads", key, chunked({"thread_id": "chunked-1", "metadata": {"via": "chunks"}}))
    assert created.status_code == 201, created.text
    assert created.json()["thread_id"] == "chunked-1"
    saved = send("PUT", f"{api}/threads/chunked-1/agent-state", key, chunked({"agent_code": "bot", "context": CONTEXT * 3}))
    assert saved.status_code == 200 and saved.json()["appended"] == 3, saved.text
    patched = send("PATCH", f"{api}/threads/chunked-1", key, chunked({"metadata": {"step": 2}}))
    assert patched.status_code == 200 and patched.json()["metadata"] == {"via": "chunks", "step": 2}, patched.text
    copied = send("POST", f"{api}/threads/t1/copy", key, chunked({"thread_id": "copy-target"}))
    assert copied.status_code in (200, 201) and copied.json()["thread_id"] == "copy-target", copied.text
    assert set(Thread.objects.values_list("thread_id", flat=True)) == {"t1", "chunked-1", "copy-target"}
    assert Thread.objects.get(thread_id="chunked-1").metadata == {"via": "chunks", "step": 2}
    assert Block.objects.filter(thread__thread_id="chunked-1").count() == 3


@pytest.mark.parametrize("method, path", [("POST", "/threads"), ("PUT", "/threads/t1/agent-state"), ("PATCH", "/threads/t1")])
def test_gunicorn_refuses_a_chunked_body_over_the_limit_with_413(gunicorn, key, method, path):
    before = Thread.objects.count(), Block.objects.count(), Thread.objects.get(thread_id="t1").metadata
    body = {"thread_id": "big", "agent_code": "bot", "context": [{"role": "user", "content": "x" * LIMIT}], "metadata": {"x": "y" * LIMIT}}
    response = send(method, f"{gunicorn}/api/v1{path}", key, chunked(body, piece=4096))
    assert response.status_code == 413 and response.json()["code"] == "too_large"
    assert (Thread.objects.count(), Block.objects.count(), Thread.objects.get(thread_id="t1").metadata) == before


@pytest.mark.parametrize(
    "method, path, body",
    [
        ("POST", "/threads", {"thread_id": "chunked-1"}),
        ("PUT", "/threads/t1/agent-state", {"agent_code": "bot", "context": CONTEXT * 2}),
        ("PATCH", "/threads/t1", {"metadata": {"step": 2}}),
        ("POST", "/threads/t1/copy", {"thread_id": "copy-target"}),
    ],
)
def test_the_development_server_answers_a_chunked_body_411_and_writes_nothing(live_server, key, method, path, body):
    before = Thread.objects.count(), Block.objects.count(), Thread.objects.get(thread_id="t1").metadata
    response = send(method, f"{live_server.url}/api/v1{path}", key, chunked(body))
    assert response.status_code == 411 and response.json()["code"] == "length_required"
    assert (Thread.objects.count(), Block.objects.count(), Thread.objects.get(thread_id="t1").metadata) == before
    sized = httpx.request(method, f"{live_server.url}/api/v1{path}", headers=key, content=orjson.dumps(body), timeout=30)
    assert sized.status_code < 300, sized.text
