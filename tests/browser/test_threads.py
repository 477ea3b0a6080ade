"""The thread dashboard in a real browser: sign in, search, open a thread, switch tabs, act."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from playwright.sync_api import expect

from sessions_app.models import Block

from .conftest import shot, sign_in

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def demo():
    call_command("demo_data", stdout=StringIO())


def test_an_operator_browses_a_compacted_thread(page, live_server, demo):
    sign_in(page, live_server, "operator")
    page.goto(f"{live_server.url}/threads/")
    assert page.locator("#thread-table tbody tr").count() > 10
    page.fill("input[name=q]", "kyoto")
    expect(page.locator("#thread-table tbody tr")).to_have_count(1)
    assert "q=kyoto" in page.url  # the filter is kept in the URL
    page.click("text=kyoto-trip")
    page.wait_for_selector("h1:has-text('kyoto-trip')")
    assert page.locator(".block.type-summary").count() == 1
    shot(page, "thread-active")
    page.click("a[role=tab]:has-text('Archived')")
    # The demo thread was compacted twice: two groups, waited for (htmx swaps the panel).
    expect(page.locator("#tab-panel h2.group-head")).to_have_count(2)
    assert page.locator(".tool-call .tool-name").first.inner_text().startswith("→ get_weather")
    assert "tab=archived" in page.url
    page.click("a[role=tab]:has-text('Extra state')")
    # The extra state is drawn as the JSON viewer's tree, its values escaped text.
    tree = page.locator("[data-tab=state] .json-tree")
    expect(tree).to_contain_text('city: "Kyoto"')
    # Operators see no destructive buttons.
    assert page.locator("button:has-text('Clear')").count() == 0
    assert page.errors == []


def test_hostile_content_stays_text(page, live_server, demo):
    alerts: list[str] = []
    page.on("dialog", lambda dialog: (alerts.append(dialog.message), dialog.dismiss()))
    sign_in(page, live_server, "bob")
    page.goto(f"{live_server.url}/threads/bob-untrusted/")
    assert "<script>alert('xss')</script>" in page.inner_text(".blocks")
    assert alerts == []


def test_an_admin_clears_a_thread_after_confirming(page, live_server, demo):
    sign_in(page, live_server, "admin")
    page.goto(f"{live_server.url}/threads/support-4411/")
    native: list[str] = []
    page.on("dialog", lambda dialog: (native.append(dialog.message), dialog.dismiss()))
    page.click("button:has-text('Clear')")
    # The page asks in a dialog of its own, with the count, not the browser's confirm().
    question = page.locator("dialog.confirm-dialog .question")
    expect(question).to_contain_text("active block")
    page.click("dialog.confirm-dialog button[value=ok]")
    page.wait_for_selector("text=Cleared:")
    assert Block.objects.filter(thread__thread_id="support-4411", archived=False).count() == 0
    assert native == [] and page.errors == []


def test_a_member_meets_a_403_page_on_someone_elses_thread(page, live_server, demo):
    sign_in(page, live_server, "alice")
    response = page.goto(f"{live_server.url}/threads/bob-research-1/")
    assert response.status == 403
    assert "belongs to another user" in page.inner_text("main")
