"""The audit log: append-only, reads of others' threads recorded cheaply, the admin page and exports."""

from __future__ import annotations

import csv
import inspect
import io
import json
from datetime import timedelta
from unittest import mock

import pytest
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from memoryadmin import audit
from memoryadmin.audit import audit_record
from memoryadmin.models import AuditEvent, AuditLogIsAppendOnly

from ..conftest import login_client
from .helpers import checkpoints, save, store_item, turns

pytestmark = pytest.mark.django_db


def events(action: str):
    return AuditEvent.objects.filter(action=action)


# --- append-only ---------------------------------------------------------------------------------


def test_the_audit_log_cannot_be_updated_or_deleted_through_the_application(alice):
    event = audit_record(actor=alice, action="thread.clear", target="thread:t1", detail={"n": 1})
    with pytest.raises(AuditLogIsAppendOnly):
        AuditEvent.objects.filter(pk=event.pk).update(action="nothing")
    with pytest.raises(AuditLogIsAppendOnly):
        AuditEvent.objects.all().delete()
    with pytest.raises(AuditLogIsAppendOnly):
        event.delete()
    event.action = "changed"
    with pytest.raises(AuditLogIsAppendOnly):
        event.save()
    with pytest.raises(AuditLogIsAppendOnly):
        AuditEvent.objects.bulk_update([event], ["action"])
    assert AuditEvent.objects.get(pk=event.pk).action == "thread.clear"


def test_the_audit_module_only_records():
    public = [name for name, value in vars(audit).items() if inspect.isfunction(value) and not name.startswith("_")]
    assert public and all(("delete" not in name and "update" not in name and "purge" not in name) for name in public)
    source = inspect.getsource(audit)
    assert ".delete(" not in source and ".update(" not in source


def test_django_admin_shows_the_log_read_only(rf, admin_user):
    model_admin = admin.site._registry[AuditEvent]
    request = rf.get("/django-admin/")
    request.user = admin_user
    assert not model_admin.has_add_permission(request)
    assert not model_admin.has_change_permission(request)
    assert not model_admin.has_delete_permission(request)
    assert not model_admin.get_actions(request)


def test_deleting_a_user_keeps_their_events(alice):
    audit_record(actor=alice, action="thread.clear", target="thread:t1")
    get_user_model().objects.filter(pk=alice.pk).delete()
    event = AuditEvent.objects.get(action="thread.clear")
    assert event.actor is None and event.actor_name == "alice"


# --- reads of another user's thread --------------------------------------------------------------


def test_an_operator_reading_a_thread_page_is_one_event(client, alice, operator):
    save(alice, "t1", turns(4))
    login_client(client, operator)
    assert client.get("/threads/t1/", REMOTE_ADDR="10.1.2.3").status_code == 200
    event = events("thread.read").get()
    assert (event.actor_name, event.target, event.ip) == ("olivia", "thread:t1", "10.1.2.3")
    assert event.detail == {"owner": "alice", "path": "/threads/t1/"}


@override_settings(MEMORYADMIN_AUDIT_READ_WINDOW_SECONDS=0)
def test_every_api_read_of_another_users_thread_is_recorded(alice, admin_api):
    save(alice, "t1", turns(2))
    for path in ("/api/v1/threads/t1", "/api/v1/threads/t1/agent-state", "/api/v1/threads/t1/messages"):
        assert admin_api.get(path).status_code == 200
    assert [e.detail["path"] for e in events("thread.read").order_by("id")] == [
        "/api/v1/threads/t1",
        "/api/v1/threads/t1/agent-state",
        "/api/v1/threads/t1/messages",
    ]
    assert all(e.ip == "127.0.0.1" for e in events("thread.read"))


def test_owners_reading_their_own_threads_leave_no_event(alice, alice_api, client):
    save(alice, "t1", turns(2))
    alice_api.get("/api/v1/threads/t1/messages")
    login_client(client, alice).get("/threads/t1/")
    assert not events("thread.read").exists()


