"""The store browser in a real browser (Debian's chromium): the tree expands, search, admin deletes."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from memoryadmin.models import AuditEvent
from store_app import services
from store_app.models import StoreItem
from tests.browser.conftest import CHROMIUM, page, shot  # noqa: F401 - page is a fixture
from tests.conftest import make_user

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "memoryadmin"


@pytest.fixture(scope="module")
def browser():
    """Chromium for this module only: Playwright's sync API holds an event loop in the
    thread while it runs, which later asyncio.run() calls in the session must not meet."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        yield launched
        launched.close()


@pytest.fixture
def people():
    alice = make_user("alice", password=PASSWORD)
    admin = make_user("admin", "admin", password=PASSWORD)
    for index in range(3):
        services.store_item_put(
            actor=alice, namespace=["users", "alice", "preferences"], key=f"pref{index}", value={"text": f"likes tea {index}"}
        )
    services.store_item_put(actor=alice, namespace=["users", "alice", "profile"], key="name", value={"text": "Alice"})
    services.store_item_put(
        actor=alice, namespace=["memories", "alice"], key="xss", value={"text": "<script>alert('xss')</script>"}
    )
    return {"alice": alice, "admin": admin}


def sign_in(page, live_server, username: str) -> None:  # noqa: F811 - not the fixture
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_load_state("networkidle")
    page.goto(f"{live_server.url}/store/")


def test_a_member_expands_the_tree_and_opens_a_namespace(page, live_server, people):  # noqa: F811
    alerts: list[str] = []
    page.on("dialog", lambda dialog: (alerts.append(dialog.message), dialog.dismiss()))
    sign_in(page, live_server, "alice")
    tree = page.locator(".store-tree")
    expect(tree.locator(".ns-link", has_text="users")).to_be_visible()
    assert tree.locator(".ns-link", has_text="alice").count() == 0
    # Opening a node fetches its children with htmx.
    tree.locator("details summary").filter(has_text="users").locator(".count").click()
    expect(tree.locator(".ns-link", has_text="alice").first).to_be_visible()
    tree.locator("details summary").filter(has_text="alice").first.locator(".count").click()
    expect(tree.locator(".ns-link", has_text="preferences")).to_be_visible()
    # Selecting a namespace swaps the item panel and keeps the URL.
    tree.locator(".ns-link", has_text="preferences").click()
    expect(page.locator("#item-panel h2")).to_have_text("users.alice.preferences")
    expect(page.locator("#item-panel tbody tr")).to_have_count(3)
    assert "ns=users.alice.preferences" in page.url
    shot(page, "store-browser")
    # Search the subtree by text.
    page.locator(".ns-link", has_text="users").first.click()
    expect(page.locator("#item-panel h2")).to_have_text("users")
    page.fill("#item-panel input[name=q]", "tea")
    page.click("#item-panel button:has-text('Search')")
    expect(page.locator("#item-panel tbody tr")).to_have_count(3)
    expect(page.locator("#item-panel th", has_text="Score")).to_be_visible()
    # Hostile content stays text.
    page.goto(f"{live_server.url}/store/?ns=memories.alice")
    # Values start collapsed in the namespace table: open the item's tree, then read it.
    page.locator("#item-panel .json-tree summary").first.click()
    assert "<script>alert('xss')</script>" in page.inner_text("#item-panel")
    assert page.locator("#item-panel script").count() == 0
    assert alerts == []
    assert page.locator("text=Delete this subtree").count() == 0
    assert page.errors == []


def test_an_admin_previews_and_deletes_a_subtree(page, live_server, people):  # noqa: F811
    sign_in(page, live_server, "admin")
    page.goto(f"{live_server.url}/store/?ns=users.alice")
    page.click("text=Delete this subtree")
    expect(page.locator(".confirm-box")).to_contain_text("This deletes 4 items")
    page.click(".confirm-box button:has-text('Delete 4 items')")
    expect(page.locator("dialog.confirm-dialog .question")).to_contain_text("Delete 4 items")
    page.click("dialog.confirm-dialog button[value=ok]")
    page.wait_for_url(f"{live_server.url}/store/?ns=users")
    expect(page.locator(".flash")).to_contain_text("Deleted 4 items under users.alice")
    assert list(StoreItem.objects.values_list("namespace_path", flat=True)) == ["memories.alice"]
    assert AuditEvent.objects.filter(action="store.clear").count() == 1
    assert page.errors == []
