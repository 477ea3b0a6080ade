"""Operations in a real browser: the dashboard, bulk actions with a polled progress, search, audit, retention."""

from __future__ import annotations

import re
from io import StringIO

import pytest
from django.core.management import call_command
from playwright.sync_api import expect

from django.contrib.auth import get_user_model

from memoryadmin.models import AuditEvent
from memoryadmin.operations.models import BulkJob, RetentionRun
from sessions_app.models import Block
from sessions_app.threads.selectors import thread_get_for_read

from .conftest import shot, sign_in

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def demo():
    call_command("demo_data", stdout=StringIO())


def test_signing_in_lands_on_the_dashboard(page, live_server, demo):
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("#id_username", "admin")
    page.fill("#id_password", "memoryadmin")
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/")
    expect(page.locator("h1")).to_have_text("Overview")
    assert int(page.inner_text("[data-stat=threads]")) >= 28
    assert page.locator("svg.chart rect.bar-saves").count() == 14
    assert page.locator("text=Recent audit events").count() == 1
    shot(page, "ops-dashboard")
    assert page.errors == []


def test_an_admin_clears_threads_in_bulk_and_watches_the_progress(page, live_server, demo):
    sign_in(page, live_server, "admin")
    page.fill("input[name=q]", "session-00")
    expect(page.locator("#thread-table tbody tr")).to_have_count(10)
    # The page checkbox ticks every row of the page (static/js/bulk.js).
    page.check("[data-bulk-page]")
    expect(page.locator("[data-bulk-count]")).to_have_text("10 selected")
    page.select_option("select[name=action]", "clear")
    page.click("#bulk-form button[type=submit]")
    page.wait_for_selector("[data-impact=threads]")
    assert page.inner_text("[data-impact=threads]") == "10"
    shot(page, "ops-bulk-preview")
    page.click("button[data-confirm-bulk]")
    page.wait_for_selector("#job-progress[data-status=done]", timeout=20_000)
    assert page.inner_text("[data-count=threads]") == "10"
    shot(page, "ops-bulk-done")
    job = BulkJob.objects.get()
    assert job.status == "done" and job.processed == 10
    assert not Block.objects.filter(thread__thread_id__startswith="session-00", archived=False).exists()
    assert page.errors == []


def test_everything_matching_a_filter_is_one_selection(page, live_server, demo):
    sign_in(page, live_server, "admin")
    page.fill("input[name=q]", "session-01")
    expect(page.locator("#thread-table tbody tr")).to_have_count(10)
    page.check("[data-bulk-all-matching]")
    expect(page.locator("[data-bulk-count]")).to_have_text("every thread matching the filter")
    page.select_option("select[name=action]", "release")
    page.click("#bulk-form button[type=submit]")
    page.wait_for_selector("[data-impact=threads]")
    assert page.inner_text("[data-impact=threads]") == "10"
    assert "session-01" in page.inner_text(".subtitle")


def test_an_operator_searches_messages_and_opens_the_block(page, live_server, demo):
    sign_in(page, live_server, "operator")
    page.click("nav.mainnav >> text=Search")
    page.fill("input[name=q]", "kyoto")
    page.click("form.filters button[type=submit]")
    page.wait_for_selector("#search-results .hit")
    expect(page).to_have_url(re.compile(r"q=kyoto"))
    assert page.locator("#search-results mark").first.inner_text().lower() == "kyoto"
    shot(page, "ops-search")
    page.locator("#search-results .hit a.mono").first.click()
    page.wait_for_selector("h1:has-text('kyoto-trip')")
    seq = page.url.rsplit("#seq-", 1)[1]
    expect(page.locator(f"#seq-{seq}")).to_be_visible()
    assert AuditEvent.objects.filter(action="thread.search", actor_name="operator").exists()
    # Operators see no destructive bulk actions and no admin links.
    page.goto(f"{live_server.url}/threads/")
    assert page.locator("select[name=action] option").all_inner_texts() == ["Export"]
    assert page.locator("nav.mainnav >> text=Audit").count() == 0
    assert page.errors == []


def test_an_admin_filters_the_audit_log(page, live_server, demo):
    # The operator reads alice's thread: an audit event.
    thread_get_for_read(actor=get_user_model().objects.get(username="operator"), thread_id="kyoto-trip")
    sign_in(page, live_server, "admin")
    page.goto(f"{live_server.url}/audit/")
    page.fill("input[name=action]", "thread.read")
    page.fill("input[name=actor]", "operator")
    page.click("form.filters button[type=submit]")
    expect(page).to_have_url(re.compile(r"actor=operator.*|action=thread\.read.*actor=operator"))
    expect(page.locator("#audit-table tbody tr")).to_have_count(1)
    assert "action=thread.read" in page.url
    assert "thread:kyoto-trip" in page.inner_text("#audit-table")
    shot(page, "ops-audit")
    assert page.errors == []


def test_an_admin_previews_and_applies_retention(page, live_server, demo):
    sign_in(page, live_server, "admin")
    page.goto(f"{live_server.url}/retention/")
    page.fill("input[name=keep_checkpoints]", "1")
    page.click("text=Save policy")
    page.wait_for_selector("tr[data-policy='']")
    page.click("a[data-saved-dry-run]")
    page.wait_for_selector("#dry-run")
    assert "nothing was written" in page.inner_text("#dry-run")
    shot(page, "ops-retention")
    page.click("button:has-text('Apply now')")
    # Confirmed in the page's own dialog (not the browser's confirm()).
    page.click("dialog.confirm-dialog button[value=ok]")
    page.wait_for_selector("tr[data-run]")
    assert RetentionRun.objects.get().status == "done"
    assert page.errors == []