def test_recording_a_read_costs_exactly_one_insert(alice, operator_api):
    save(alice, "t1", turns(2))
    operator_api.get("/api/v1/threads/t1/agent-state")  # warm the key's last_used_at
    with CaptureQueriesContext(connection) as captured:
        assert operator_api.get("/api/v1/threads/t1/agent-state").status_code == 200
    audit_sql = [q["sql"] for q in captured.captured_queries if "memoryadmin_auditevent" in q["sql"]]
    assert len(audit_sql) == 1 and audit_sql[0].lstrip().upper().startswith("INSERT")


# --- quiet: one event per person, action and target within the read window ------------------------


def test_an_open_thread_tab_is_one_read_event_per_window(client, alice, operator):
    save(alice, "t1", turns(4))
    checkpoints(alice, "t1", 2)
    login_client(client, operator)
    fragments = ["/threads/t1/", "/threads/t1/?tab=archived", "/threads/t1/?tab=state", "/threads/t1/checkpoints/"]
    for _ in range(5):  # a tab polling its fragments: 20 reads
        for path in fragments:
            assert client.get(path, HTTP_HX_REQUEST="true").status_code == 200
    event = events("thread.read").get()
    assert (event.actor_name, event.target, event.detail["owner"]) == ("olivia", "thread:t1", "alice")
    # Once the window has passed, the next read is an event again.
    later = timezone.now() + timedelta(seconds=301)
    with mock.patch("memoryadmin.audit.timezone.now", return_value=later):
        client.get("/threads/t1/")
    assert events("thread.read").count() == 2


def test_the_window_keeps_people_and_threads_apart(alice, operator_api, admin_api):
    save(alice, "t1", turns(2))
    save(alice, "t2", turns(2))
    for client in (operator_api, admin_api, operator_api):
        client.get("/api/v1/threads/t1/agent-state")
    operator_api.get("/api/v1/threads/t2/messages")
    seen = sorted(events("thread.read").values_list("actor_name", "target"))
    assert seen == [("adam", "thread:t1"), ("olivia", "thread:t1"), ("olivia", "thread:t2")]


@override_settings(MEMORYADMIN_AUDIT_READ_WINDOW_SECONDS=60)
def test_the_window_is_the_setting(alice, operator_api):
    save(alice, "t1", turns(2))
    t0 = timezone.now()
    for seconds in (0, 30, 61):  # the read at 30 s falls in the first one's window, the one at 61 s does not
        with mock.patch("memoryadmin.audit.timezone.now", return_value=t0 + timedelta(seconds=seconds)):
            operator_api.get("/api/v1/threads/t1")
    assert events("thread.read").count() == 2


def test_the_window_defaults_to_300_seconds():
    from django.conf import settings

    assert settings.MEMORYADMIN_AUDIT_READ_WINDOW_SECONDS == 300


# --- bulk reads: one event with the count and the filter -------------------------------------------


def test_listing_other_users_threads_is_one_event_with_count_and_filter(alice, bob, operator_api, alice_api):
    for i in range(3):
        save(alice, f"a{i}", turns(2))
    save(bob, "b1", turns(2))
    alice_api.get("/api/v1/threads")
    assert not events("thread.list").exists()  # a member lists her own threads only
    assert operator_api.get("/api/v1/threads?owner=alice&q=a").status_code == 200
    event = events("thread.list").get()
    assert event.target == "threads?owner=alice&q=a"
    assert event.detail["count"] == 3 and event.detail["filter"] == {"owner": "alice", "q": "a"}
    assert event.detail["threads"] == ["a0", "a1", "a2"]
    operator_api.get("/api/v1/threads?owner=alice&q=a")  # the same page again: no new event
    operator_api.get("/api/v1/threads")  # another filter: one more
    assert events("thread.list").count() == 2


def test_langgraphs_thread_search_with_values_is_one_event(alice, admin_api):
    checkpoints(alice, "a1", 2)
    checkpoints(alice, "a2", 1)
    assert len(admin_api.post("/api/v1/threads/search", {"limit": 5}, format="json").json()) == 2
    event = events("thread.list").get()
    assert event.target.startswith("threads/search?") and event.detail["count"] == 2
    assert event.detail["filter"]["limit"] == 5


def test_the_dashboards_lists_are_audited_like_the_api(client, alice, operator):
    save(alice, "a1", turns(2))
    login_client(client, operator)
    client.get("/threads/")
    client.get("/")
    assert sorted(events("thread.list").values_list("target", flat=True)) == ["threads?page=1", "threads?view=home"]


