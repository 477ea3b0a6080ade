"""Erasing a user leaves nothing that names their data: not their graph definitions, and not
their thread ids, labels, keys, graph names, run ids or the queries that found them in
the audit log, whose events all stay (with actor, action and time), the names "[erased]".
"""

from __future__ import annotations

import orjson
import pytest

from graphs_app.models import GraphDefinition
from graphs_app.services import graph_create, graph_delete
from memoryadmin.models import AuditEvent
from memoryadmin.operations.erase import user_erase, user_erase_preview
from store_app.namespaces import namespace_from_path
from store_app.services import store_item_delete, store_item_put

from ..conftest import api_client_for
from .helpers import checkpoints, save

pytestmark = pytest.mark.django_db

# What the log below names of each user's data (alice's deleted items, graph and run included).
ALICE_NAMES = ("alice-secret-trip", "alice-notes", "run-alice-1", "alice-home", "diary", "gift-ideas", "old-plan", "kyoto")
BOB_NAMES = ("bob-chat", "bobword")
SPEC = {"nodes": [{"id": "a"}], "edges": [{"source": "__start__", "target": "a"}, {"source": "a", "target": "__end__"}]}


@pytest.fixture
def history(alice, bob, operator, admin_user):
    """Data of two users and the audit trail that real use leaves about it."""
    save(alice, "alice-secret-trip", [{"role": "user", "content": "flights to kyoto in may"}])
    save(alice, "alice-notes", [{"role": "user", "content": "remember the kyoto hotel"}])
    checkpoints(alice, "alice-secret-trip", 2)
    alice_api, bob_api, operator_api = api_client_for(alice), api_client_for(bob), api_client_for(operator)
    alice_api.post("/api/v1/threads/alice-notes/checkpoints", {"checkpoint": {"v": 1}, "metadata": {"run_id": "run-alice-1"}}, format="json")
    alice_api.post("/api/v1/threads/alice-notes/checkpoints", {"checkpoint": {"v": 2}, "metadata": {"run_id": "run-alice-2"}}, format="json")
    for key in ("dentist-2026", "gift-ideas"):
        store_item_put(actor=alice, namespace=["users", "alice-home", "diary"], key=key, value={"text": "private"})
    graph_create(actor=alice, name="alice-planner", spec=SPEC)
    old = graph_create(actor=alice, name="old-plan", spec=SPEC).graph
    save(bob, "bob-chat", [{"role": "user", "content": "bobword only"}])
    store_item_put(actor=bob, namespace=["users", "bob-prefs"], key="theme", value={"dark": True})
    graph_create(actor=bob, name="bob-graph", spec=SPEC)

    assert operator_api.get("/api/v1/threads/alice-secret-trip/agent-state").status_code == 200  # thread.read
    assert operator_api.get("/api/v1/search/messages", {"q": "kyoto"}).status_code == 200  # thread.search
    assert operator_api.get("/api/v1/search/messages", {"q": "bobword"}).status_code == 200
    assert operator_api.get("/api/v1/threads/bob-chat/agent-state").status_code == 200
    assert bob_api.get("/api/v1/threads/alice-notes/messages").status_code == 403  # access.denied
    assert alice_api.post("/api/v1/checkpoints/delete-for-runs", {"run_ids": ["run-alice-1"]}, format="json").json() == {"checkpoints": 1}
    store_item_delete(actor=admin_user, namespace=namespace_from_path("users.alice-home.diary"), key="gift-ideas")
    graph_delete(actor=admin_user, graph_id=old.pk)
    prune = api_client_for(admin_user).post(
        "/api/v1/checkpoints/prune", {"thread_ids": ["alice-secret-trip", "bob-chat"], "strategy": "keep_latest"}, format="json"
    )
    assert prune.status_code == 200
    return {"events": list(AuditEvent.objects.order_by("pk").values_list("pk", "action", "actor_name", "ip", "created_at"))}


def log_text() -> str:
    return orjson.dumps(list(AuditEvent.objects.values_list("target", "detail"))).decode()


def test_erase_removes_the_users_graphs_and_their_names_from_the_log_keeping_every_event(history, admin_user, bob):
    before = log_text()
    assert [name for name in ALICE_NAMES + BOB_NAMES if name not in before] == []
    assert user_erase_preview(actor=admin_user, username="alice")["graph_definitions"] == 1
    receipt = user_erase(actor=admin_user, username="alice", batch=2)
    assert receipt["counts"]["graph_definitions"] == 1 and receipt["counts"]["threads"] == 2
    assert not GraphDefinition.objects.filter(owner__username="alice").exists()
    assert list(GraphDefinition.objects.values_list("name", flat=True)) == ["bob-graph"]

    kept = list(AuditEvent.objects.exclude(action="user.erase").order_by("pk").values_list("pk", "action", "actor_name", "ip", "created_at"))
    assert kept == history["events"]
    text = log_text()
    assert [name for name in ALICE_NAMES if name in text] == []
    assert all(name in text for name in BOB_NAMES)
    assert receipt["audit_events_redacted"] >= 7 and "[erased]" in text
    read = AuditEvent.objects.get(action="thread.read", detail__owner="alice")
    assert read.target == "thread:[erased]" and read.detail["path"] == "/api/v1/threads/[erased]/agent-state"
    prune = AuditEvent.objects.get(action="checkpoint.prune")
    assert prune.detail["threads"] == ["[erased]", "bob-chat"]
    bob_search = next(e for e in AuditEvent.objects.filter(action="thread.search") if e.detail["threads"] == ["bob-chat"])
    assert bob_search.detail["filter"]["q"] == "bobword" and "bobword" in bob_search.target  # another user's search stays whole
