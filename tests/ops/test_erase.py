"""Erasing a user: every thread, block, checkpoint and store item; a receipt kept as an audit event."""

from __future__ import annotations

import hashlib
import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from memoryadmin.apikeys import apikey_create
from memoryadmin.models import ApiKey, AuditEvent
from memoryadmin.operations.erase import user_erase, user_erase_preview
from sessions_app.models import Block, Checkpoint, CheckpointWrite, Thread
from store_app.models import StoreItem

from ..conftest import login_client
from .helpers import checkpoints, compacted, save, store_item, table_counts, turns

pytestmark = pytest.mark.django_db


@pytest.fixture
def data(alice, bob):
    compacted(alice, "a1", 6)
    save(alice, "a2", turns(3))
    checkpoints(alice, "a1", 4)
    store_item(alice, ["users", "alice"], "prefs")
    store_item(alice, ["users", "alice", "notes"], "n1")
    save(bob, "b1", turns(2))
    checkpoints(bob, "b1", 2)
    store_item(bob, ["users", "bob"], "prefs")


def test_the_preview_counts_and_writes_nothing(data, admin_user):
    before = table_counts()
    preview = user_erase_preview(actor=admin_user, username="alice")
    assert {k: preview[k] for k in ("threads", "blocks", "checkpoints", "pending_writes", "store_items")} == {
        "threads": 2, "blocks": 10, "checkpoints": 4, "pending_writes": 4, "store_items": 2
    }
    assert preview["bytes"] > 0 and table_counts() == before


def test_erasing_removes_everything_of_one_user_and_nothing_else(data, admin_user, bob):
    receipt = user_erase(actor=admin_user, username="alice", batch=3)
    assert receipt["counts"] == {
        "threads": 2, "blocks": 10, "checkpoints": 4, "pending_writes": 4, "checkpoint_values": 0, "store_items": 2, "graph_definitions": 0
    }
    assert not Thread.objects.filter(owner__username="alice").exists()
    assert not StoreItem.objects.filter(owner__username="alice").exists()
    assert Block.objects.count() == 2 and Checkpoint.objects.count() == 2 and CheckpointWrite.objects.count() == 2
    assert StoreItem.objects.count() == 1 and Thread.objects.get().thread_id == "b1"
    event = AuditEvent.objects.get(action="user.erase")
    assert event.target == "user:alice" and event.actor_name == "adam" and event.detail == receipt


def test_the_receipt_hashes_identify_what_went_without_keeping_it(data, admin_user):
    ids = "".join(f"{t}\n" for t in Thread.objects.filter(owner__username="alice").order_by("pk").values_list("thread_id", flat=True))
    receipt = user_erase(actor=admin_user, username="alice")
    assert receipt["sha256"]["threads"] == hashlib.sha256(ids.encode()).hexdigest()
    assert "prefs" not in json.dumps(receipt["sha256"]) and "m 0" not in json.dumps(receipt)


def test_revoking_access_deactivates_and_revokes_keys_first(data, admin_user, alice):
    apikey_create(owner=alice)
    user_erase(actor=admin_user, username="alice", revoke_access=True)
    alice.refresh_from_db()
    assert not alice.is_active and not ApiKey.objects.filter(owner=alice, revoked_at__isnull=True).exists()


@pytest.mark.parametrize("who", ["bob", "operator"])
def test_only_admins_erase(client, data, who, request):
    login_client(client, request.getfixturevalue(who))
    before = table_counts()
    assert client.get("/erase/?username=alice").status_code == 403
    assert client.post("/erase/", {"username": "alice", "confirm": "alice"}).status_code == 403
    after = table_counts()
    assert after.pop("audit") == before.pop("audit") + 2 and after == before


def test_the_page_previews_then_erases_after_the_name_is_typed(client, data, admin_user):
    login_client(client, admin_user)
    body = client.get("/erase/?username=alice").content.decode()
    assert 'data-impact="threads">2<' in body and 'data-impact="store_items">2<' in body
    before = table_counts()
    wrong = client.post("/erase/", {"username": "alice", "confirm": "alce"})
    assert wrong.status_code == 400 and table_counts() == before
    done = client.post("/erase/", {"username": "alice", "confirm": "alice", "revoke_access": "1"})
    assert done.status_code == 200 and done.context["receipt"]["counts"]["threads"] == 2
    assert 'data-count="blocks">10<' in done.content.decode()
    assert client.get("/erase/?username=nobody").status_code == 404


def test_the_command_previews_and_erases(data):
    out = StringIO()
    before = table_counts()
    call_command("erase_user", "alice", "--dry-run", stdout=out)
    assert json.loads(out.getvalue())["threads"] == 2 and table_counts() == before
    out = StringIO()
    call_command("erase_user", "alice", "--yes", stdout=out)
    receipt = json.loads(out.getvalue())
    assert receipt["erased_by"] == "system" and receipt["counts"]["store_items"] == 2
    with pytest.raises(CommandError):
        call_command("erase_user", "nobody", "--yes", stdout=out)
