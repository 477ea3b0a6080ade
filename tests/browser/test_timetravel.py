"""Time travel, the JSON viewer, the retention dry run and confirmations, and console bugs, in a real browser."""

from __future__ import annotations

import re
from io import StringIO

import pytest
from django.core.management import call_command
from django.test import override_settings
from playwright.sync_api import expect

from .conftest import shot, sign_in

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def demo():
    call_command("demo_data", stdout=StringIO())


def test_the_api_docs_page_is_clean_under_the_content_security_policy(page, live_server, demo):
    sign_in(page, live_server, "alice")
    page.goto(f"{live_server.url}/api/docs/")
    page.wait_for_selector(".swagger-ui .info .title")
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("memoryadmin API")
    page.wait_for_timeout(500)
    assert page.errors == []


def test_the_erase_confirmation_label_stays_on_one_line(page, live_server, demo):
    sign_in(page, live_server, "admin")
    page.goto(f"{live_server.url}/erase/?username=bob")
    label = page.locator("label:has(input[name=confirm])")
    box, field = label.bounding_box(), page.locator("input[name=confirm]").bounding_box()
    line = page.evaluate("parseFloat(getComputedStyle(document.querySelector('.confirm-box')).lineHeight)")
    # The words and the name above the field: one line of text, not one line per word group.
    assert box["height"] - field["height"] < 1.8 * line
    assert page.errors == []


def test_an_owner_forks_from_a_checkpoint_and_sees_the_new_branch(page, live_server, demo):
    sign_in(page, live_server, "alice")
    page.goto(f"{live_server.url}/threads/refund-A-1042/checkpoints/?ns=")
    rows = page.locator(".cp-row")
    count = rows.count()
    assert count >= 4 and page.locator(".cp-row[data-fork]").count() == 0
    # Back in time: the checkpoint where the lookup had just run.
    rows.nth(count - 3).locator("a.cp-select").click()
    page.wait_for_selector(".cp-fork")
    page.click(".cp-fork > summary")
    page.fill("#fork-values", "{not json")
    page.click(".fork-form button[type=submit]")
    expect(page.locator("#fork-values-error")).to_contain_text("values: is not valid JSON")
    assert page.locator(".cp-row").count() == count  # nothing written
    page.fill("#fork-values", '{"order": {"id": "A-1042", "amount": 10, "currency": "EUR", "status": "partial refund"}}')
    page.click(".fork-form button[type=submit]")
    expect(page.locator(".flash")).to_contain_text("Forked: new checkpoint")
    expect(page.locator(".cp-row")).to_have_count(count + 1)
    fork = page.locator(".cp-row").first
    expect(fork).to_have_attribute("data-fork", "")
    expect(fork).to_have_class(re.compile(r"on-latest-branch"))
    assert page.locator(".cp-row.off-branch").count() >= 1  # the run left behind
    expect(page.locator("#checkpoint-detail")).to_contain_text("partial refund")
    shot(page, "checkpoints-fork")
    page.goto(f"{live_server.url}/threads/refund-A-1042/")
    expect(page.locator("#checkpoint-branches")).to_contain_text("2 branches")
    # The refused fork's answer is a 400 page, which the console notes; nothing else may be there.
    assert [e for e in page.errors if "status of 400" not in e] == []


def test_an_operator_sees_no_fork_control(page, live_server, demo):
    sign_in(page, live_server, "operator")
    page.goto(f"{live_server.url}/threads/refund-A-1042/checkpoints/?ns=")
    expect(page.locator("#checkpoint-detail h2")).to_be_visible()
    assert page.locator(".cp-fork, .fork-form").count() == 0
    assert page.errors == []


def test_json_values_are_a_collapsible_tree_with_copy_and_a_namespace_page_stays_short(page, live_server, demo, django_user_model):
    from store_app.services import store_item_put

    alice = django_user_model.objects.get(username="alice")
    for i in range(30):
        store_item_put(actor=alice, namespace=["notes", "alice"], key=f"n{i:02d}",
                       value={"title": f"note {i}", "lines": [f"line {n} </script><img src=x onerror=alert(1)>" for n in range(40)]})
    sign_in(page, live_server, "alice")
    page.goto(f"{live_server.url}/store/?ns=notes.alice")
    expect(page.locator(".store-items .json-tree")).to_have_count(30)
    height = page.evaluate("document.documentElement.scrollHeight")
    assert height < 3000, height
    first = page.locator(".store-items .json-tree").first
    first.locator("summary").first.click()
    expect(first.locator(".json-key").first).to_be_visible()
    first.locator("summary", has_text="40 items").click()
    expect(first.locator(".json-string").nth(3)).to_contain_text("</script><img src=x onerror=alert(1)>")
    assert page.locator("img[src=x]").count() == 0
    shot(page, "json-viewer")
    assert page.errors == []