def test_store_reads_of_other_users_items_are_audited(alice, alice_api, operator_api):
    store_item(alice, ["users", "alice"], "k1")
    store_item(alice, ["users", "alice"], "k2")
    alice_api.get("/api/v1/store/items", {"namespace": "users.alice", "key": "k1"})
    alice_api.post("/api/v1/store/items/search", {"namespace_prefix": ["users"]}, format="json")
    assert not AuditEvent.objects.exists()  # the owner's own reads leave no event
    assert operator_api.get("/api/v1/store/items", {"namespace": "users.alice", "key": "k1"}).status_code == 200
    read = events("store.read").get()
    assert (read.target, read.detail["owner"]) == ("store:users.alice/k1", "alice")
    found = operator_api.post("/api/v1/store/items/search", {"namespace_prefix": ["users"], "query": "k2"}, format="json")
    assert len(found.json()["items"]) >= 1
    search = events("store.search").get()
    assert search.detail["count"] == len(found.json()["items"])
    assert search.detail["filter"]["namespace_prefix"] == "users" and search.detail["filter"]["query"] == "k2"


# --- refusals on ownership name the owner ---------------------------------------------------------


def test_a_write_to_a_taken_thread_id_names_the_owner_and_recommends_server_ids(alice, bob_api, operator_api):
    save(alice, "t1", turns(2))
    response = bob_api.put("/api/v1/threads/t1/agent-state", {"agent_code": "bot", "context": turns(1)}, format="json")
    assert response.status_code == 403
    detail = response.json()["detail"]
    assert "'t1' is taken" in detail and "POST /api/v1/threads without a thread_id" in detail
    assert "alice" not in detail  # the answer does not tell who owns it; the audit log does
    event = events("access.denied").get()
    assert event.actor_name == "bob" and event.target == "thread:t1"
    assert (event.detail["actor"], event.detail["owner"]) == ("bob", "alice")
    # A refusal on role is not about ownership: it names no owner.
    assert operator_api.post("/api/v1/threads/t1/clear").status_code == 403
    event = events("access.denied").get(actor_name="olivia")
    assert "owner" not in event.detail and event.detail["reason"] == "Operators have read-only access."


def test_a_members_refused_read_is_a_denial_not_a_read(alice, bob_api):
    save(alice, "t1", turns(2))
    assert bob_api.get("/api/v1/threads/t1/messages").status_code == 403
    assert events("access.denied").filter(target="thread:t1", actor_name="bob").count() == 1
    assert not events("thread.read").exists()


# --- the page ------------------------------------------------------------------------------------


@pytest.fixture
def log(alice, bob, admin_user):
    for i in range(3):
        audit_record(actor=alice, action="thread.delete", target=f"thread:a{i}")
    audit_record(actor=bob, action="store.delete", target="store:x/k")
    audit_record(actor=admin_user, action="thread.clear", target="thread:a1")


@pytest.mark.parametrize("who", ["alice", "operator"])
def test_only_admins_read_the_audit_log(client, log, who, request):
    login_client(client, request.getfixturevalue(who))
    before = AuditEvent.objects.count()
    assert client.get("/audit/").status_code == 403
    assert client.get("/audit/export?format=csv").status_code == 403
    assert AuditEvent.objects.count() == before + 2  # the two refusals, nothing else
    assert events("access.denied").filter(target="audit").count() == 2


def test_the_page_filters_by_actor_action_target_and_date(client, log, admin_user):
    login_client(client, admin_user)
    body = client.get("/audit/?actor=alice").content.decode()
    assert body.count("thread.delete</span>") == 3 and "store:x/k" not in body
    body = client.get("/audit/?action=thread.").content.decode()
    assert "store.delete</span>" not in body and body.count('data-event="') == 4
    body = client.get("/audit/?target=thread:a1").content.decode()
    assert body.count('data-event="') == 2
    body = client.get("/audit/?target=store:*").content.decode()
    assert body.count('data-event="') == 1
    body = client.get("/audit/?until=2000-01-01").content.decode()
    assert 'data-event="' not in body and "No event matches" in body
    # The filters stay in the page's form and in the export links.
    body = client.get("/audit/?actor=alice&action=thread.delete").content.decode()
    assert 'value="alice"' in body and "format=csv" in body and "actor=alice" in body


