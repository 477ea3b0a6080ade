"""Full-text message search: page and API, filters in the URL, keyset pages, ownership, query counts."""

from __future__ import annotations

import pytest
from django.db import connection
from django.utils import timezone

from memoryadmin.models import AuditEvent
from sessions_app.models import Block
from memoryadmin.operations.search import MessageQuery, message_search, message_search_queryset, search_backend, snippet

from ..conftest import IS_POSTGRES, login_client
from .helpers import save

pytestmark = pytest.mark.django_db


@pytest.fixture
def corpus(alice, bob):
    save(alice, "kyoto", [
        {"role": "user", "content": "Plan a trip to Kyoto in autumn"},
        {"role": "assistant", "content": "Kyoto in November: the maple leaves at Tofuku-ji"},
        {"role": "user", "content": "And the temples?"},
    ])
    save(alice, "kyoto", [{"role": "system", "content": "Summary: autumn trip to Kyoto, temples"}])  # a compaction
    save(alice, "tools", [{"role": "user", "content": "weather in Osaka"}, {"role": "tool", "content": "Osaka: 18C, rain"}], agent="weather")
    save(bob, "bob-1", [{"role": "user", "content": "Bob's secret Kyoto plans"}])


def hits(actor, **params):
    page = message_search(actor=actor, query=MessageQuery.from_params(params))
    return [(h.block.thread.thread_id, h.block.seq) for h in page.hits]


def test_the_backend_is_the_databases_own(db):
    assert search_backend() == ("postgresql" if IS_POSTGRES else "fts5")


def test_every_word_must_occur_case_insensitively(corpus, alice):
    assert hits(alice, q="kyoto") == [("kyoto", 4), ("kyoto", 2), ("kyoto", 1)]
    assert hits(alice, q="KYOTO maple") == [("kyoto", 2)]
    assert hits(alice, q="kyoto osaka") == []
    assert hits(alice, q="   ") == []


def test_members_search_only_their_own_threads(corpus, alice, bob):
    assert ("bob-1", 1) not in hits(alice, q="kyoto")
    assert hits(bob, q="kyoto") == [("bob-1", 1)]
    assert hits(alice, q="kyoto", owner="bob") == hits(alice, q="kyoto")  # the owner filter is not a way around it


def test_operators_search_everyone_and_that_is_audited(corpus, operator, alice):
    assert ("bob-1", 1) in hits(operator, q="kyoto")
    assert hits(operator, q="kyoto", owner="bob") == [("bob-1", 1)]
    event = AuditEvent.objects.filter(action="thread.search").first()
    assert event.actor_name == "olivia" and "bob-1" in event.detail["threads"]
    before = AuditEvent.objects.count()
    hits(alice, q="kyoto")
    assert AuditEvent.objects.count() == before  # a member's own search is not an audit event


def test_filters_narrow_the_results(corpus, alice):
    assert hits(alice, q="kyoto", role="system") == [("kyoto", 4)]
    assert hits(alice, q="kyoto", archived="false") == [("kyoto", 4)]
    assert hits(alice, q="kyoto", archived="true") == [("kyoto", 2), ("kyoto", 1)]
    assert hits(alice, q="osaka", agent="weather") == [("tools", 2), ("tools", 1)]
    assert hits(alice, q="osaka", agent="bot") == []
    today = timezone.localdate().isoformat()
    assert len(hits(alice, q="kyoto", since=today, until=today)) == 3
    assert hits(alice, q="kyoto", until="2000-01-01") == []
    assert hits(alice, q="kyoto", since=today, until="2000-01-01") == []  # an empty range, not an error
    assert len(hits(alice, q="kyoto", since="0001-01-01", until="9999-12-31")) == 3


def test_new_and_removed_blocks_are_indexed(alice):
    save(alice, "t1", [{"role": "user", "content": "zanzibar"}])
    assert hits(alice, q="zanzibar") == [("t1", 1)]
    Block.objects.filter(thread__thread_id="t1").delete()
    assert hits(alice, q="zanzibar") == []


def test_query_syntax_characters_are_plain_words(corpus, alice):
    for q in ('kyoto"', "kyoto AND", "content:kyoto", "kyoto*", "NEAR(kyoto)", "-kyoto"):
        message_search(actor=alice, query=MessageQuery.from_params({"q": q}))  # never a database error


