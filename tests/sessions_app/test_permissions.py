"""Ownership on every thread endpoint and page: 403 to others, nothing written, audited."""

from __future__ import annotations

import pytest

from memoryadmin.models import AuditEvent
from sessions_app.models import Block, Thread
from sessions_app.threads.services import thread_save_agent_state

from ..conftest import login_client
from .helpers import turns

pytestmark = pytest.mark.django_db

READS = [
    ("get", "/api/v1/threads/t1/agent-state"),
    ("get", "/api/v1/threads/t1/messages"),
    ("get", "/api/v1/threads/t1"),
]
WRITES = [
    ("put", "/api/v1/threads/t1/agent-state", {"agent_code": "bot", "context": turns(5)}),
    ("delete", "/api/v1/threads/t1", None),
    ("post", "/api/v1/threads/t1/clear", None),
]


@pytest.fixture
def alices_thread(alice):
    thread_save_agent_state(
        actor=alice, thread_id="t1", agent_code="bot", context=turns(3), extra_state={"k": 1}, extra_state_given=True
    )
    return Thread.objects.get(thread_id="t1")


def snapshot():
    thread = Thread.objects.get(thread_id="t1")
    return (thread.updated_at, thread.extra_state, list(Block.objects.values_list("seq", "archived")))


@pytest.mark.parametrize(("method", "url"), READS)
def test_another_member_cannot_read(alices_thread, bob_api, method, url):
    response = getattr(bob_api, method)(url)
    assert response.status_code == 403
    assert AuditEvent.objects.filter(action="access.denied", target="thread:t1", actor_name="bob").count() == 1


@pytest.mark.parametrize(("method", "url", "body"), WRITES)
def test_another_member_cannot_write_and_nothing_changes(alices_thread, bob_api, method, url, body):
    before = snapshot()
    response = getattr(bob_api, method)(url, body, format="json")
    assert response.status_code == 403
    assert snapshot() == before
    event = AuditEvent.objects.get(action="access.denied", target="thread:t1")
    assert event.actor_name == "bob" and event.detail["method"] == method.upper()


@pytest.mark.parametrize(("method", "url"), READS)
def test_operators_and_admins_read_every_thread(alices_thread, operator_api, admin_api, method, url):
    assert getattr(operator_api, method)(url).status_code == 200
    assert getattr(admin_api, method)(url).status_code == 200


@pytest.mark.parametrize(("method", "url", "body"), WRITES)
def test_operators_cannot_write(alices_thread, operator_api, method, url, body):
    before = snapshot()
    assert getattr(operator_api, method)(url, body, format="json").status_code == 403
    assert snapshot() == before


def test_admins_cannot_write_content_into_someone_elses_thread(alices_thread, admin_api):
    before = snapshot()
    assert admin_api.put(*WRITES[0][1:], format="json").status_code == 403
    assert snapshot() == before


def test_owner_cannot_clear_only_admins_can(alices_thread, alice_api, admin_api):
    assert alice_api.post("/api/v1/threads/t1/clear").status_code == 403
    assert admin_api.post("/api/v1/threads/t1/clear").status_code == 200


def test_members_list_only_their_threads_and_operators_filter_by_owner(alices_thread, bob, bob_api, operator_api):
    thread_save_agent_state(actor=bob, thread_id="b1", agent_code="bot", context=turns(1))
    assert [t["thread_id"] for t in bob_api.get("/api/v1/threads").json()["results"]] == ["b1"]
    # A member's owner filter is ignored: it never widens what they see.
    assert [t["thread_id"] for t in bob_api.get("/api/v1/threads?owner=alice").json()["results"]] == ["b1"]
    assert {t["thread_id"] for t in operator_api.get("/api/v1/threads").json()["results"]} == {"t1", "b1"}
    assert [t["thread_id"] for t in operator_api.get("/api/v1/threads?owner=alice").json()["results"]] == ["t1"]


PAGES = ["/threads/t1/", "/threads/t1/?tab=archived", "/threads/t1/?tab=state"]


@pytest.mark.parametrize("url", PAGES)
def test_another_members_page_is_a_403_page(alices_thread, client, bob, url):
    response = login_client(client, bob).get(url)
    assert response.status_code == 403
    assert b"belongs to another user" in response.content
    assert AuditEvent.objects.filter(action="access.denied", target="thread:t1").exists()


@pytest.mark.parametrize("action", ["clear", "delete"])
def test_page_actions_refuse_others(alices_thread, client, bob, operator, action):
    before = snapshot()
    for user in (bob, operator):
        client.force_login(user)
        assert client.post(f"/threads/t1/{action}").status_code == 403
    assert snapshot() == before


def test_pages_need_a_login(alices_thread, client):
    response = client.get("/threads/t1/")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]
    assert client.get("/threads/").status_code == 302
