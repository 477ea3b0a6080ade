"""The checkpoint endpoints (docs/checkpoints.md, "API guide"): shapes, errors, constant query counts."""

from __future__ import annotations

import json

import pytest

from sessions_app.models import Checkpoint, CheckpointWrite, Thread

pytestmark = pytest.mark.django_db

BASE = "/api/v1/threads/t1/checkpoints"


def post(client, body, thread_id="t1"):
    return client.post(f"/api/v1/threads/{thread_id}/checkpoints", body, format="json")


def push(client, n, **extra):
    response = post(client, {"checkpoint": {"channel_values": {"n": n}}, "metadata": {"step": n}, **extra})
    assert response.status_code in (200, 201), response.content
    return response.json()["checkpoint_id"]


def test_post_without_id_makes_one_and_answers_201(alice_api):
    response = post(alice_api, {"checkpoint": {"state": {"plan": "x"}}, "metadata": {"source": "input"}})
    assert response.status_code == 201
    body = response.json()
    assert set(body) == {"thread_id", "checkpoint_ns", "checkpoint_id"} and body["thread_id"] == "t1"
    assert Checkpoint.objects.get().checkpoint_id == body["checkpoint_id"]


def test_post_with_an_existing_id_is_an_upsert_answering_200(alice_api):
    assert post(alice_api, {"checkpoint": {"v": 1}, "checkpoint_id": "a"}).status_code == 201
    again = post(alice_api, {"checkpoint": {"v": 2}, "checkpoint_id": "a"})
    assert again.status_code == 200 and Checkpoint.objects.get().checkpoint == {"v": 2}


def test_get_one_latest_and_the_answer_shape(alice_api):
    push(alice_api, 1, checkpoint_id="a")
    push(alice_api, 2, checkpoint_id="b", parent_checkpoint_id="a", node_id="plan", next_node_id="act")
    alice_api.post(f"{BASE}/b/writes", {"task_id": "t", "task_path": "p", "writes": [{"channel": "x", "value": {"k": 1}}]}, format="json")
    latest = alice_api.get(f"{BASE}/latest").json()
    assert set(latest) == {
        "thread_id", "checkpoint_ns", "checkpoint_id", "parent_checkpoint_id", "checkpoint", "metadata",
        "node_id", "next_node_id", "pending_writes", "created_at", "updated_at",
    }
    assert latest["checkpoint_id"] == "b" and latest["parent_checkpoint_id"] == "a"
    assert (latest["node_id"], latest["next_node_id"]) == ("plan", "act")
    assert latest["pending_writes"] == [{"task_id": "t", "task_path": "p", "idx": 0, "channel": "x", "value": {"k": 1}}]
    one = alice_api.get(f"{BASE}/a").json()
    assert one["checkpoint_id"] == "a" and one["parent_checkpoint_id"] is None and one["pending_writes"] == []


def test_put_replaces_in_place_and_404s_on_an_unknown_id(alice_api):
    for name in ("a", "b", "c"):
        push(alice_api, 0, checkpoint_id=name)
    response = alice_api.put(f"{BASE}/b", {"checkpoint": {"edited": True}}, format="json")
    assert response.status_code == 200 and response.json()["checkpoint_id"] == "b"
    listed = alice_api.get(BASE).json()["results"]
    assert [c["checkpoint_id"] for c in listed] == ["c", "b", "a"] and listed[1]["checkpoint"] == {"edited": True}
    before = list(Checkpoint.objects.values_list("checkpoint_id", "checkpoint"))
    missing = alice_api.put(f"{BASE}/zzz", {"checkpoint": {"x": 1}}, format="json")
    assert missing.status_code == 404 and missing.json()["code"] == "not_found"
    assert list(Checkpoint.objects.values_list("checkpoint_id", "checkpoint")) == before
    mismatch = alice_api.put(f"{BASE}/b", {"checkpoint": {}, "checkpoint_id": "c"}, format="json")
    assert mismatch.status_code == 400 and "checkpoint_id" in mismatch.json()["errors"]


def test_list_paginates_with_limit_and_before(alice_api):
    for n in range(5):
        push(alice_api, n, checkpoint_id=f"c{n}")
    page = alice_api.get(BASE, {"limit": 2}).json()
    assert [c["checkpoint_id"] for c in page["results"]] == ["c4", "c3"] and page["next_before"] == "c3"
    page = alice_api.get(BASE, {"limit": 2, "before": page["next_before"]}).json()
    assert [c["checkpoint_id"] for c in page["results"]] == ["c2", "c1"]
    page = alice_api.get(BASE, {"limit": 2, "before": "c1"}).json()
    assert [c["checkpoint_id"] for c in page["results"]] == ["c0"] and page["next_before"] is None


