"""Dashboard pages: full page and htmx fragment, escaping, constant query counts."""

from __future__ import annotations

import pytest

from sessions_app.models import Block, Thread
from sessions_app.threads.services import thread_save_agent_state

from ..conftest import login_client
from .helpers import turns

pytestmark = pytest.mark.django_db


def save(user, thread_id, context, **kwargs):
    return thread_save_agent_state(actor=user, thread_id=thread_id, agent_code="bot", context=context, **kwargs)


def test_thread_list_shows_own_threads_to_members(client, alice, bob):
    save(alice, "alice-1", [{"role": "user", "content": "about gardens"}])
    save(bob, "bob-1", turns(2))
    body = login_client(client, alice).get("/threads/").content.decode()
    assert "alice-1" in body and "about gardens" in body and "bob-1" not in body


def test_operators_see_everyones_threads_with_owner_column(client, alice, bob, operator):
    save(alice, "alice-1", turns(2))
    save(bob, "bob-1", turns(2))
    body = login_client(client, operator).get("/threads/").content.decode()
    assert "alice-1" in body and "bob-1" in body and "<th>Owner</th>" in body


def test_thread_list_search_returns_the_table_fragment_for_htmx(client, alice):
    save(alice, "kyoto", [{"role": "user", "content": "temples in Kyoto"}])
    save(alice, "other", [{"role": "user", "content": "something else"}])
    login_client(client, alice)
    response = client.get("/threads/?q=kyoto", HTTP_HX_REQUEST="true", HTTP_HX_TARGET="thread-table")
    body = response.content.decode()
    assert response.status_code == 200
    assert body.lstrip().startswith('<div id="thread-table">') and "<html" not in body
    assert "kyoto" in body and "other" not in body


@pytest.mark.parametrize("count", [2, 40])
def test_thread_list_query_count_is_constant(client, alice, count, django_assert_num_queries):
    for i in range(count):
        save(alice, f"t{i}", turns(3))
    login_client(client, alice)
    # session, user, role, agent codes, saved views, the total, the page of threads
    with django_assert_num_queries(7):
        assert client.get("/threads/").status_code == 200


@pytest.mark.parametrize("size", [10, 1000])
def test_thread_page_query_count_is_constant(client, alice, size, django_assert_num_queries):
    save(alice, "t1", turns(size))
    save(alice, "t1", turns(2))
    login_client(client, alice)
    for tab in ("active", "archived", "state"):
        # session, user, role, thread, blocks page
        with django_assert_num_queries(4 if tab == "state" else 5):
            assert client.get(f"/threads/t1/?tab={tab}").status_code == 200


def test_thread_page_shows_active_archived_groups_and_state(client, alice):
    save(alice, "t1", turns(4), extra_state={"plan": {"step": 2}}, extra_state_given=True)
    save(alice, "t1", [{"role": "system", "name": "__compaction_summary__", "content": "first summary"}])
    save(alice, "t1", [{"role": "system", "name": "__compaction_summary__", "content": "second summary"}])
    login_client(client, alice)
    active = client.get("/threads/t1/").content.decode()
    assert "second summary" in active and "first summary" not in active
    archived = client.get("/threads/t1/?tab=archived&order=oldest").content.decode()
    assert "Archived by rewrite #1" in archived and "Archived by rewrite #2" in archived
    assert archived.index("m 0") < archived.index("Archived by rewrite #2") < archived.index("first summary")
    state = client.get("/threads/t1/?tab=state").content.decode()
    assert "&quot;step&quot;: 2" in state


def test_tool_calls_and_results_are_shown_distinctly(client, alice):
    save(alice, "t1", [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "rainy"},
    ])
    body = login_client(client, alice).get("/threads/t1/").content.decode()
    assert 'class="tool-call"' in body and "→ get_weather" in body and "&quot;city&quot;: &quot;Oslo&quot;" in body
    assert "type-tool_result" in body and 'result of <a href="#call-call_1"' in body and "<code>call_1</code>" in body
    # The call links to its result and the result back to its call.
    assert 'id="call-call_1"' in body and 'href="#result-call_1"' in body and 'id="result-call_1"' in body
    assert "data-waiting" not in body


