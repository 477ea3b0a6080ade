"""Ownership on every store endpoint and page (docs/store.md, rule ST3).

An item belongs to its first writer. Another member: 403 and nothing written.
Operators read everything and write nothing. Admins read everything, delete
and clear anything, and still do not overwrite someone else's item.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from memoryadmin.models import AuditEvent
from store_app import services
from store_app.models import StoreItem
from tests.conftest import login_client

ITEMS = "/api/v1/store/items"
SEARCH = "/api/v1/store/items/search"
NAMESPACES = "/api/v1/store/namespaces"


@pytest.fixture
def bobs_item(bob):
    return services.store_item_put(actor=bob, namespace=["users", "bob", "prefs"], key="theme", value={"theme": "light"})


@pytest.fixture
def alices_item(alice):
    return services.store_item_put(actor=alice, namespace=["users", "alice", "prefs"], key="theme", value={"theme": "dark"})


def denied(target: str) -> int:
    return AuditEvent.objects.filter(action="access.denied", target=target).count()


# API


def test_a_member_cannot_read_another_members_item(alice_api, bobs_item):
    response = alice_api.get(ITEMS, {"namespace": "users.bob.prefs", "key": "theme"})
    assert response.status_code == 403
    assert response.json()["code"] == "forbidden"
    assert denied("store:users.bob.prefs/theme") == 1


def test_a_member_cannot_overwrite_another_members_item(alice_api, bobs_item):
    response = alice_api.put(
        ITEMS, {"namespace": ["users", "bob", "prefs"], "key": "theme", "value": {"theme": "hacked"}}, format="json"
    )
    assert response.status_code == 403
    bobs_item.refresh_from_db()
    assert bobs_item.value == {"theme": "light"}
    assert denied("store:users.bob.prefs/theme") == 1


def test_a_member_cannot_delete_another_members_item(alice_api, bobs_item):
    response = alice_api.delete(ITEMS, {"namespace": ["users", "bob", "prefs"], "key": "theme"}, format="json")
    assert response.status_code == 403
    assert StoreItem.objects.filter(pk=bobs_item.pk).exists()


def test_a_member_reading_another_members_item_does_not_refresh_its_ttl(bob, operator_api):
    t0 = timezone.now() - timedelta(minutes=5)
    item = services.store_item_put(actor=bob, namespace=["s"], key="k", value={}, ttl=10, now=t0)
    assert operator_api.get(ITEMS, {"namespace": "s", "key": "k"}).status_code == 200
    item.refresh_from_db()
    assert item.expires_at == t0 + timedelta(minutes=10)


def test_search_and_namespaces_show_a_member_only_their_own_items(alice_api, alices_item, bobs_item):
    found = alice_api.post(SEARCH, {"namespace_prefix": ["users"]}, format="json").json()["items"]
    assert [item["namespace"] for item in found] == [["users", "alice", "prefs"]]
    listed = alice_api.post(NAMESPACES, {}, format="json").json()["namespaces"]
    assert listed == [["users", "alice", "prefs"]]
    # Bob's item matches the query's word; alice never sees it, only her own (which does not match).
    queried = alice_api.post(SEARCH, {"query": "light"}, format="json").json()["items"]
    assert [(item["namespace"], item["score"]) for item in queried] == [(["users", "alice", "prefs"], 0.0)]


@pytest.mark.parametrize("who", ["operator_api", "admin_api"])
def test_operators_and_admins_read_and_search_everything(request, who, alices_item, bobs_item):
    client = request.getfixturevalue(who)
    assert client.get(ITEMS, {"namespace": "users.bob.prefs", "key": "theme"}).json()["value"] == {"theme": "light"}
    found = client.post(SEARCH, {"namespace_prefix": ["users"]}, format="json").json()["items"]
    assert sorted(item["namespace"][1] for item in found) == ["alice", "bob"]
    listed = client.post(NAMESPACES, {"max_depth": 2}, format="json").json()["namespaces"]
    assert listed == [["users", "alice"], ["users", "bob"]]


def test_an_operator_writes_nothing(operator_api, bobs_item):
    new = operator_api.put(ITEMS, {"namespace": ["ops"], "key": "k", "value": {}}, format="json")
    over = operator_api.put(ITEMS, {"namespace": ["users", "bob", "prefs"], "key": "theme", "value": {}}, format="json")
    gone = operator_api.delete(ITEMS, {"namespace": ["users", "bob", "prefs"], "key": "theme"}, format="json")
    assert (new.status_code, over.status_code, gone.status_code) == (403, 403, 403)
    assert list(StoreItem.objects.values_list("key", "value")) == [("theme", {"theme": "light"})]
    assert AuditEvent.objects.filter(action="access.denied", actor__username="olivia").count() == 3


def test_an_admin_does_not_overwrite_another_users_item(admin_api, bobs_item):
    response = admin_api.put(
        ITEMS, {"namespace": ["users", "bob", "prefs"], "key": "theme", "value": {"theme": "admin"}}, format="json"
    )
    assert response.status_code == 403
    bobs_item.refresh_from_db()
    assert bobs_item.value == {"theme": "light"}


def test_an_admin_deletes_another_users_item_and_it_is_audited(admin_api, bobs_item):
    response = admin_api.delete(ITEMS, {"namespace": ["users", "bob", "prefs"], "key": "theme"}, format="json")
    assert response.status_code == 204
    assert not StoreItem.objects.exists()
    event = AuditEvent.objects.get(action="store.delete")
    assert event.actor_name == "adam"
    assert event.detail["owner"] == "bob"


def test_the_owner_overwrites_and_deletes_their_own_item(bob_api, bobs_item):
    assert bob_api.put(
        ITEMS, {"namespace": ["users", "bob", "prefs"], "key": "theme", "value": {"theme": "sepia"}}, format="json"
    ).status_code == 204
    bobs_item.refresh_from_db()
    assert bobs_item.value == {"theme": "sepia"}
    assert bob_api.delete(ITEMS, {"namespace": ["users", "bob", "prefs"], "key": "theme"}, format="json").status_code == 204


def test_a_key_whose_item_expired_stays_its_owners(alice_api, bob, bob_api):
    services.store_item_put(
        actor=bob, namespace=["shared"], key="k", value={"by": "bob"}, ttl=1, now=timezone.now() - timedelta(hours=1)
    )
    assert alice_api.get(ITEMS, {"namespace": "shared", "key": "k"}).json() is None  # expired: gone for every read
    response = alice_api.put(ITEMS, {"namespace": ["shared"], "key": "k", "value": {"by": "alice"}}, format="json")
    assert response.status_code == 403
    assert "the key is taken" in response.json()["detail"]
    item = StoreItem.objects.get()
    assert (item.owner.username, item.value) == ("bob", {"by": "bob"})
    event = AuditEvent.objects.get(action="access.denied", target="store:shared/k")
    assert (event.actor_name, event.detail["actor"], event.detail["owner"]) == ("alice", "alice", "bob")
    # The owner takes it up again: a new item at the same key.
    assert bob_api.put(ITEMS, {"namespace": ["shared"], "key": "k", "value": {"by": "bob again"}}, format="json").status_code == 204
    item.refresh_from_db()
    assert item.value == {"by": "bob again"} and item.expires_at is None


# Pages


def test_a_member_cannot_open_another_members_item_page(client, alice, bobs_item):
    login_client(client, alice)
    response = client.get("/store/item", {"ns": "users.bob.prefs", "key": "theme"})
    assert response.status_code == 403
    assert denied("store:users.bob.prefs/theme") == 1


def test_the_tree_and_table_show_a_member_only_their_own_items(client, alice, alices_item, bobs_item):
    login_client(client, alice)
    page = client.get("/store/", {"ns": "users"}).content.decode()
    assert "alice" in page
    assert "users.bob" not in page and ">bob<" not in page
    level = client.get("/store/tree", {"ns": "users"}).content.decode()
    assert ">alice<" in level and ">bob<" not in level
    table = client.get("/store/", {"ns": "users.bob.prefs"}).content.decode()
    assert "light" not in table


@pytest.mark.parametrize("who", ["alice", "operator"])
def test_only_the_owner_or_an_admin_deletes_an_item_from_the_dashboard(client, request, who, bobs_item):
    login_client(client, request.getfixturevalue(who))
    response = client.post("/store/item/delete", {"ns": "users.bob.prefs", "key": "theme"})
    assert response.status_code == 403
    assert StoreItem.objects.filter(pk=bobs_item.pk).exists()


@pytest.mark.parametrize("who", ["bob", "admin_user"])
def test_the_dashboard_deletes_an_item_as_the_api_does(client, request, who, bobs_item):
    """One rule for both surfaces (memoryadmin.policy, "store.delete"): the owner or an admin."""
    login_client(client, request.getfixturevalue(who))
    page = client.get("/store/item", {"ns": "users.bob.prefs", "key": "theme"}).content.decode()
    assert "Delete item" in page
    response = client.post("/store/item/delete", {"ns": "users.bob.prefs", "key": "theme"})
    assert response.status_code == 302
    assert not StoreItem.objects.filter(pk=bobs_item.pk).exists()
    assert client.post("/store/item/delete", {"ns": "users.bob.prefs", "key": "theme"}).status_code == 404


@pytest.mark.parametrize("who", ["alice", "operator"])
def test_only_an_admin_previews_or_deletes_a_subtree(client, request, who, bobs_item):
    login_client(client, request.getfixturevalue(who))
    assert client.get("/store/subtree", {"ns": "users"}).status_code == 403
    assert client.post("/store/subtree/delete", {"ns": "users", "confirm": "1"}).status_code == 403
    assert StoreItem.objects.count() == 1


@pytest.mark.parametrize("who", ["alice", "operator"])
def test_delete_controls_are_hidden_from_those_the_rule_refuses(client, request, who, alices_item):
    login_client(client, request.getfixturevalue(who))
    page = client.get("/store/", {"ns": "users.alice.prefs"}).content.decode()
    assert "Delete this subtree" not in page  # subtrees: admins only
    detail = client.get("/store/item", {"ns": "users.alice.prefs", "key": "theme"}).content.decode()
    # The item: its owner (alice) is offered the delete the API would let her make; the operator is not.
    assert ("Delete item" in detail) == (who == "alice")


def test_operator_pages_show_every_owner(client, operator, alices_item, bobs_item):
    login_client(client, operator)
    page = client.get("/store/", {"ns": "users"}).content.decode()
    assert ">alice<" in page and ">bob<" in page
    detail = client.get("/store/item", {"ns": "users.bob.prefs", "key": "theme"})
    assert detail.status_code == 200


def test_pages_need_a_login(client):
    response = client.get("/store/")
    assert response.status_code == 302
    assert "/accounts/login/" in response["Location"]