def test_list_filters_by_namespace_and_metadata(alice_api):
    push(alice_api, 1, checkpoint_id="root")
    push(alice_api, 2, checkpoint_id="child", checkpoint_ns="child:1", metadata={"source": "loop", "tags": ["a", "b"]})
    assert [c["checkpoint_id"] for c in alice_api.get(BASE).json()["results"]] == ["child", "root"]
    assert [c["checkpoint_id"] for c in alice_api.get(BASE, {"checkpoint_ns": ""}).json()["results"]] == ["root"]
    assert [c["checkpoint_id"] for c in alice_api.get(BASE, {"checkpoint_ns": "child:1"}).json()["results"]] == ["child"]
    found = alice_api.get(BASE, {"metadata": json.dumps({"tags": ["b"]})}).json()["results"]
    assert [c["checkpoint_id"] for c in found] == ["child"]
    assert alice_api.get(f"{BASE}/child", {"checkpoint_ns": "child:1"}).status_code == 200
    assert alice_api.get(f"{BASE}/child").status_code == 404


def test_writes_answer_204_and_are_idempotent(alice_api):
    push(alice_api, 0, checkpoint_id="a")
    body = {"task_id": "task", "writes": [{"channel": "ch", "value": 1}, {"channel": "__error__", "value": "boom"}]}
    assert alice_api.post(f"{BASE}/a/writes", body, format="json").status_code == 204
    assert alice_api.post(f"{BASE}/a/writes", body, format="json").status_code == 204
    assert sorted(CheckpointWrite.objects.values_list("idx", "channel")) == [(-1, "__error__"), (0, "ch")]


def test_release_answers_the_tag_and_empties_the_thread(alice_api, admin_api):
    push(alice_api, 0, checkpoint_id="a")
    push(alice_api, 1, checkpoint_id="b")
    response = admin_api.post("/api/v1/threads/t1/release")
    assert response.status_code == 200
    assert response.json()["thread_id"] == "t1" and [c["checkpoint_id"] for c in response.json()["checkpoints"]] == ["b", "a"]
    assert alice_api.get(BASE).json()["results"] == []
    assert alice_api.get(f"{BASE}/latest").status_code == 404


def test_delete_copy_prune_and_delete_for_runs_endpoints(alice_api):
    push(alice_api, 0, checkpoint_id="a", metadata={"run_id": "r1"})
    push(alice_api, 1, checkpoint_id="b", metadata={"run_id": "r2"})
    copied = alice_api.post("/api/v1/threads/t1/copy", {"thread_id": "t2"}, format="json")
    assert copied.status_code == 200 and copied.json()["thread_id"] == "t2" and copied.json()["checkpoints"] == 2
    fresh = alice_api.post("/api/v1/threads/t1/copy")  # LangGraph's SDK sends no body: a new uuid
    assert fresh.status_code == 200 and len(fresh.json()["thread_id"]) == 36
    pruned = alice_api.post("/api/v1/checkpoints/prune", {"thread_ids": ["t2"], "strategy": "keep_latest"}, format="json")
    assert pruned.json() == {"threads": 1, "checkpoints": 1}
    runs = alice_api.post("/api/v1/checkpoints/delete-for-runs", {"run_ids": ["r1"]}, format="json")
    assert runs.json() == {"checkpoints": 2}  # t1's and the fresh copy's
    deleted = alice_api.delete(BASE)
    assert deleted.status_code == 200 and deleted.json() == {"checkpoints": 1}
    assert Thread.objects.filter(thread_id="t1").exists()


