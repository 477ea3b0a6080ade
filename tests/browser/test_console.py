"""The operator console in a real browser: bulk selection, long threads, narrow screens, dark theme, keys."""

from __future__ import annotations

import re
from io import StringIO

import pytest
from django.core.management import call_command
from playwright.sync_api import expect

from sessions_app.models import Block, Thread
from sessions_app.threads.services import thread_save_agent_state

from .conftest import shot, sign_in

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def demo():
    call_command("demo_data", stdout=StringIO())


def test_choosing_a_bulk_action_keeps_the_selection(page, live_server, demo):
    sign_in(page, live_server, "admin")
    # The table as the page first drew it (a filter swaps it for a fresh one).
    page.check("#thread-table tbody tr:nth-child(1) input[name=ids]")
    page.check("#thread-table tbody tr:nth-child(2) input[name=ids]")
    page.select_option("select[name=action]", "clear")
    # Choosing the action used to reload the table (the filter form listened to every select's
    # change), ~300 ms later, with nothing ticked: give any such reload the time to happen.
    page.wait_for_timeout(900)
    expect(page.locator("[data-bulk-count]")).to_have_text("2 selected")
    assert page.locator("#thread-table input[name=ids]:checked").count() == 2
    page.click("#bulk-form button[type=submit]")
    page.wait_for_selector("[data-impact=threads]")
    assert page.inner_text("[data-impact=threads]") == "2"
    assert page.errors == []


def test_a_link_to_a_seq_opens_the_window_around_it_in_a_long_thread(page, live_server, demo, django_user_model):
    alice = django_user_model.objects.get(username="alice")
    context = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"message number {i}"} for i in range(10_000)]
    thread_save_agent_state(actor=alice, thread_id="long-10k", agent_code="agent", context=context)
    sign_in(page, live_server, "alice")
    page.goto(f"{live_server.url}/threads/long-10k/")
    # Newest first: the last message is at the top, no clicking through 49 pages.
    assert page.locator("#block-list .block").first.get_attribute("id") == "seq-10000"
    page.goto(f"{live_server.url}/threads/long-10k/#seq-9000")
    target = page.locator("#seq-9000")
    expect(target).to_be_visible()
    expect(target).to_have_class(re.compile(r"\blanded\b"))
    assert "message number 8999" in target.inner_text()
    assert "around=9000" in page.url
    # The jump box does the same for a seq typed in.
    page.fill("input[name=jump]", "#1234")
    page.click("form.jump button")
    expect(page.locator("#seq-1234")).to_be_visible()
    shot(page, "thread-jump")
    assert page.errors == []


MAIN_PAGES = ["/", "/threads/", "/threads/kyoto-trip/", "/threads/kyoto-trip/?tab=archived", "/threads/kyoto-trip/checkpoints/",
              "/search/?q=weather", "/store/", "/graphs/", "/retention/", "/audit/"]


def test_every_main_page_fits_a_390_pixel_screen(browser, live_server, demo):
    context = browser.new_context(viewport={"width": 390, "height": 844})
    page = context.new_page()
    sign_in(page, live_server, "admin")
    too_wide = {}
    for path in MAIN_PAGES:
        response = page.goto(f"{live_server.url}{path}")
        assert response.status == 200, path
        width = page.evaluate("document.documentElement.scrollWidth")
        if width > 390:
            too_wide[path] = width
    shot(page, "narrow-audit")
    context.close()
    assert too_wide == {}


def test_the_dark_theme_follows_the_system_setting(browser, live_server, demo):
    backgrounds = {}
    for scheme in ("light", "dark"):
        context = browser.new_context(viewport={"width": 1280, "height": 860}, color_scheme=scheme)
        page = context.new_page()
        sign_in(page, live_server, "operator")
        page.goto(f"{live_server.url}/threads/kyoto-trip/")
        backgrounds[scheme] = page.evaluate("getComputedStyle(document.body).backgroundColor")
        if scheme == "dark":
            shot(page, "thread-dark")
        context.close()
    assert backgrounds["light"] == "rgb(246, 247, 249)"
    assert backgrounds["dark"] == "rgb(15, 19, 27)"


def test_j_and_k_walk_the_thread_list_and_enter_opens_a_thread(page, live_server, demo):
    sign_in(page, live_server, "operator")
    page.keyboard.press("j")
    page.keyboard.press("j")
    second = page.locator("#thread-table tbody tr").nth(1)
    expect(second).to_have_class("keyed")
    thread_id = second.locator("a").first.inner_text()
    page.keyboard.press("k")
    page.keyboard.press("j")
    page.keyboard.press("Enter")
    page.wait_for_url(f"**/threads/{thread_id}/")
    assert Thread.objects.filter(thread_id=thread_id).exists()
    assert Block.objects.exists() and page.errors == []


def test_an_admin_creates_a_key_copies_it_and_revokes_it(page, live_server, demo):
    from memoryadmin.apikeys import apikey_authenticate

    sign_in(page, live_server, "admin")
    page.click("nav.mainnav >> text=Keys")
    page.fill("input[name=username]", "alice")
    page.fill("input[name=name]", "ci-agent")
    page.click("button:has-text('Create key')")
    secret = page.inner_text("#issued-key").strip()
    assert secret.startswith("ma_") and apikey_authenticate(secret).owner.username == "alice"
    page.click("button[data-copy]")
    expect(page.locator("button[data-copy]")).to_have_text("Copied")
    shot(page, "keys-issued")
    prefix = secret.split("_")[1]
    page.click(f"tr[data-key='{prefix}'] button:has-text('Revoke')")
    expect(page.locator("dialog.confirm-dialog .question")).to_contain_text(f"Revoke key {prefix} of alice")
    page.click("dialog.confirm-dialog button[value=ok]")
    expect(page.locator(f"tr[data-key='{prefix}'] .status")).to_have_text("revoked")
    assert apikey_authenticate(secret) is None
    assert page.errors == []


def test_two_non_adjacent_checkpoints_compare_in_the_timeline(page, live_server, demo):
    sign_in(page, live_server, "alice")
    page.goto(f"{live_server.url}/threads/refund-A-1042/checkpoints/?ns=")
    boxes = page.locator("input[name=compare]")
    assert boxes.count() >= 3
    boxes.nth(0).check()
    boxes.nth(2).check()
    page.click("button:has-text('Compare the two ticked')")
    expect(page.locator("#checkpoint-detail h2")).to_have_text("Comparing two checkpoints")
    assert "compare=" in page.url
    assert page.locator("#checkpoint-detail .cp-diff li").count() >= 1
    shot(page, "checkpoints-compare")
    assert page.errors == []