def test_bad_filters_are_a_400(client, admin_user):
    login_client(client, admin_user)
    assert client.get("/audit/?since=yesterday").status_code == 400
    assert client.get("/audit/?before=x").status_code == 400
    assert client.get("/audit/export?format=xml").status_code == 400


def test_the_page_paginates_by_keyset(client, admin_user, alice):
    for i in range(120):
        audit_record(actor=alice, action="thread.read", target=f"thread:t{i:03d}")
    login_client(client, admin_user)
    first = client.get("/audit/?action=thread.read")
    assert first.content.decode().count('data-event="') == 50
    older = first.context["older_url"]
    second = client.get("/audit/" + older)
    assert "action=thread.read" in older and "before=" in older
    targets = [e.target for e in second.context["page"].events]
    assert targets[0] == "thread:t069" and targets[-1] == "thread:t020"
    third = client.get("/audit/" + second.context["older_url"])
    assert len(third.context["page"].events) == 20 and not third.context["older_url"]
    back = client.get("/audit/" + third.context["newer_url"])
    assert [e.target for e in back.context["page"].events] == targets


def test_the_htmx_filter_answers_the_table_fragment(client, log, admin_user):
    login_client(client, admin_user)
    response = client.get("/audit/?actor=bob", HTTP_HX_REQUEST="true", HTTP_HX_TARGET="audit-table")
    body = response.content.decode()
    assert body.lstrip().startswith('<div id="audit-table">') and "<html" not in body and "store:x/k" in body


@pytest.mark.parametrize("count", [5, 50])
def test_the_page_takes_the_same_queries_at_any_size(client, admin_user, alice, count, django_assert_num_queries):
    for i in range(count):
        audit_record(actor=alice, action="thread.read", target=f"thread:t{i}", detail={"owner": "bob"})
    login_client(client, admin_user)
    # session, user, role, events page
    with django_assert_num_queries(4):
        assert client.get("/audit/?action=thread.read").status_code == 200


def test_the_csv_export_streams_the_filtered_log(client, log, admin_user):
    login_client(client, admin_user)
    response = client.get("/audit/export?format=csv&actor=alice")
    assert response.streaming and response["Content-Type"].startswith("text/csv")
    assert response["Content-Disposition"].startswith('attachment; filename="audit-')
    rows = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert rows[0] == ["id", "created_at", "actor", "action", "target", "ip", "detail"]
    assert [row[4] for row in rows[1:]] == ["thread:a2", "thread:a1", "thread:a0"]
    export = events("audit.export").get()
    assert export.detail == {"format": "csv", "filters": {"actor": "alice"}}


def test_the_json_export_is_one_valid_document(client, log, admin_user):
    login_client(client, admin_user)
    response = client.get("/audit/export?format=json&action=store.delete")
    records = json.loads(b"".join(response.streaming_content))
    assert [(r["actor"], r["target"]) for r in records] == [("bob", "store:x/k")]
    empty = client.get("/audit/export?format=json&actor=nobody")
    assert json.loads(b"".join(empty.streaming_content)) == []


def test_a_role_change_in_the_django_admin_is_an_event(client, alice):
    from django.contrib.auth.models import Group

    root = get_user_model().objects.create_superuser("root", password="pw-for-tests-1")
    client.force_login(root)
    operator_group = Group.objects.get(name="operator")
    data = {
        "username": "alice",
        "is_active": "on",
        "groups": [operator_group.pk],
        "date_joined_0": "2026-01-01",
        "date_joined_1": "00:00:00",
        "initial-date_joined_0": "2026-01-01",
        "initial-date_joined_1": "00:00:00",
    }
    response = client.post(f"/django-admin/auth/user/{alice.pk}/change/", data)
    assert response.status_code == 302, response.content.decode()[:2000]
    event = events("user.role_set").get()
    assert (event.actor_name, event.target) == ("root", "user:alice")
    assert event.detail == {"before": "member", "after": "operator", "via": "django-admin"}
    # Saving again without a change of role records nothing.
    client.post(f"/django-admin/auth/user/{alice.pk}/change/", data)
    assert events("user.role_set").count() == 1