@pytest.mark.skipif(not IS_POSTGRES, reason="the GIN index exists on PostgreSQL only")
def test_postgres_uses_the_gin_index(corpus, operator):
    # The count, without ordering: the plan shows whether the match expression is the indexed one.
    qs = message_search_queryset(actor=operator, query=MessageQuery(q="kyoto")).order_by().values("pk")
    sql, params = qs.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute("SET enable_seqscan = off")
        cursor.execute("EXPLAIN " + sql, params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
        cursor.execute("SET enable_seqscan = on")
    assert "block_content_tsv_idx" in plan


@pytest.mark.skipif(IS_POSTGRES, reason="FTS5 triggers exist on SQLite only")
def test_sqlite_fts_triggers_survive_every_migration(db):
    with connection.cursor() as cursor:
        cursor.execute("SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'sessions_app_block_fts_%'")
        assert sorted(row[0] for row in cursor.fetchall()) == [
            "sessions_app_block_fts_ad", "sessions_app_block_fts_ai", "sessions_app_block_fts_au"
        ]


def test_a_snippet_is_cut_around_the_first_match():
    before, match, after = snippet("x" * 500 + " Kyoto " + "y" * 500, ["kyoto"])
    assert match == "Kyoto" and before.startswith("…") and after.endswith("…") and len(before) < 130


# --- the page ------------------------------------------------------------------------------------


def test_the_page_links_each_hit_to_its_block(client, corpus, alice):
    login_client(client, alice)
    body = client.get("/search/?q=maple").content.decode()
    assert 'href="/threads/kyoto/?tab=archived#seq-2"' in body
    assert "<mark>maple</mark>" in body


def test_the_page_keeps_every_filter_in_the_url(client, corpus, alice):
    login_client(client, alice)
    response = client.get("/search/?q=kyoto&role=user&archived=true&since=2020-01-01&agent=bot")
    body = response.content.decode()
    assert 'value="kyoto"' in body and 'value="user" selected' in body and 'value="true" selected' in body
    assert 'value="2020-01-01"' in body and 'value="bot" selected' in body
    assert response.context["query"].as_params() == {"q": "kyoto", "role": "user", "archived": "true", "since": "2020-01-01", "agent": "bot"}


def test_the_page_escapes_message_content(client, alice):
    save(alice, "x", [{"role": "user", "content": "<script>alert('kyoto')</script>"}])
    login_client(client, alice)
    body = client.get("/search/?q=kyoto").content.decode()
    assert "<script>alert" not in body and "&lt;script&gt;" in body


def test_the_page_paginates_by_keyset(client, alice):
    save(alice, "long", [{"role": "user", "content": f"needle number {i}"} for i in range(120)])
    login_client(client, alice)
    first = client.get("/search/?q=needle")
    assert len(first.context["page"].hits) == 50
    second = client.get("/search/" + first.context["older_url"])
    third = client.get("/search/" + second.context["older_url"])
    seqs = [h.block.seq for page in (first, second, third) for h in page.context["page"].hits]
    assert seqs == list(range(120, 0, -1)) and not third.context["older_url"]


def test_the_htmx_search_answers_the_results_fragment(client, corpus, alice):
    login_client(client, alice)
    body = client.get("/search/?q=kyoto", HTTP_HX_REQUEST="true", HTTP_HX_TARGET="search-results").content.decode()
    assert body.lstrip().startswith('<div id="search-results">') and "<html" not in body


def test_bad_filters_are_a_400(client, alice):
    login_client(client, alice)
    for params in ("q=a&role=robot", "q=a&archived=maybe", "q=a&since=soon", "q=" + "x" * 201, "q=a&before=-1", "q=a%00b"):
        assert client.get(f"/search/?{params}").status_code == 400


@pytest.mark.parametrize("rows", [5, 50])
def test_the_page_takes_the_same_queries_at_any_size(client, alice, bob, operator, rows, django_assert_num_queries):
    save(alice, "a", [{"role": "user", "content": f"needle {i}"} for i in range(rows)])
    save(bob, "b", [{"role": "user", "content": f"needle {i}"} for i in range(rows)])
    login_client(client, alice)
    # session, user, role, hits, agent codes
    with django_assert_num_queries(5):
        assert client.get("/search/?q=needle").status_code == 200
    login_client(client, operator)
    # ... and one INSERT: the audit event of an operator's search
    with django_assert_num_queries(6):
        assert client.get("/search/?q=needle").status_code == 200


# --- the API -------------------------------------------------------------------------------------


def test_the_api_searches_with_the_same_rules(corpus, alice_api, operator_api):
    body = alice_api.get("/api/v1/search/messages", {"q": "kyoto"}).json()
    assert [(r["thread_id"], r["seq"]) for r in body["results"]] == [("kyoto", 4), ("kyoto", 2), ("kyoto", 1)]
    assert body["results"][1]["url"] == "/threads/kyoto/?tab=archived#seq-2" and body["next"] is None
    assert set(body["results"][0]) == {
        "thread_id", "owner", "agent_code", "seq", "role", "archived", "created_at", "content", "snippet", "url"
    }
    body = operator_api.get("/api/v1/search/messages", {"q": "kyoto", "owner": "bob"}).json()
    assert [r["thread_id"] for r in body["results"]] == ["bob-1"]
    body = alice_api.get("/api/v1/search/messages", {"q": "osaka", "agent_code": "weather", "role": "tool"}).json()
    assert [r["content"] for r in body["results"]] == ["Osaka: 18C, rain"]


def test_the_api_pages_with_a_next_link(alice, alice_api):
    save(alice, "long", [{"role": "user", "content": f"needle {i}"} for i in range(7)])
    first = alice_api.get("/api/v1/search/messages", {"q": "needle", "limit": 5}).json()
    assert len(first["results"]) == 5 and "before=" in first["next"] and "limit=5" in first["next"]
    second = alice_api.get(first["next"]).json()
    assert [r["seq"] for r in second["results"]] == [2, 1] and second["next"] is None


def test_the_api_refuses_bad_input_and_anonymous_callers(alice_api, anon_api):
    assert anon_api.get("/api/v1/search/messages", {"q": "x"}).status_code == 401
    assert alice_api.get("/api/v1/search/messages").json()["errors"] == {"q": ["is required."]}
    assert alice_api.get("/api/v1/search/messages", {"q": "  "}).json() == {"results": [], "next": None}
    response = alice_api.get("/api/v1/search/messages", {"q": "x", "limit": 0})
    assert response.status_code == 400 and "limit" in response.json()["errors"]
    assert alice_api.get("/api/v1/search/messages", {"q": "x", "role": "robot"}).json()["errors"] == {
        "role": ["must be one of user, assistant, system, tool."]
    }


@pytest.mark.parametrize(
    "params, field",
    [
        ({"owner": "b" * 151}, "owner"),  # cut to 150, it would match another user's name
        ({"agent_code": "a" * 65}, "agent_code"),
        ({"role": " user"}, "role"),
        ({"archived": "TRUE"}, "archived"),
        ({"since": "20240131"}, "since"),
        ({"until": "2024-W05-3"}, "until"),
    ],
)
def test_the_api_takes_filters_exactly_as_its_schema_says(alice_api, params, field):
    response = alice_api.get("/api/v1/search/messages", {"q": "x", **params})
    assert response.status_code == 400 and field in response.json()["errors"]


def test_empty_filters_are_absent_ones(corpus, alice_api):
    # As the page's form sends them: a blank role, archived, since or until filters nothing.
    everything = alice_api.get("/api/v1/search/messages", {"q": "kyoto"}).json()
    blank = alice_api.get("/api/v1/search/messages", {"q": "kyoto", "role": "", "archived": "", "since": "", "until": ""})
    assert blank.status_code == 200 and blank.json() == everything


@pytest.mark.parametrize("rows", [5, 50])
def test_the_api_takes_the_same_queries_at_any_size(alice, alice_api, rows, django_assert_num_queries):
    save(alice, "a", [{"role": "user", "content": f"needle {i}"} for i in range(rows)])
    alice_api.get("/api/v1/search/messages", {"q": "needle"})
    # key with its owner's role, hits
    with django_assert_num_queries(2):
        assert alice_api.get("/api/v1/search/messages", {"q": "needle"}).status_code == 200


def test_a_bad_search_parameter_keeps_the_page_and_the_form(client, alice):
    login_client(client, alice)
    response = client.get("/search/", {"q": "kyoto trains", "since": "31/01/2026"})
    body = response.content.decode()
    assert response.status_code == 400
    assert '<form class="filters"' in body and 'value="kyoto trains"' in body  # what was typed is kept
    assert 'role="alert" data-field="since"' in body
