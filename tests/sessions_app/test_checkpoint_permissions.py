"""Ownership on every checkpoint endpoint and page: another member gets 403 with nothing
written (and an audit event); operators read but never write; admins release, prune and
delete, but never write content into another user's thread."""

from __future__ import annotations

import pytest

from memoryadmin.models import AuditEvent
from sessions_app.checkpoints import services as svc
from sessions_app.models import Checkpoint, CheckpointWrite, Thread

from ..conftest import login_client
from sessions_app.checkpoints import lifecycle

pytestmark = pytest.mark.django_db

T = "/api/v1/threads/t1"
READS = [
    ("get", f"{T}/checkpoints", None),
    ("get", f"{T}/checkpoints/latest", None),
    ("get", f"{T}/checkpoints/a", None),
    ("get", f"{T}/state", None),
    ("get", f"{T}/state/a", None),
    ("post", f"{T}/state/checkpoint", {"checkpoint": {"checkpoint_id": "a"}}),
    ("post", f"{T}/history", {}),
    ("get", T, None),
]
CONTENT_WRITES = [
    ("post", f"{T}/checkpoints", {"checkpoint": {"x": 1}}),
    ("post", f"{T}/checkpoints", {"checkpoint": {"x": 1}, "checkpoint_id": "a"}),
    ("put", f"{T}/checkpoints/a", {"checkpoint": {"x": 1}}),
    ("post", f"{T}/checkpoints/a/writes", {"task_id": "t", "writes": [{"channel": "c", "value": 1}]}),
    ("patch", T, {"metadata": {"hijacked": True}}),
]
REMOVALS = [
    ("delete", f"{T}/checkpoints", None),
    ("post", "/api/v1/checkpoints/prune", {"thread_ids": ["t1"], "strategy": "delete"}),
]


@pytest.fixture
def alices_thread(alice):
    data = svc.checkpoint_input(checkpoint={"channel_values": {"n": 1}}, metadata={"run_id": "r1"})
    svc.checkpoint_put(actor=alice, thread_id="t1", checkpoint_id="a", data=data)
    svc.checkpoint_put_writes(
        actor=alice, thread_id="t1", checkpoint_id="a", data=svc.write_input(task_id="t0", writes=[{"channel": "c", "value": 0}])
    )
    return Thread.objects.get(thread_id="t1")


def snapshot():
    thread = Thread.objects.get(thread_id="t1")
    return (
        thread.metadata,
        list(Checkpoint.objects.order_by("id").values_list("checkpoint_id", "checkpoint", "metadata", "updated_at")),
        list(CheckpointWrite.objects.order_by("id").values_list("task_id", "idx", "value")),
    )


def call(client, method, path, body):
    return getattr(client, method)(path, body, format="json") if body is not None else getattr(client, method)(path)


@pytest.mark.parametrize("method, path, body", READS + CONTENT_WRITES + REMOVALS + [("post", f"{T}/release", None), ("post", f"{T}/copy", {"thread_id": "bobs-copy"})])
def test_another_member_gets_403_nothing_written_and_an_audit_event(alices_thread, bob_api, method, path, body):
    before = snapshot()
    response = call(bob_api, method, path, body)
    assert response.status_code == 403, response.content
    assert snapshot() == before
    assert not Thread.objects.filter(thread_id="bobs-copy").exists()
    event = AuditEvent.objects.filter(action="access.denied").latest("id")
    assert event.target == "thread:t1" and event.actor_name == "bob"


@pytest.mark.parametrize("method, path, body", READS)
def test_operators_and_admins_read(alices_thread, operator_api, admin_api, method, path, body):
    for client in (operator_api, admin_api):
        assert call(client, method, path, body).status_code == 200


@pytest.mark.parametrize("method, path, body", CONTENT_WRITES + REMOVALS + [("post", f"{T}/release", None), ("post", f"{T}/copy", {"thread_id": "ops-copy"})])
def test_operators_write_nothing(alices_thread, operator_api, method, path, body):
    before = snapshot()
    assert call(operator_api, method, path, body).status_code == 403
    assert snapshot() == before and not Thread.objects.filter(thread_id="ops-copy").exists()


