"""The thread list's triage: one thread search behind the API and the page, its filters and
sorts on SQLite and PostgreSQL, the total and the page past the end, inline errors, saved
views, metadata shown escaped, constant query counts."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone as dt_timezone

import pytest
from django.utils import timezone

from memoryadmin import policy
from memoryadmin.errors import Forbidden, InvalidInput
from memoryadmin.models import AuditEvent
from sessions_app.checkpoints import savedviews, search, services as svc
from sessions_app.checkpoints.lifecycle import thread_create
from sessions_app.checkpoints.models import SavedThreadView
from sessions_app.models import Thread
from sessions_app.templatetags.memory import elapsed, spaced_count
from sessions_app.threads.selectors import AGENT_CODES_MAX, thread_agent_codes
from sessions_app.threads.services import thread_save_agent_state

from ..conftest import login_client
from .helpers import turns

pytestmark = pytest.mark.django_db

HOSTILE = '<script>alert("meta")</script>'


def make(user, thread_id, *, agent="support", metadata=None, messages=2, title="", created=None, updated=None):
    thread_create(actor=user, thread_id=thread_id, metadata=metadata or {})
    context = [{"role": "user", "content": title or f"about {thread_id}"}, *turns(messages - 1)]
    thread_save_agent_state(actor=user, thread_id=thread_id, agent_code=agent, context=context)
    moments = {}
    if created:
        moments["created_at"] = created
    if updated:
        moments["updated_at"] = updated
    if moments:
        Thread.objects.filter(thread_id=thread_id).update(**moments)


def checkpoint(user, thread_id, *, next_node="", error=False):
    put = svc.checkpoint_put(
        actor=user, thread_id=thread_id,
        data=svc.checkpoint_input(checkpoint={"channel_values": {"v": 1}}, next_node_id=next_node or None),
    )
    if error:
        svc.checkpoint_put_writes(
            actor=user, thread_id=thread_id, checkpoint_id=put.checkpoint_id,
            data=svc.write_input(task_id="task-1", writes=[{"channel": "__error__", "value": "boom"}]),
        )


def day(text: str) -> datetime:
    return timezone.make_aware(datetime.fromisoformat(text))


@pytest.fixture
def estate(alice, bob):
    """alice: a failing support thread, an interrupted sales one, an idle support one; bob: one of his own."""
    make(alice, "a-err", metadata={"env": "prod", "team": "core", "vip": True}, messages=6, title="Refund stuck",
         created=day("2026-01-05T10:00"), updated=day("2026-03-01T10:00"))
    checkpoint(alice, "a-err", error=True)
    make(alice, "a-int", agent="sales", metadata={"env": "staging", "priority": 2}, messages=2, title="Approve discount",
         created=day("2026-02-10T10:00"), updated=day("2026-02-20T10:00"))
    checkpoint(alice, "a-int", next_node="review")
    make(alice, "a-idle", metadata={"env": "prod"}, messages=4, title="billing question",
         created=day("2026-03-15T10:00"), updated=day("2026-03-16T10:00"))
    checkpoint(alice, "a-idle")
    make(bob, "b-prod", metadata={"env": "prod", "team": "core"}, messages=3, title="Zebra",
         created=day("2026-01-20T10:00"), updated=day("2026-04-01T10:00"))
    Thread.objects.filter(thread_id__in=["a-err", "a-int", "a-idle"]).update(updated_at=timezone.now())  # checkpoints moved them
    Thread.objects.filter(thread_id="a-err").update(updated_at=day("2026-03-01T10:00"))
    Thread.objects.filter(thread_id="a-int").update(updated_at=day("2026-02-20T10:00"))
    Thread.objects.filter(thread_id="a-idle").update(updated_at=day("2026-03-16T10:00"))


def found(actor, **filters) -> list[str]:
    qs = search.thread_search_queryset(actor=actor, filters=search.ThreadFilter(**filters), sort="thread_id", order="asc")
    return list(qs.values_list("thread_id", flat=True))


# --- the selector: each filter, each sort -----------------------------------------------------------


@pytest.mark.parametrize(
    "filters, expected",
    [
        ({}, ["a-err", "a-idle", "a-int", "b-prod"]),
        ({"status": "error"}, ["a-err"]),
        ({"status": "interrupted"}, ["a-int"]),
        ({"status": "idle"}, ["a-idle", "b-prod"]),
        ({"status": "busy"}, []),
        ({"agent_code": "sales"}, ["a-int"]),
        ({"owner": "bob"}, ["b-prod"]),
        ({"q": "REFUND"}, ["a-err"]),
        ({"q": "b-pr"}, ["b-prod"]),
        ({"created_from": datetime(2026, 2, 10).date()}, ["a-idle", "a-int"]),
        ({"created_to": datetime(2026, 1, 20).date()}, ["a-err", "b-prod"]),
        ({"created_from": datetime(2026, 1, 6).date(), "created_to": datetime(2026, 2, 10).date()}, ["a-int", "b-prod"]),
        ({"updated_from": datetime(2026, 3, 1).date(), "updated_to": datetime(2026, 3, 16).date()}, ["a-err", "a-idle"]),
        ({"metadata": {"env": "prod"}}, ["a-err", "a-idle", "b-prod"]),
        ({"metadata": {"env": "prod", "team": "core"}}, ["a-err", "b-prod"]),
        ({"metadata": {"priority": 2}}, ["a-int"]),
        ({"metadata": {"vip": True}}, ["a-err"]),
        ({"metadata": {"vip": 1}}, []),  # a number never matches a boolean, on SQLite either
        ({"metadata": {"priority": "2"}}, []),  # nor a string a number
        ({"metadata": {"env": "prod"}, "status": "idle", "owner": "adam"}, []),
        ({"status": "idle", "agent_code": "support", "metadata": {"env": "prod"}}, ["a-idle", "b-prod"]),
    ],
)
def test_each_filter_keeps_what_it_says(estate, admin_user, filters, expected):
    assert found(admin_user, **filters) == expected


@pytest.mark.parametrize(
    "sort, expected",
    [
        ("updated", ["b-prod", "a-idle", "a-err", "a-int"]),
        ("created", ["a-idle", "a-int", "b-prod", "a-err"]),
        ("messages", ["a-err", "a-idle", "b-prod", "a-int"]),
        ("title", ["b-prod", "a-err", "a-idle", "a-int"]),
    ],
)
def test_each_sort_both_ways(estate, admin_user, sort, expected):
    for order, rows in (("desc", expected), ("asc", expected[::-1])):
        query = search.thread_list_query_parse({"sort": sort, "order": order})
        assert list(search.thread_list_queryset(actor=admin_user, query=query).values_list("thread_id", flat=True)) == rows


def test_a_member_sees_only_their_threads_whatever_the_owner_filter(estate, alice, bob):
    assert found(alice) == ["a-err", "a-idle", "a-int"]
    assert found(alice, owner="bob") == ["a-err", "a-idle", "a-int"]
    assert found(bob, owner="alice", metadata={"env": "prod"}) == ["b-prod"]


def test_the_page_and_the_api_search_find_the_same_threads(estate, client, admin_user, admin_api):
    login_client(client, admin_user)
    page = client.get("/threads/?status=idle&meta=env=prod&agent=support&sort=created&order=asc")
    api = admin_api.post(
        "/api/v1/threads/search",
        {"status": "idle", "metadata": {"env": "prod"}, "agent_code": "support", "sort_by": "created_at", "sort_order": "asc"},
        format="json",
    ).json()
    assert [t.thread_id for t in page.context["threads"]] == [t["thread_id"] for t in api] == ["b-prod", "a-idle"]
    count = admin_api.post("/api/v1/threads/count", {"status": "idle", "metadata": {"env": "prod"}}, format="json").json()
    assert count == page.context["total"] == 2
    listed = admin_api.get("/api/v1/threads", {"created_from": "2026-02-01", "q": "a-"}).json()["results"]
    assert {t["thread_id"] for t in listed} == {"a-int", "a-idle"}


@pytest.mark.parametrize(
    "body, field",
    [
        ({"created_from": "2026-13-01"}, "created_from"),
        ({"updated_from": "2026-03-02", "updated_to": "2026-03-01"}, "updated_to"),
        ({"q": 5}, "q"),
        ({"sort_by": "colour"}, "sort_by"),
        ({"status": "sleeping"}, "status"),
        ({"status": ""}, "status"),
        ({"created_to": ""}, "created_to"),
        ({"updated_from": " 2026-01-01"}, "updated_from"),
    ],
)
def test_the_api_search_names_a_bad_filter(estate, alice_api, body, field):
    response = alice_api.post("/api/v1/threads/search", body, format="json")
    assert response.status_code == 400 and field in response.json()["errors"]


def test_metadata_pairs_read_json_scalars_and_text():
    assert search.metadata_pairs_parse(["env=prod", "n=2", "vip=true", 'code="42"', "x=[1]", "", "v=a=b"]) == {
        "env": "prod", "n": 2, "vip": True, "code": "42", "x": "[1]", "v": "a=b",
    }
    for bad in (["novalue"], ["=x"], ["k=1", "k=2"]):
        with pytest.raises(InvalidInput) as refused:
            search.metadata_pairs_parse(bad)
        assert "meta" in refused.value.fields


# --- the page ---------------------------------------------------------------------------------------


def test_the_page_filters_by_every_field_and_keeps_it_in_the_form(estate, client, operator):
    login_client(client, operator)
    url = "/threads/?q=a-&status=error&agent=support&owner=alice&created_from=2026-01-01&created_to=2026-01-31&meta=env%3Dprod&meta=vip%3Dtrue"
    response = client.get(url)
    body = response.content.decode()
    assert response.status_code == 200
    assert [t.thread_id for t in response.context["threads"]] == ["a-err"]
    assert "1 thread match this filter" in body
    assert 'value="env=prod"' in body and 'value="vip=true"' in body and 'value="2026-01-31"' in body
    assert '<option value="error" selected>' in body
    # The bulk form carries the whole filter, so "everything matching" is what the table shows.
    assert '<input type="hidden" name="status" value="error">' in body
    assert '<input type="hidden" name="meta" value="vip=true">' in body


@pytest.mark.parametrize(
    "query, field",
    [
        ("status=sleeping", "status"),
        ("created_from=2026-13-01", "created_from"),
        ("updated_from=2026-03-02&updated_to=2026-03-01", "updated_to"),
        ("meta=novalue", "meta"),
        ("meta=k%3D1&meta=k%3D2", "meta"),
        ("sort=colour", "sort"),
        ("order=sideways", "order"),
        ("page=0", "page"),
    ],
)
def test_a_bad_filter_is_an_inline_error_that_keeps_the_form(estate, client, alice, query, field):
    login_client(client, alice)
    response = client.get(f"/threads/?{query}&agent=support")
    body = response.content.decode()
    assert response.status_code == 400
    assert 'data-filter-error' in body and f"<code>{field}</code>" in body
    assert 'data-filter-form' in body and '<option value="support" selected>' in body
    fragment = client.get(f"/threads/?{query}", HTTP_HX_REQUEST="true", HTTP_HX_TARGET="thread-table")
    # htmx swaps only a 2xx: the fragment answers 200 with the message in place of the table.
    assert fragment.status_code == 200 and "data-filter-error" in fragment.content.decode()
    assert "<html" not in fragment.content.decode()


def test_every_bad_filter_is_named_at_once(estate, client, alice, alice_api):
    login_client(client, alice)
    response = client.get("/threads/?status=sleeping&created_from=2026-13-01&sort=colour&meta=novalue&agent=support")
    body = response.content.decode()
    assert response.status_code == 400
    for field in ("status", "created_from", "sort", "meta"):
        assert f"<code>{field}</code>" in body, field
    api = alice_api.post("/api/v1/threads/search", {"status": "sleeping", "q": 5, "created_from": "2026-13-01"}, format="json")
    assert api.status_code == 400 and {"status", "q", "created_from"} <= set(api.json()["errors"])


def test_a_column_header_sorts_by_it_keeping_the_filter(estate, client, alice):
    login_client(client, alice)
    response = client.get("/threads/?agent=support")
    headers = response.context["sort_headers"]
    assert headers["updated"]["aria_sort"] == "descending" and headers["title"]["aria_sort"] == "none"
    # Sorted by update already: its header turns the order round; the title starts A to Z.
    assert headers["updated"]["href"] == "/threads/?agent=support&order=asc"
    assert headers["title"]["href"] == "/threads/?agent=support&sort=title&order=asc"
    assert headers["messages"]["href"] == "/threads/?agent=support&sort=messages"
    body = response.content.decode()
    assert '<th aria-sort="descending"><a class="sort" href="/threads/?agent=support&amp;order=asc">Updated</a></th>' in body
    by_title = client.get(headers["title"]["href"])
    titles = [thread.title for thread in by_title.context["threads"]]
    assert titles == sorted(titles, key=str.lower) and by_title.context["sort_headers"]["title"]["aria_sort"] == "ascending"
    assert by_title.context["sort_headers"]["title"]["href"] == "/threads/?agent=support&sort=title"


def test_the_total_and_a_page_past_the_end(client, alice):
    for i in range(53):
        make(alice, f"t{i:02d}", messages=1)
    login_client(client, alice)
    first = client.get("/threads/")
    assert "53 threads" in first.content.decode() and "Page 1 of 2" in first.content.decode()
    second = client.get("/threads/?page=2")
    assert len(second.context["threads"]) == 3 and not second.context["has_next"]
    beyond = client.get("/threads/?page=1000&agent=support")
    body = beyond.content.decode()
    assert beyond.status_code == 200 and "No threads yet" not in body
    assert "Page 1000 is past the end: 53 threads fill 2 pages." in body
    assert 'href="?agent=support&amp;page=2"' in body
    assert spaced_count(2035) == "2\u202f035" and spaced_count(7) == "7"


def test_no_threads_yet_only_when_there_are_none(client, alice, bob):
    login_client(client, alice)
    assert "No threads yet" in client.get("/threads/").content.decode()
    make(alice, "a1")
    assert "No threads match this filter" in client.get("/threads/?status=error").content.decode()


def test_an_htmx_filter_pushes_the_clean_address(estate, client, alice):
    login_client(client, alice)
    response = client.get(
        "/threads/?q=&status=error&agent=&created_from=&meta=&meta=env%3Dprod&sort=updated&order=desc",
        HTTP_HX_REQUEST="true", HTTP_HX_TARGET="thread-table",
    )
    assert response["HX-Push-Url"] == "/threads/?status=error&meta=env%3Dprod"


def test_hostile_metadata_stays_text_in_the_list_and_on_the_thread_page(client, alice):
    make(alice, "evil", metadata={HOSTILE: HOSTILE, "ok": {"nested": HOSTILE}})
    login_client(client, alice)
    for url in ("/threads/", "/threads/evil/"):
        body = client.get(url).content.decode()
        assert "<script>alert" not in body
        assert "&lt;script&gt;alert(&quot;meta&quot;)&lt;/script&gt;" in body or "&lt;script&gt;alert(&quot;meta&quot;" in body
    assert "data-thread-metadata" in client.get("/threads/evil/").content.decode()


@pytest.mark.parametrize("count", [3, 30])
def test_the_filtered_page_and_the_api_search_take_constant_queries(client, alice, alice_api, count, django_assert_num_queries):
    for i in range(count):
        make(alice, f"t{i}", metadata={"env": "prod", "i": i})
        checkpoint(alice, f"t{i}", error=i % 2 == 0)
    login_client(client, alice)
    # session, user, role, agent codes, saved views, the total, the page of threads
    with django_assert_num_queries(7):
        assert client.get("/threads/?status=error&meta=env%3Dprod&sort=messages&created_from=2020-01-01").status_code == 200
    # the key, its owner's role, the page of threads, their latest checkpoints with their writes (two)
    with django_assert_num_queries(5):
        response = alice_api.post("/api/v1/threads/search", {"status": "error", "metadata": {"env": "prod"}, "limit": 100}, format="json")
    assert len(response.json()) == (count + 1) // 2


def test_bulk_everything_matching_follows_the_whole_filter(estate, client, admin_user):
    login_client(client, admin_user)
    response = client.post("/bulk/preview", {"all": "1", "action": "export", "status": "idle", "meta": "env=prod", "agent": "support"})
    assert response.status_code == 200
    assert response.context["impact"].threads == 2
    assert {t.thread_id for t in response.context["sample"]} == {"a-idle", "b-prod"}
    assert ("meta", "env=prod") in response.context["fields"]


# --- saved views ------------------------------------------------------------------------------------


def test_saved_views_are_saved_listed_applied_and_deleted_by_their_owner(estate, client, alice, bob):
    login_client(client, alice)
    response = client.post("/thread-views/", {"name": "Failing prod", "query": "status=error&meta=env%3Dprod&q=&sort=updated"})
    assert response.status_code == 302 and response["Location"] == "/threads/?status=error&meta=env%3Dprod"
    view = SavedThreadView.objects.get(owner=alice)
    assert view.query == "status=error&meta=env%3Dprod"
    page = client.get(response["Location"]).content.decode()
    assert 'href="/threads/?status=error&amp;meta=env%3Dprod" aria-current="true">Failing prod</a>' in page
    # The same name again replaces the filter.
    client.post("/thread-views/", {"name": "Failing prod", "query": "status=interrupted"})
    assert SavedThreadView.objects.get(owner=alice).query == "status=interrupted"
    events = AuditEvent.objects.filter(action="view.save", actor=alice)
    assert events.count() == 2 and events.order_by("-id").first().detail["before"] == "status=error&meta=env%3Dprod"

    login_client(client, bob)
    assert ">Failing prod</a>" not in client.get("/threads/").content.decode()
    refused = client.post(f"/thread-views/{view.pk}/delete")
    assert refused.status_code == 403 and SavedThreadView.objects.filter(pk=view.pk).exists()

    login_client(client, alice)
    assert client.post(f"/thread-views/{view.pk}/delete").status_code == 302
    assert not SavedThreadView.objects.exists()
    assert AuditEvent.objects.filter(action="view.delete", actor=alice).count() == 1
    assert client.post(f"/thread-views/{view.pk}/delete").status_code == 404


def test_an_operator_keeps_saved_views_an_admin_sees_no_one_elses(estate, operator, admin_user, alice):
    savedviews.saved_view_save(actor=operator, name="errors", query="status=error")
    savedviews.saved_view_save(actor=alice, name="mine", query="")
    from sessions_app.checkpoints.selectors import saved_views

    assert [v.name for v in saved_views(actor=operator)] == ["errors"]
    assert list(saved_views(actor=admin_user)) == []
    with pytest.raises(Forbidden):
        savedviews.saved_view_delete(actor=admin_user, view_id=SavedThreadView.objects.get(name="mine").pk)


@pytest.mark.parametrize(
    "name, query, field",
    [("", "status=error", "name"), ("x" * 81, "", "name"), ("ok", "status=sleeping", "status"), ("ok", "x" * 2001, "query"),
     ("bad\x00", "", "name")],
)
def test_a_bad_saved_view_is_refused_naming_the_field(alice, name, query, field):
    with pytest.raises(InvalidInput) as refused:
        savedviews.saved_view_save(actor=alice, name=name, query=query)
    assert field in refused.value.fields and not SavedThreadView.objects.exists()


def test_a_refused_save_from_the_page_says_why_and_keeps_the_filter(client, alice):
    login_client(client, alice)
    response = client.post("/thread-views/", {"name": "", "query": "status=error"}, follow=True)
    body = response.content.decode()
    assert response.status_code == 200 and "The view was not saved" in body
    assert response.redirect_chain[-1][0] == "/threads/?status=error"


def test_dates_are_whole_days_in_the_current_time_zone(alice):
    make(alice, "late", created=datetime(2026, 5, 1, 23, 30, tzinfo=dt_timezone.utc))
    may_1, may_2 = datetime(2026, 5, 1).date(), datetime(2026, 5, 2).date()
    with timezone.override("Asia/Tokyo"):  # 08:30 on 2 May there
        assert found(alice, created_from=may_2, created_to=may_2) == ["late"]
        assert found(alice, created_to=may_1) == []
    with timezone.override("UTC"):
        assert found(alice, created_from=may_1, created_to=may_1) == ["late"]
        assert found(alice, created_from=may_2) == []


def test_the_first_and_last_days_of_the_calendar_bound_nothing(estate, alice, alice_api):
    first, last = datetime(1, 1, 1).date(), datetime(9999, 12, 31).date()
    assert found(alice, created_from=first, created_to=last, updated_to=last) == ["a-err", "a-idle", "a-int"]
    assert found(alice, created_from=last) == [] and found(alice, updated_to=first) == []
    response = alice_api.post("/api/v1/threads/search", {"created_from": "0001-01-01", "updated_to": "9999-12-31"}, format="json")
    assert response.status_code == 200 and len(response.json()) == 3


def test_times_read_as_how_long_ago_with_the_exact_moment_on_hover(client, alice):
    assert elapsed(0) == elapsed(59) == "0\xa0minutes"
    assert elapsed(60) == "1\xa0minute" and elapsed(61 * 60) == "1\xa0hour, 1\xa0minute"
    assert elapsed(3 * 3600 + 5 * 60 + 59) == "3\xa0hours, 5\xa0minutes"
    assert elapsed(2 * 86400 + 60) == "2\xa0days"  # the next unit only, when it is not zero
    assert elapsed(10 * 86400) == "1\xa0week, 3\xa0days" and elapsed(45 * 86400) == "1\xa0month, 2\xa0weeks"
    assert elapsed(400 * 86400) == "1\xa0year, 1\xa0month" and elapsed(-5) == "0\xa0minutes"
    login_client(client, alice)
    now = timezone.now()
    make(alice, "recent", created=now - timedelta(days=2, hours=3), updated=now - timedelta(seconds=5))
    body = client.get("/threads/").content.decode()
    assert "2\xa0days, 3\xa0hours ago" in body and "just now" in body
    moment = Thread.objects.get(thread_id="recent").created_at
    assert f'<time datetime="{moment.isoformat()}" title="{timezone.localtime(moment):%Y-%m-%d %H:%M:%S %Z}">' in body


def test_the_agent_filter_lists_each_code_once_in_order_in_one_query(alice, bob, operator, admin_user, django_assert_num_queries):
    codes = [f"agent-{i:03d}" for i in range(AGENT_CODES_MAX + 5)] + ["Zeta", "ärger", "b"]
    Thread.objects.bulk_create(
        [Thread(thread_id=f"t{i}-{n}", owner=alice if i % 2 else bob, agent_code=code)
         for i, code in enumerate(codes) for n in range(2)]
        + [Thread(thread_id="no-agent", owner=alice, agent_code="")]
    )
    every = list(Thread.objects.exclude(agent_code="").order_by("agent_code").values_list("agent_code", flat=True).distinct())
    for reader in (operator, admin_user):
        policy.may_read_all(reader)  # the role, read once per user
        with django_assert_num_queries(1):
            listed = thread_agent_codes(actor=reader)
        assert listed == every[:AGENT_CODES_MAX]  # the database's order, each code once, the first 200
    own = list(Thread.objects.filter(owner=alice).exclude(agent_code="").order_by("agent_code")
               .values_list("agent_code", flat=True).distinct()[:AGENT_CODES_MAX])
    assert thread_agent_codes(actor=alice) == own and "agent-000" not in own  # a member: their own threads' codes
