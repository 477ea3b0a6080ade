"""Fault behaviour with real processes: the database goes away, a server is killed mid-stream."""

from __future__ import annotations

import threading
import time

import httpx
import pytest

from .servers import PrivateCluster, Server, manage, postgres_bindir

pytestmark = [
    pytest.mark.skipif(postgres_bindir() is None, reason="PostgreSQL server binaries are not installed"),
]


def turns(count: int) -> list[dict]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i}"} for i in range(count)]


@pytest.fixture(scope="module")
def cluster():
    cluster = PrivateCluster()
    cluster.start()
    manage(cluster.url, "migrate", "--noinput")
    yield cluster
    cluster.destroy()


@pytest.fixture
def server(cluster):
    server = Server(cluster.url)
    server.start()
    yield server
    server.kill()


@pytest.fixture
def key(cluster):
    return manage(cluster.url, "apikey", "create", "--user", "faulty", "--create-user").strip().splitlines()[-1]


def test_an_outage_is_a_503_and_the_server_recovers_without_a_restart(cluster, server, key):
    headers = {"Authorization": f"Bearer {key}"}
    state = f"{server.url}/api/v1/threads/outage/agent-state"
    assert httpx.put(state, json={"agent_code": "a", "context": turns(2)}, headers=headers).status_code == 200

    cluster.stop()
    try:
        health = httpx.get(f"{server.url}/healthz")
        assert health.status_code == 503 and health.json()["status"] == "unavailable"
        for response in (
            httpx.get(state, headers=headers),
            httpx.put(state, json={"agent_code": "a", "context": turns(4)}, headers=headers),
        ):
            assert response.status_code == 503
            assert response.json()["code"] == "unavailable" and response.headers["Retry-After"]
    finally:
        cluster.start()

    assert httpx.get(f"{server.url}/healthz").status_code == 200
    assert httpx.put(state, json={"agent_code": "a", "context": turns(4)}, headers=headers).json()["mode"] == "append"
    assert len(httpx.get(state, headers=headers).json()["context"]) == 4


def test_a_server_killed_mid_stream_leaves_every_thread_consistent(cluster, key):
    server = Server(cluster.url)
    server.start()
    acknowledged: dict[str, int] = {}
    in_flight: dict[str, int] = {}
    stop = threading.Event()

    def agent(thread_id: str):
        size = 0
        with httpx.Client(headers={"Authorization": f"Bearer {key}"}, timeout=10) as client:
            while not stop.is_set():
                size += 2
                in_flight[thread_id] = size
                try:
                    response = client.put(
                        f"{server.url}/api/v1/threads/{thread_id}/agent-state",
                        json={"agent_code": "a", "context": turns(size)},
                    )
                except httpx.HTTPError:
                    return
                if response.status_code != 200:
                    return
                acknowledged[thread_id] = size

    agents = [threading.Thread(target=agent, args=(f"crash-{n}",)) for n in range(3)]
    for thread in agents:
        thread.start()
    time.sleep(1.5)
    server.kill()
    stop.set()
    for thread in agents:
        thread.join(timeout=15)
    assert all(acknowledged.get(f"crash-{n}", 0) > 0 for n in range(3)), "the agents never got going"

    restarted = Server(cluster.url)
    restarted.start()
    try:
        with httpx.Client(headers={"Authorization": f"Bearer {key}"}) as client:
            for thread_id, size in acknowledged.items():
                context = client.get(f"{restarted.url}/api/v1/threads/{thread_id}/agent-state").json()["context"]
                # Either the last acknowledged save, or the one in flight if it committed before the kill.
                assert len(context) in (size, in_flight[thread_id])
                assert context == turns(len(context))
    finally:
        restarted.kill()
    report = manage(cluster.url, "verify")
    assert "0 problem(s)" in report
