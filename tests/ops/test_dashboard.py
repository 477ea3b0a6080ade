"""The home dashboard: counts scoped to the viewer, activity chart, recent audit events, constant queries."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from memoryadmin.audit import audit_record
from memoryadmin.operations.dashboard import dashboard_for
from sessions_app.models import Block

from ..conftest import login_client
from .helpers import checkpoints, compacted, save, store_item, turns

pytestmark = pytest.mark.django_db


@pytest.fixture
def activity(alice, bob):
    save(alice, "a1", turns(4))
    save(alice, "a1", turns(6))  # an append: a second save
    compacted(alice, "a2", 4)  # two saves, one rewrite
    checkpoints(alice, "a1", 3, writes=0)
    store_item(alice, ["users", "alice"], "k")
    save(bob, "b1", turns(2))
    store_item(bob, ["users", "bob"], "k")


def stats(body: str, name: str) -> str:
    start = body.index(f'data-stat="{name}">') + len(f'data-stat="{name}">')
    if body.startswith("<a ", start):  # a figure that links to the threads it counts
        start = body.index(">", start) + 1
    return body[start : body.index("<", start)]


def test_members_see_their_own_counts(client, activity, alice):
    body = login_client(client, alice).get("/").content.decode()
    assert [stats(body, n) for n in ("threads", "active_blocks", "archived_blocks", "checkpoints", "store_items")] == [
        "2", "7", "4", "3", "1"
    ]
    assert 'href="/threads/b1/"' not in body and "Recent audit events" not in body


def test_operators_see_everyones_counts_but_no_audit(client, activity, operator):
    body = login_client(client, operator).get("/").content.decode()
    assert stats(body, "threads") == "3" and stats(body, "store_items") == "2"
    assert 'href="/threads/b1/"' in body and "Recent audit events" not in body


def test_admins_see_recent_audit_events(client, activity, admin_user, alice):
    audit_record(actor=alice, action="thread.delete", target="thread:gone")
    body = login_client(client, admin_user).get("/").content.decode()
    assert "Recent audit events" in body and "thread:gone" in body


def test_interrupted_and_failed_langgraph_threads_are_counted_and_linked(client, alice, bob, operator):
    from sessions_app.checkpoints.services import checkpoint_input, checkpoint_put, checkpoint_put_writes, write_input

    def stopped(user, thread_id, *, next_node="", error=False):
        data = checkpoint_input(checkpoint={"id": "c1"}, next_node_id=next_node)
        checkpoint_put(actor=user, thread_id=thread_id, data=data, checkpoint_id="c1")
        if error:
            checkpoint_put_writes(
                actor=user, thread_id=thread_id, checkpoint_id="c1", checkpoint_ns="",
                data=write_input(task_id="t", writes=[{"channel": "__error__", "value": "boom"}]),
            )

    stopped(alice, "waits-1", next_node="tools")
    stopped(alice, "waits-2", next_node="review")
    stopped(alice, "fails", error=True)
    stopped(alice, "done")
    stopped(bob, "bob-waits", next_node="tools")
    body = login_client(client, alice).get("/").content.decode()
    assert (stats(body, "interrupted"), stats(body, "failed"), stats(body, "threads")) == ("2", "1", "4")
    assert 'href="/threads/?status=interrupted"' in body and 'href="/threads/?status=error"' in body
    body = login_client(client, operator).get("/").content.decode()
    assert (stats(body, "interrupted"), stats(body, "failed")) == ("3", "1")


def test_saves_and_rewrites_are_counted_per_day(activity, alice, bob):
    dash = dashboard_for(actor=alice)
    today = dash.activity.days[-1]
    assert len(dash.activity.days) == 14 and today.day == timezone.localdate()
    # 4 + 2 messages to a1, 4 + 1 to a2 (its compaction is the one rewrite)
    assert (today.saves, today.rewrites) == (11, 1)
    # Older activity lands on its own day; activity before the window is left out.
    Block.objects.filter(thread__thread_id="a2", archived=True).update(
        created_at=timezone.now() - timedelta(days=3), archived_at=timezone.now() - timedelta(days=3)
    )
    Block.objects.filter(thread__thread_id="a1").update(created_at=timezone.now() - timedelta(days=30))
    dash = dashboard_for(actor=alice)
    by_day = {d.day: (d.saves, d.rewrites) for d in dash.activity.days}
    assert by_day[timezone.localdate() - timedelta(days=3)] == (4, 1)
    assert by_day[timezone.localdate()] == (1, 0)
    assert sum(d.saves for d in dash.activity.days) == 5  # a1's messages are 30 days old
    assert dashboard_for(actor=bob).activity.total_rewrites == 0


def test_the_chart_is_server_side_svg(client, activity, alice):
    body = login_client(client, alice).get("/").content.decode()
    assert body.count('<rect class="bar-saves"') == 14 and body.count('<rect class="bar-rewrites"') == 14
    assert "<script>" not in body.split("</head>")[1] and 'style="' not in body
    dash = dashboard_for(actor=alice)
    tallest = max(day.save_bar.height for day in dash.activity.days)
    assert 0 < tallest <= dash.activity.height


def test_home_is_the_dashboard_not_a_redirect(client, alice):
    response = login_client(client, alice).get("/")
    assert response.status_code == 200 and "Overview" in response.content.decode()
    assert client.get("/", follow=False).status_code == 200


@pytest.mark.parametrize("rows", [5, 50])
@pytest.mark.parametrize("who,queries", [("alice", 9), ("operator", 10), ("admin_user", 11)])
def test_the_dashboard_takes_the_same_queries_at_any_size(client, alice, bob, rows, who, queries, request, django_assert_num_queries):
    for i in range(rows):
        save(alice, f"a{i}", turns(2))
        store_item(alice, ["users", "alice", f"n{i}"], "k")
        audit_record(actor=alice, action="thread.read", target=f"thread:a{i}")
    login_client(client, request.getfixturevalue(who))
    # session, user, role, totals, saves/day, rewrites/day, checkpoints, store items, recent threads
    # (+ for operators and admins, the audit statement of reading alice's recent threads;
    # + the audit events for admins)
    with django_assert_num_queries(queries):
        assert client.get("/").status_code == 200