def test_operators_cannot_create_threads_or_checkpoints_of_their_own(operator_api):
    assert operator_api.post("/api/v1/threads/ops/checkpoints", {"checkpoint": {}}, format="json").status_code == 403
    assert operator_api.post("/api/v1/threads", {"thread_id": "ops"}, format="json").status_code == 403
    assert operator_api.post("/api/v1/checkpoints/delete-for-runs", {"run_ids": ["r1"]}, format="json").status_code == 403
    assert not Thread.objects.filter(thread_id="ops").exists() and Checkpoint.objects.count() == 0


@pytest.mark.parametrize("method, path, body", CONTENT_WRITES)
def test_admins_do_not_write_content_into_another_users_thread(alices_thread, admin_api, method, path, body):
    before = snapshot()
    assert call(admin_api, method, path, body).status_code == 403
    assert snapshot() == before


def test_admins_release_prune_and_delete_another_users_checkpoints(alices_thread, admin_api, alice):
    assert admin_api.post(f"{T}/release").status_code == 200
    assert not Checkpoint.objects.exists()
    data = svc.checkpoint_input(checkpoint={})
    svc.checkpoint_put(actor=alice, thread_id="t1", checkpoint_id="b", data=data)
    assert admin_api.post("/api/v1/checkpoints/prune", {"thread_ids": ["t1"], "strategy": "delete"}, format="json").status_code == 200
    svc.checkpoint_put(actor=alice, thread_id="t1", checkpoint_id="c", data=data)
    assert admin_api.delete(f"{T}/checkpoints").status_code == 200
    assert not Checkpoint.objects.exists()


def test_owners_cannot_release_but_may_delete_their_checkpoints(alices_thread, alice_api):
    assert alice_api.post(f"{T}/release").status_code == 403
    assert Checkpoint.objects.count() == 1
    assert alice_api.delete(f"{T}/checkpoints").status_code == 200
    assert not Checkpoint.objects.exists()


def test_delete_for_runs_never_reaches_another_users_checkpoints(alices_thread, bob_api):
    response = bob_api.post("/api/v1/checkpoints/delete-for-runs", {"run_ids": ["r1"]}, format="json")
    assert response.status_code == 200 and response.json() == {"checkpoints": 0}
    assert Checkpoint.objects.count() == 1


def test_search_shows_only_visible_threads(alices_thread, bob_api, operator_api):
    lifecycle.thread_create(actor=Thread.objects.get(thread_id="t1").owner, thread_id="t2")
    assert bob_api.post("/api/v1/threads/search", {}, format="json").json() == []
    assert {t["thread_id"] for t in operator_api.post("/api/v1/threads/search", {}, format="json").json()} == {"t1", "t2"}


# --- pages -------------------------------------------------------------------------------------

PAGE = "/threads/t1/checkpoints/"


def test_the_timeline_page_is_403_to_another_member(alices_thread, client, bob):
    login_client(client, bob)
    assert client.get(PAGE).status_code == 403
    assert client.get(PAGE, {"checkpoint": "a"}, HTTP_HX_REQUEST="true", HTTP_HX_TARGET="checkpoint-detail").status_code == 403
    assert AuditEvent.objects.filter(action="access.denied", target="thread:t1").exists()


def test_operators_read_the_page_without_a_release_button(alices_thread, client, operator):
    login_client(client, operator)
    response = client.get(PAGE)
    assert response.status_code == 200 and b"Release" not in response.content


@pytest.mark.parametrize("who", ["alice", "bob", "operator"])
def test_only_admins_release_from_the_page(alices_thread, client, who, request):
    user = request.getfixturevalue(who)
    login_client(client, user)
    assert b'action="/threads/t1/checkpoints/release"' not in client.get(PAGE).content
    response = client.post(f"{PAGE}release")
    assert response.status_code == 403
    assert Checkpoint.objects.count() == 1


def test_an_admin_releases_from_the_page_through_the_same_service(alices_thread, client, admin_user):
    login_client(client, admin_user)
    assert b'action="/threads/t1/checkpoints/release"' in client.get(PAGE).content
    response = client.post(f"{PAGE}release")
    assert response.status_code == 302 and response["Location"] == PAGE
    assert not Checkpoint.objects.exists()
    assert AuditEvent.objects.filter(action="checkpoint.release", target="thread:t1").count() == 1
    htmx = client.post(f"{PAGE}release", HTTP_HX_REQUEST="true")
    assert htmx.status_code == 200 and htmx["HX-Redirect"] == PAGE


def test_the_page_needs_a_login(alices_thread, client):
    response = client.get(PAGE)
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]
    assert client.post(f"{PAGE}release").status_code == 302
    assert Checkpoint.objects.count() == 1