def test_a_tool_call_with_no_result_yet_says_so_where_none_could_follow(client, alice):
    """An agent paused before its tools: its last call has no result on the page's newest block
    and says so; in a window with newer blocks beyond it, the link stays (the result may be there)."""
    calls = [{"id": f"call_{n}", "type": "function", "function": {"name": "lookup", "arguments": "{}"}} for n in (1, 2)]
    save(alice, "t1", [
        {"role": "user", "content": "look both up"},
        {"role": "assistant", "content": "", "tool_calls": calls},
        {"role": "tool", "tool_call_id": "call_1", "content": "found"},
        *[{"role": "user", "content": f"filler {n}"} for n in range(210)],  # more than a window of 200
        {"role": "assistant", "content": "", "tool_calls": [{"id": "call_3", "name": "lookup", "args": {}}]},
    ])
    login_client(client, alice)
    newest = client.get("/threads/t1/").content.decode()  # the newest 200 blocks
    assert newest.count("data-waiting") == 1 and 'href="#result-call_3"' not in newest
    oldest = client.get("/threads/t1/?order=oldest").content.decode()  # the oldest 200: newer ones beyond
    assert "data-waiting" not in oldest and 'href="#result-call_1"' in oldest and 'href="#result-call_2"' in oldest
    after = client.get("/threads/t1/?order=oldest&after=200").content.decode()  # the rest, to the newest
    assert after.count("data-waiting") == 1 and 'href="#result-call_3"' not in after


def test_agent_content_is_escaped_everywhere(client, alice, operator):
    hostile = "<script>alert(1)</script>"
    save(alice, "t1", [{"role": "user", "content": hostile, "name": hostile, "tool_call_id": hostile},
                       {"role": "assistant", "content": "", "tool_calls": [{"id": hostile, "name": hostile, "args": {hostile: hostile}}]}],
         extra_state={hostile: hostile}, extra_state_given=True)
    Thread.objects.filter(thread_id="t1").update(agent_code="<b>x</b>")
    login_client(client, operator)
    pages = [client.get(url).content.decode() for url in ("/threads/", "/threads/t1/", "/threads/t1/?tab=state")]
    for body in pages:
        assert "<script>alert" not in body and "<b>x</b>" not in body
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in pages[1]


def test_tabs_answer_with_the_panel_fragment_for_htmx(client, alice):
    save(alice, "t1", turns(3))
    login_client(client, alice)
    body = client.get("/threads/t1/?tab=archived", HTTP_HX_REQUEST="true").content.decode()
    assert body.lstrip().startswith('<div id="tab-panel">') and "<html" not in body


def test_long_threads_load_more_blocks_in_pages(client, alice):
    save(alice, "t1", turns(450))
    login_client(client, alice)
    first = client.get("/threads/t1/?order=oldest").content.decode()
    assert "#200" in first and "#201" not in first and "after=200" in first
    more = client.get("/threads/t1/?tab=active&order=oldest&after=200", HTTP_HX_REQUEST="true").content.decode()
    assert "#201" in more and "#400" in more and "after=400" in more and "<html" not in more


def test_admin_clears_and_owner_deletes_from_the_page(client, alice, admin_user):
    save(alice, "t1", turns(3))
    login_client(client, admin_user)
    page = client.get("/threads/t1/").content.decode()
    assert "Clear</button>" in page
    response = client.post("/threads/t1/clear", HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and response["HX-Redirect"] == "/threads/t1/"
    assert Block.objects.filter(archived=False).count() == 0
    login_client(client, alice)
    page = client.get("/threads/t1/").content.decode()
    assert "Clear</button>" not in page and "Delete</button>" in page
    assert client.post("/threads/t1/delete").status_code == 302
    assert not Thread.objects.exists()


def test_operator_sees_no_destructive_buttons(client, alice, operator):
    save(alice, "t1", turns(2))
    page = login_client(client, operator).get("/threads/t1/").content.decode()
    assert "Clear</button>" not in page and "Delete</button>" not in page


def test_login_page_and_unknown_thread(client, alice):
    assert client.get("/accounts/login/").status_code == 200
    login_client(client, alice)
    assert client.get("/threads/missing/").status_code == 404
    assert client.get("/threads/bad%20id/").status_code == 400
