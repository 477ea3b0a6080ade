"""Every HTML route answers a request it does not serve with a 4xx, never a 500.

The walk takes every page and action of the URLconf (the API has its schema fuzzing) and
sends each the wrong method, a made-up one, each with and without htmx's headers, with
bad query parameters and with bad form data, as an admin (who gets furthest into each
view) and as a member. Any 5xx fails, listing every request that produced one.
"""

from __future__ import annotations

import pytest
from django.test import Client

from graphs_app.models import GraphDefinition
from memoryadmin.operations import bulk
from sessions_app.checkpoints.services import checkpoint_input, checkpoint_put
from sessions_app.threads.services import thread_save_agent_state

from ..conftest import make_user
from .test_ownership_sweep import ROUTES, url_for

pytestmark = pytest.mark.django_db

HTML_ROUTES = [(route, name) for route, name in ROUTES if not route.startswith("api/")]
HUGE = "9" * 30
BAD_QUERY = {
    "page": HUGE, "offset": HUGE, "after": HUGE, "before": HUGE, "tab": "nope", "q": "x" * 5000,
    "ns": "a..b", "key": "", "checkpoint": "a\nb", "cns": "\x7f", "budget": "lots", "min_score": "high",
    "format": "pdf", "dry_run": "1", "edit": "x" * 100, "username": "nobody", "since": "yesterday",
    "until": "2026-13-45", "role": "root", "archived": "maybe", "owner": "x" * 500, "agent": "x" * 500,
    "filter": "{", "action": "x", "namespace": "a..b", "query": "q",
}
BAD_FORMS = [{
    "spec": "{", "langgraph": "[", "name": "", "graph_id": HUGE, "action": "junk", "ids": "..", "all": "0",
    "agent_code": "x" * 100, "keep_checkpoints": "-1", "release_idle_days": HUGE, "purge_archived_days": "x",
    "store_ttl_days": "1.5", "username": "nobody", "confirm": "", "ns": "a..b", "key": "", "revoke_access": "maybe",
    "page": HUGE, "offset": HUGE,
}, {"langgraph": "{}", "name": "x"}, {"langgraph": "{\"nodes\": 1}", "graph_id": "0"}, {"langgraph": "{}", "graph_id": "²"}, {"all": "1", "action": "release"}]
HTMX = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "nowhere", "HTTP_HX_CURRENT_URL": "http://testserver/"}
HTMX_TARGETS = ("thread-table", "graph-table", "item-panel", "search-results", "audit-table", "checkpoint-detail", "tab-panel")


@pytest.fixture
def world(alice):
    thread_save_agent_state(actor=alice, thread_id="alice-t", agent_code="bot", context=[{"role": "user", "content": "hi"}])
    checkpoint_put(actor=alice, thread_id="alice-t", data=checkpoint_input(checkpoint={"v": 1}), checkpoint_id="cp-1")
    graph = GraphDefinition.objects.create(owner=alice, name="g", spec={"nodes": [], "edges": []})
    admin = make_user("root", "admin")
    job = bulk.bulk_start(actor=admin, action="release", selection=bulk.Selection(ids=("alice-t",)))
    return {"thread_id": "alice-t", "checkpoint_id": "cp-1", "graph_id": graph.pk, "job_id": job.pk, "view_id": 1, "admin": admin}


def requests_for(serves_get: bool, serves_post: bool):
    """(label, method, kwargs) of the requests a route gets: every method, with and without
    htmx's headers; bad query parameters where it serves GET, bad forms where it serves POST."""
    for method in ("get", "post", "put", "delete"):
        yield method, method, {}
        yield f"{method}+htmx", method, HTMX
    yield "BREW", "generic", {"method": "BREW"}
    if serves_get:
        # One bad parameter at a time (together, one can hide another: a filter that matches
        # nothing skips the query a huge page number would break), then all of them.
        for name, value in BAD_QUERY.items():
            yield f"get+{name}", "get", {"data": {name: value}}
        for target in HTMX_TARGETS:
            yield f"get+bad-query+htmx:{target}", "get", {"data": BAD_QUERY, **HTMX, "HTTP_HX_TARGET": target}
    if serves_post:
        for name, value in BAD_FORMS[0].items():
            yield f"post+{name}", "post", {"data": {name: value}}
        for index, form in enumerate(BAD_FORMS):
            yield f"post+bad-form-{index}", "post", {"data": form}
            yield f"post+bad-form-{index}+htmx", "post", {"data": form, **HTMX}
        yield "post+not-a-form", "post", {"data": b"\xff\xfe{", "content_type": "application/x-www-form-urlencoded"}
        yield "post+broken-multipart", "post", {"data": b"--x\r\nnot a part", "content_type": "multipart/form-data; boundary=x"}
        yield "post+json", "post", {"data": b'{"spec": 1}', "content_type": "application/json"}


def walk(client: Client, user, world: dict) -> tuple[int, list[str]]:
    sent, failures = 0, []
    for route, name in HTML_ROUTES:
        url = url_for(route, world)
        client.force_login(user)
        serves = {method: getattr(client, method)(url).status_code != 405 for method in ("get", "post")}
        for label, method, kwargs in requests_for(serves["get"], serves["post"]):
            if name == "logout":
                client.force_login(user)  # the walk posts to the logout route too
            kwargs = dict(kwargs)
            if method == "generic":
                response = client.generic(kwargs.pop("method"), url, **kwargs)
            else:
                response = getattr(client, method)(url, **kwargs)
            sent += 1
            if response.status_code >= 500:
                failures.append(f"{name} {label} {url} -> {response.status_code}")
    return sent, failures


@pytest.mark.parametrize("who", ["admin", "member"])
def test_no_html_route_answers_a_request_it_does_not_serve_with_a_500(world, who, alice):
    client = Client(raise_request_exception=False)
    sent, failures = walk(client, world["admin"] if who == "admin" else alice, world)
    assert not failures, "\n".join(failures)
    print(f"{who}: {sent} requests to {len(HTML_ROUTES)} routes")
    assert sent > 40 * len(HTML_ROUTES)