def test_a_retention_dry_run_of_unsaved_values_lists_threads_and_deleting_a_policy_asks(page, live_server, demo):
    from memoryadmin.operations.models import RetentionPolicy
    from memoryadmin.operations.retention import retention_policy_save

    retention_policy_save(actor=None, agent_code="support-bot", purge_archived_days=365)
    sign_in(page, live_server, "admin")
    page.goto(f"{live_server.url}/retention/")
    saved = RetentionPolicy.objects.count()
    page.fill("input[name=keep_checkpoints]", "1")
    page.click("button[data-dry-run]")
    expect(page.locator("#draft-dry-run h2")).to_contain_text("not saved")
    expect(page.locator("#draft-dry-run .draft-threads li").first).to_be_visible()
    assert int(page.inner_text("[data-draft-checkpoints]")) > 0
    expect(page.locator("input[name=keep_checkpoints]")).to_have_value("1")
    assert RetentionPolicy.objects.count() == saved
    shot(page, "retention-dry-run")
    page.locator("tr[data-policy='support-bot'] button:has-text('Delete')").click()
    dialog = page.locator("dialog.confirm-dialog")
    expect(dialog).to_be_visible()
    expect(dialog.locator(".question")).to_contain_text(re.compile(r"support-bot\? Its \d+ threads? then follow the default policy"))
    dialog.locator("button[value=cancel]").click()
    assert RetentionPolicy.objects.count() == saved == 1
    page.locator("tr[data-policy='support-bot'] button:has-text('Delete')").click()
    dialog.locator("button[value=ok]").click()
    expect(page.locator("tr[data-policy]")).to_have_count(0)
    assert RetentionPolicy.objects.count() == 0
    assert page.errors == []


def test_operators_have_a_link_to_retention(page, live_server, demo):
    sign_in(page, live_server, "operator")
    page.click(".mainnav a:has-text('Retention')")
    page.wait_for_url(f"{live_server.url}/retention/")
    expect(page.locator("h1")).to_have_text("Retention")
    assert page.errors == []


def test_without_javascript_show_turns_opens_a_styled_page(browser, live_server, demo):
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    sign_in(page, live_server, "alice")
    page.goto(f"{live_server.url}/threads/refund-A-1042/")
    page.click("a:has-text('Show turns')")
    page.wait_for_load_state()
    assert page.locator("link[rel=stylesheet]").count() >= 1 and page.locator("nav.mainnav").count() == 1
    assert page.evaluate("getComputedStyle(document.body).margin") == "0px"  # the dashboard's stylesheet applies
    context.close()


@override_settings(MEMORYADMIN_TURN_SSE_POLL_SECONDS=0.1, MEMORYADMIN_TURN_SSE_MAX_SECONDS=1.5)
def test_the_live_turn_shows_each_chunk_once_with_a_fresh_counter_and_a_quiet_console(page, live_server):
    from sessions_app.threads.services import thread_save_agent_state
    from sessions_app.turns import services as turns

    from ..conftest import make_user

    alice = make_user("alice", password="memoryadmin")
    thread_save_agent_state(actor=alice, thread_id="live", agent_code="bot", context=[{"role": "user", "content": "hi"}])
    turns.turn_begin(actor=alice, thread_id="live", question="What is this?")
    turns.turn_append_chunk(actor=alice, thread_id="live", text="This")
    logged: list[str] = []
    page.on("console", lambda msg: logged.append(msg.text))
    sign_in(page, live_server, "alice")
    page.goto(f"{live_server.url}/threads/live/")
    expect(page.locator("#pending-answer")).to_have_text("This")
    expect(page.locator("[data-chunk-count]")).to_have_text("1")
    for text in (" is", " a", " live"):
        turns.turn_append_chunk(actor=alice, thread_id="live", text=text)
        page.wait_for_timeout(300)
    expect(page.locator("#pending-answer")).to_have_text("This is a live")
    expect(page.locator("[data-chunk-count]")).to_have_text("4")
    # The stream times out and the panel reconnects: what it shows stays whole, nothing twice.
    page.wait_for_timeout(2500)
    turns.turn_append_chunk(actor=alice, thread_id="live", text=" answer.")
    expect(page.locator("#pending-answer")).to_have_text("This is a live answer.")
    expect(page.locator("[data-chunk-count]")).to_have_text("5")
    turns.turn_finish(actor=alice, thread_id="live")
    expect(page.locator("ol.turns .turn-a")).to_have_text("This is a live answer.")
    assert not [text for text in logged if "[object Event]" in text], logged
    assert page.errors == []
