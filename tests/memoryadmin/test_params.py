"""Request parameters: one parser per kind (memoryadmin/params.py), and every page and endpoint
answers a bad or huge parameter with a 400 naming it, never a 500."""

from __future__ import annotations

from datetime import date

import pytest

from memoryadmin import params
from memoryadmin.errors import InvalidInput
from sessions_app.threads.services import thread_save_agent_state
from tests.conftest import api_client_for

HUGE = "9" * 25  # beyond any bigint


def refused(parse, value, **kwargs) -> dict:
    with pytest.raises(InvalidInput) as caught:
        parse(value, **kwargs)
    return caught.value.fields


@pytest.mark.parametrize(
    "value, expected",
    [(None, 7), ("", 7), ("  ", 7), ("12", 12), (" 12 ", 12), ("+3", 3), (0, 0), (12, 12)],
)
def test_an_integer_is_a_json_integer_or_its_text(value, expected):
    assert params.parse_int(value, name="n", default=7, minimum=0, maximum=100) == expected


@pytest.mark.parametrize("value", ["abc", "1.5", "1e3", 1.5, True, False, [], {}, "-1", "101", HUGE, 10**30])
def test_anything_else_is_refused_naming_the_parameter(value):
    assert list(refused(params.parse_int, value, name="n", minimum=0, maximum=100)) == ["n"]


def test_pages_offsets_and_cursors_have_a_ceiling_below_the_databases_bigint():
    assert params.parse_page(None) == 1 and params.parse_page("3") == 3
    assert refused(params.parse_page, "0") == {"page": [f"must be an integer from 1 to {params.PAGE_MAX}."]}
    assert "page" in refused(params.parse_page, HUGE)
    assert params.parse_offset(None) == 0 and "offset" in refused(params.parse_offset, HUGE)
    assert params.parse_cursor("", name="before") is None and params.parse_cursor("0", name="after") == 0
    assert params.CURSOR_MAX < 2**63 - 1 and "before" in refused(params.parse_cursor, HUGE, name="before")


def test_booleans_choices_dates_numbers_and_json_objects():
    assert params.parse_bool(None, name="b", default=True) is True
    assert [params.parse_bool(v, name="b", default=False) for v in ("1", "TRUE", "yes", "on", True)] == [True] * 5
    assert [params.parse_bool(v, name="b", default=True) for v in ("0", "False", "no", "off", False)] == [False] * 5
    assert "b" in refused(params.parse_bool, "maybe", name="b", default=False)
    assert params.parse_choice(None, "c", ("x", "y"), "y") == "y"
    assert refused(params.parse_choice, "z", field_name="c", choices=("y", "x"), default="y") == {"c": ["must be one of y, x."]}
    assert params.parse_date(" 2024-01-31 ", name="since") == date(2024, 1, 31)
    for junk in ("20240131", "2024-W05", "2024-02-30", "soon"):
        assert "since" in refused(params.parse_date, junk, name="since")
    assert params.parse_number("0.5", name="m", minimum=0, maximum=1) == 0.5
    for junk in ("nan", "inf", "1.5", "x", True):
        assert "m" in refused(params.parse_number, junk, name="m", minimum=0, maximum=1)
    assert params.parse_json_object('{"a": 1}', "metadata") == {"a": 1}
    assert "metadata" in refused(params.parse_json_object, "[1]", field_name="metadata")


@pytest.fixture
def estate(db, alice):
    thread_save_agent_state(actor=alice, thread_id="t1", agent_code="bot", context=[{"role": "user", "content": "hi"}])
    return alice


@pytest.mark.parametrize(
    "url, name",
    [
        (f"/threads/?page={HUGE}", "page"),
        ("/threads/?page=abc", "page"),
        ("/threads/?page=0", "page"),
        (f"/threads/t1/?after={HUGE}", "after"),
        ("/threads/t1/?after=-1", "after"),
        ("/threads/t1/?tab=nope", "tab"),
        (f"/graphs/?page={HUGE}", "page"),
        (f"/store/?page={HUGE}", "page"),
        (f"/store/tree?offset={HUGE}", "offset"),
        (f"/search/?q=hi&before={HUGE}", "before"),
        ("/threads/t1/context/?budget=lots", "budget"),
    ],
)
def test_a_page_answers_a_bad_parameter_with_a_400_naming_it(client, estate, url, name):
    client.force_login(estate)
    response = client.get(url)
    assert response.status_code == 400, response.content[:300]
    assert name in response.content.decode()


def test_admin_pages_answer_bad_parameters_with_a_400(client, admin_user):
    client.force_login(admin_user)
    for url in (f"/audit/?before={HUGE}", "/audit/?since=20240131", "/retention/?dry_run=maybe"):
        assert client.get(url).status_code == 400, url


def test_valid_pages_are_served_as_before_and_a_page_past_the_end_is_empty(client, estate):
    client.force_login(estate)
    assert client.get("/threads/?page=2").status_code == 200
    # The deepest page a list serves (its offset bounded whatever the page size) is an empty page.
    last = client.get(f"/threads/?page={params.PAGE_OFFSET_MAX // 50 + 1}")
    assert last.status_code == 200 and last.context["threads"] == [] and not last.context["has_next"]
    assert client.get("/threads/t1/?tab=archived&after=0").status_code == 200
    assert client.get("/store/?page=2").status_code == 200


@pytest.mark.parametrize(
    "method, url, body, name",
    [
        ("get", "/api/v1/threads?limit=abc", None, "limit"),
        ("get", "/api/v1/threads?limit=0", None, "limit"),
        ("get", "/api/v1/threads/t1/messages?archived=maybe", None, "archived"),
        ("get", f"/api/v1/threads/t1/checkpoints?limit={HUGE}", None, "limit"),
        ("get", f"/api/v1/search/messages?q=hi&before={HUGE}", None, "before"),
        ("get", f"/api/v1/search/messages?q=hi&limit={HUGE}", None, "limit"),
        ("get", "/api/v1/store/items?namespace=a&key=b&refresh_ttl=maybe", None, "refresh_ttl"),
        ("post", "/api/v1/store/items/search", {"namespace_prefix": ["a"], "offset": 10**30}, "offset"),
        ("post", "/api/v1/threads/search", {"offset": 10**30}, "offset"),
        ("post", "/api/v1/threads/search", {"limit": 2.5}, "limit"),
    ],
)
def test_an_endpoint_answers_a_bad_parameter_with_a_400_naming_it(estate, method, url, body, name):
    client = api_client_for(estate)
    response = client.get(url) if body is None else getattr(client, method)(url, body, format="json")
    assert response.status_code == 400, response.content[:300]
    assert name in response.json()["errors"]


def test_valid_api_parameters_are_read_as_before(estate):
    client = api_client_for(estate)
    assert client.get("/api/v1/threads/t1/messages?archived=TRUE").status_code == 200
    assert len(client.get("/api/v1/threads?limit=1").json()["results"]) == 1
    assert client.get("/api/v1/store/items?namespace=a&key=b&refresh_ttl=false").status_code == 200
