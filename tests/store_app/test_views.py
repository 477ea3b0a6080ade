"""The store browser: tree, items, search, item page, admin deletes (full pages and htmx fragments)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memoryadmin.models import AuditEvent
from store_app import services
from store_app.models import StoreItem
from tests.conftest import login_client
from tests.store_app.conftest import bulk_items

HX = {"HTTP_HX_REQUEST": "true"}


def put(actor, namespace, key, value, **kwargs):
    return services.store_item_put(actor=actor, namespace=list(namespace), key=key, value=value, **kwargs)


@pytest.fixture
def memories(alice, bob):
    put(alice, ["users", "alice", "preferences"], "language", {"language": "zh-CN"})
    put(alice, ["users", "alice", "preferences"], "diet", {"text": "vegetarian", "confidence": 0.9})
    put(alice, ["users", "alice", "profile"], "name", {"text": "Alice"})
    put(alice, ["memories", "alice"], "tea", {"text": "likes green tea", "confidence": 0.8}, ttl=60)
    put(bob, ["users", "bob", "preferences"], "language", {"language": "en-GB"})
    return alice


def test_the_browser_lists_top_level_namespaces_with_counts(client, admin_user, memories):
    login_client(client, admin_user)
    response = client.get("/store/")
    assert response.status_code == 200
    page = response.content.decode()
    assert 'href="/store/?ns=users"' in page and 'href="/store/?ns=memories"' in page
    assert 'title="items in this subtree">4<' in page
    assert "All namespaces" in page


def test_a_deep_link_opens_the_tree_down_to_the_namespace(client, admin_user, memories):
    login_client(client, admin_user)
    page = client.get("/store/", {"ns": "users.alice.preferences"}).content.decode()
    assert 'href="/store/?ns=users.alice"' in page
    assert 'aria-current="true">preferences<' in page
    assert "language" in page and "vegetarian" in page
    assert "2 items in this namespace" in page


def test_expanding_a_node_returns_its_children_only(client, admin_user, memories):
    login_client(client, admin_user)
    response = client.get("/store/tree", {"ns": "users"}, **HX)
    assert response.status_code == 200
    level = response.content.decode()
    assert "<html" not in level
    assert ">alice<" in level and ">bob<" in level
    assert 'hx-get="/store/tree?ns=users.alice"' in level
    assert "preferences" not in level


def test_an_htmx_navigation_renders_only_the_item_panel(client, admin_user, memories):
    login_client(client, admin_user)
    response = client.get("/store/", {"ns": "users.alice.profile"}, HTTP_HX_TARGET="item-panel", **HX)
    fragment = response.content.decode()
    assert fragment.lstrip().startswith('<section id="item-panel"')
    assert "Alice" in fragment
    assert "ns-tree" not in fragment


def test_search_by_text_ranks_items_in_the_subtree(client, alice, memories):
    login_client(client, alice)
    page = client.get("/store/", {"ns": "memories", "q": "tea"}).content.decode()
    assert "likes green tea" in page
    assert "Best matches first" in page
    assert "<th class=\"num\">Score</th>" in page


def test_search_by_filter_uses_the_json_filter(client, alice, memories):
    login_client(client, alice)
    page = client.get("/store/", {"ns": "users", "filter": '{"confidence": {"$gte": 0.85}}'}).content.decode()
    assert "vegetarian" in page
    assert "zh-CN" not in page


@pytest.mark.parametrize("bad", ["{not json", "[1]", '{"n": {"$regex": "x"}}'])
def test_a_bad_filter_is_shown_as_a_form_error(client, alice, memories, bad):
    login_client(client, alice)
    response = client.get("/store/", {"ns": "users", "filter": bad})
    assert response.status_code == 200
    assert "form-errors" in response.content.decode()


def test_a_bad_namespace_in_the_url_is_a_400_page(client, alice):
    login_client(client, alice)
    assert client.get("/store/", {"ns": "users..x"}).status_code == 400
    assert client.get("/store/item", {"ns": "users", "key": ""}).status_code == 400


def test_the_item_page_shows_value_owner_and_expiry(client, alice, memories):
    login_client(client, alice)
    response = client.get("/store/item", {"ns": "memories.alice", "key": "tea"})
    assert response.status_code == 200
    page = response.content.decode()
    assert "likes green tea" in page
    assert "60 min" in page
    assert ">alice<" in page


def test_a_missing_item_page_is_404(client, alice):
    login_client(client, alice)
    assert client.get("/store/item", {"ns": "users.alice", "key": "nothing"}).status_code == 404


def test_agent_content_is_escaped_everywhere(client, admin_user, alice):
    evil = "<script>alert(1)</script>"
    put(alice, ["xss", "<img src=x onerror=alert(1)>"], evil, {"text": evil, evil: evil})
    login_client(client, admin_user)
    pages = [
        client.get("/store/", {"ns": "xss"}).content.decode(),
        client.get("/store/", {"ns": "xss.<img src=x onerror=alert(1)>"}).content.decode(),
        client.get("/store/tree", {"ns": "xss"}).content.decode(),
        client.get("/store/", {"ns": "xss", "q": "alert"}).content.decode(),
        client.get("/store/item", {"ns": "xss.<img src=x onerror=alert(1)>", "key": evil}).content.decode(),
    ]
    for page in pages:
        assert "<script>alert(1)</script>" not in page
        assert "<img src=x" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in pages[1]


def test_an_admin_deletes_an_item_and_it_is_audited(client, admin_user, memories):
    login_client(client, admin_user)
    response = client.post("/store/item/delete", {"ns": "users.bob.preferences", "key": "language"})
    assert response.status_code == 302
    assert response["Location"] == "/store/?ns=users.bob.preferences"
    assert not StoreItem.objects.filter(namespace_path="users.bob.preferences").exists()
    event = AuditEvent.objects.get(action="store.delete")
    assert event.target == "store:users.bob.preferences/language"
    assert event.detail["owner"] == "bob"


def test_an_htmx_delete_answers_with_a_client_redirect(client, admin_user, memories):
    login_client(client, admin_user)
    response = client.post("/store/item/delete", {"ns": "memories.alice", "key": "tea"}, **HX)
    assert response["HX-Redirect"] == "/store/?ns=memories.alice"


def test_the_item_page_offers_admins_a_confirmed_delete(client, admin_user, memories):
    login_client(client, admin_user)
    page = client.get("/store/item", {"ns": "memories.alice", "key": "tea"}).content.decode()
    assert 'hx-post="/store/item/delete"' in page
    assert "hx-confirm=" in page


def test_the_subtree_preview_says_how_many_items_go(client, admin_user, memories):
    login_client(client, admin_user)
    response = client.get("/store/subtree", {"ns": "users"}, **HX)
    fragment = response.content.decode()
    assert "This deletes" in fragment and 'data-impact="4"' in fragment
    assert "owned by 2 users" in fragment
    assert 'hx-confirm="Delete 4 items under users? This cannot be undone."' in fragment
    assert "<html" not in fragment
    full = client.get("/store/subtree", {"ns": "users"})
    assert "<html" in full.content.decode() and "This deletes" in full.content.decode()
    assert StoreItem.objects.count() == 5


def test_an_admin_deletes_a_subtree_and_it_is_audited(client, admin_user, memories):
    login_client(client, admin_user)
    response = client.post("/store/subtree/delete", {"ns": "users.alice", "confirm": "1"})
    assert response.status_code == 302
    assert response["Location"] == "/store/?ns=users"
    assert sorted(StoreItem.objects.values_list("namespace_path", flat=True)) == ["memories.alice", "users.bob.preferences"]
    event = AuditEvent.objects.get(action="store.clear")
    assert event.detail == {"namespace": ["users", "alice"], "deleted": 3}


def test_a_subtree_delete_needs_the_confirmation_field(client, admin_user, memories):
    login_client(client, admin_user)
    assert client.post("/store/subtree/delete", {"ns": "users"}).status_code == 400
    assert StoreItem.objects.count() == 5


def test_pages_refuse_the_wrong_method(client, admin_user):
    login_client(client, admin_user)
    assert client.get("/store/item/delete").status_code == 405
    assert client.post("/store/", {}).status_code == 405


# Query counts: every page costs the same whatever the store holds.


def _fill(alice, bob, count: int, start: int = 0) -> None:
    rows = []
    for index in range(start, count):
        owner = alice if index % 2 else bob
        namespace = ["users", owner.username, f"topic{index % 4}"]
        value = {"text": f"memory {index} about tea", "n": index}
        rows.append((owner, namespace, f"k{index:04d}", value, 60 if index % 3 == 0 else None))
    bulk_items(rows)


PAGES = [
    ("/store/", {}, {}),
    ("/store/", {"ns": "users.alice.topic1"}, {}),
    ("/store/", {"ns": "users.alice.topic1"}, {"HTTP_HX_TARGET": "item-panel", **HX}),
    ("/store/", {"ns": "users", "q": "tea"}, {}),
    ("/store/", {"ns": "users", "filter": '{"n": {"$gt": 3}}'}, {}),
    ("/store/tree", {"ns": "users"}, HX),
    ("/store/tree", {"ns": "users.alice"}, HX),
    ("/store/item", {"ns": "users.alice.topic1", "key": "k0001"}, {}),
]


@pytest.mark.parametrize("who", ["alice", "admin_user"])
@pytest.mark.parametrize(("path", "params", "headers"), PAGES)
def test_store_pages_issue_a_constant_number_of_queries(
    client, request, alice, bob, django_assert_num_queries, who, path, params, headers
):
    login_client(client, request.getfixturevalue(who))
    _assert_constant(client, alice, bob, django_assert_num_queries, path, params, headers)


def test_the_subtree_preview_issues_a_constant_number_of_queries(client, admin_user, alice, bob, django_assert_num_queries):
    login_client(client, admin_user)
    _assert_constant(client, alice, bob, django_assert_num_queries, "/store/subtree", {"ns": "users"}, HX)


def _assert_constant(client, alice, bob, django_assert_num_queries, path, params, headers):
    _fill(alice, bob, 10)
    client.get(path, params, **headers)
    with CaptureQueriesContext(connection) as small:
        assert client.get(path, params, **headers).status_code == 200
    _fill(alice, bob, 200, start=10)
    with django_assert_num_queries(len(small)):
        response = client.get(path, params, **headers)
    assert response.status_code == 200


def test_a_long_tree_level_pages_with_a_more_row(client, admin_user, alice, monkeypatch):
    from store_app import views

    monkeypatch.setattr(views, "TREE_LIMIT", 2)
    for label in ("a", "b", "c", "d", "e"):
        put(alice, ["wide", label], "k", {})
    login_client(client, admin_user)
    first = client.get("/store/tree", {"ns": "wide"}, **HX).content.decode()
    assert ">a<" in first and ">b<" in first and ">c<" not in first
    assert 'hx-get="/store/tree?ns=wide&amp;offset=2"' in first
    second = client.get("/store/tree", {"ns": "wide", "offset": "2"}, **HX).content.decode()
    assert not second.lstrip().startswith("<ul")
    assert ">c<" in second and ">d<" in second and ">e<" not in second
    assert "offset=4" in second
    last = client.get("/store/tree", {"ns": "wide", "offset": "4"}, **HX).content.decode()
    assert ">e<" in last and "offset=" not in last