@pytest.mark.parametrize(
    "method, path, body, field",
    [
        ("post", BASE, {"metadata": {}}, "checkpoint"),
        ("post", BASE, {"checkpoint": "x"}, "checkpoint"),
        ("post", BASE, {"checkpoint": {}, "metadata": [1]}, "metadata"),
        ("post", BASE, {"checkpoint": {}, "checkpoint_id": "a b"}, "checkpoint_id"),
        ("post", BASE, {"checkpoint": {}, "checkpoint_id": "latest"}, "checkpoint_id"),
        ("post", BASE, {"checkpoint": {}, "checkpoint_ns": ["x"]}, "checkpoint_ns"),
        ("post", BASE, {"checkpoint": {"channel_values": "x"}}, "checkpoint.channel_values"),
        ("post", BASE, {"checkpoint": {"k": "nul\u0000"}}, "checkpoint"),
        ("post", "/api/v1/threads/bad%20id/checkpoints", {"checkpoint": {}}, "thread_id"),
        ("post", f"{BASE}/a/writes", {"writes": []}, "task_id"),
        ("post", f"{BASE}/a/writes", {"task_id": "t", "writes": {}}, "writes"),
        ("post", f"{BASE}/a/writes", {"task_id": "t", "writes": [{"channel": "c"}]}, "writes[0]"),
        ("post", f"{BASE}/a/writes", {"task_id": "t", "writes": [{"channel": "", "value": 1}]}, "writes[0].channel"),
        ("post", "/api/v1/checkpoints/prune", {"thread_ids": "t1"}, "thread_ids"),
        ("post", "/api/v1/checkpoints/prune", {"thread_ids": ["t1"], "strategy": "all"}, "strategy"),
        ("post", "/api/v1/checkpoints/delete-for-runs", {"run_ids": [1]}, "run_ids"),
        ("get", f"{BASE}?limit=0", None, "limit"),
        ("get", f"{BASE}?limit=abc", None, "limit"),
        ("get", f"{BASE}?metadata=%7Bbad", None, "metadata"),
        ("get", f"{BASE}?metadata=%5B1%5D", None, "metadata"),
        ("get", f"{BASE}?before=a%20b", None, "before"),
    ],
)
def test_bad_input_is_400_naming_the_field_and_writes_nothing(alice_api, method, path, body, field):
    push(alice_api, 0, checkpoint_id="a")
    before = (Checkpoint.objects.count(), CheckpointWrite.objects.count(), Thread.objects.count())
    response = getattr(alice_api, method)(path, body, format="json") if body is not None else alice_api.get(path)
    assert response.status_code == 400, response.content
    assert field in response.json()["errors"]
    assert (Checkpoint.objects.count(), CheckpointWrite.objects.count(), Thread.objects.count()) == before


def test_a_body_that_is_not_an_object_is_400(alice_api):
    response = alice_api.post(BASE, [1, 2], format="json")
    assert response.status_code == 400 and "body" in response.json()["errors"]


@pytest.mark.parametrize(
    "method, path",
    [
        ("get", "/api/v1/threads/nope/checkpoints"),
        ("get", "/api/v1/threads/nope/checkpoints/latest"),
        ("get", "/api/v1/threads/t1/checkpoints/nope"),
        ("put", "/api/v1/threads/nope/checkpoints/a"),
        ("post", "/api/v1/threads/nope/release"),
        ("delete", "/api/v1/threads/nope/checkpoints"),
        ("get", "/api/v1/threads/t1/checkpoints?before=nope"),
    ],
)
def test_unknown_threads_and_checkpoints_are_404(alice_api, admin_api, method, path):
    push(alice_api, 0, checkpoint_id="a")
    client = admin_api if path.endswith("/release") else alice_api
    body = {"checkpoint": {}} if method == "put" else None
    response = getattr(client, method)(path, body, format="json") if body else getattr(client, method)(path)
    assert response.status_code == 404 and response.json()["code"] == "not_found"


def test_anonymous_requests_are_401(anon_api):
    assert anon_api.get(BASE).status_code == 401
    assert anon_api.post(BASE, {"checkpoint": {}}, format="json").status_code == 401


def _fill(thread_id, owner, count, writes_each=2):
    thread = Thread.objects.create(thread_id=thread_id, owner=owner)
    rows = Checkpoint.objects.bulk_create(
        Checkpoint(thread=thread, checkpoint_id=f"c{i}", checkpoint={"channel_values": {"n": i}}, metadata={"step": i})
        for i in range(count)
    )
    CheckpointWrite.objects.bulk_create(
        CheckpointWrite(thread=thread, checkpoint_id=row.checkpoint_id, task_id="t", idx=j, channel="ch", value=j)
        for row in rows
        for j in range(writes_each)
    )


@pytest.mark.parametrize("metadata", [None, {"step": 3}])
def test_the_list_costs_the_same_queries_for_10_and_100_checkpoints(alice, alice_api, django_assert_num_queries, metadata):
    _fill("small", alice, 10)
    _fill("large", alice, 100)
    params = {"limit": 1000}
    if metadata:
        params["metadata"] = json.dumps(metadata)
    alice_api.get("/api/v1/threads/small/checkpoints", params)  # warm the key's last-used stamp
    counts = []
    for thread_id, expected in (("small", 10), ("large", 100)):
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        with CaptureQueriesContext(connection) as captured:
            response = alice_api.get(f"/api/v1/threads/{thread_id}/checkpoints", params)
        results = response.json()["results"]
        assert len(results) == (1 if metadata else expected)
        assert all(len(row["pending_writes"]) == 2 for row in results)
        counts.append(len(captured))
    assert counts[0] == counts[1]
    with django_assert_num_queries(counts[0]):
        alice_api.get("/api/v1/threads/large/checkpoints", params)
