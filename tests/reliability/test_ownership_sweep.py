"""Walk every URL in the URLconf as anonymous, another member, an operator and an admin.

A new endpoint or page is swept automatically: if it lets an anonymous caller in, hands
another member's thread or graph to someone else, or lets an operator write, this fails.
"""

from __future__ import annotations

import re

import pytest
from django.urls import URLPattern, URLResolver, get_resolver

from graphs_app.models import GraphDefinition
from sessions_app.threads.services import thread_save_agent_state

from ..conftest import api_client_for, make_user

pytestmark = pytest.mark.django_db

PUBLIC = {"healthz", "metrics", "login", "logout", "schema", "api-docs"}
# POSTs that only read (LangGraph's thread reads, the context preview, searches).
READING_POSTS = {"api-thread-history", "api-thread-state-checkpoint", "api-context-preview", "api-thread-search",
                 "api-store-search", "api-store-namespaces", "api-graph-compile", "graph-preview", "graph-convert",
                 "bulk-preview", "bulk-export"}
METHODS = ("get", "post", "put", "patch", "delete")


def routes():
    def walk(patterns, prefix=""):
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                if "django-admin" not in str(pattern.pattern):
                    yield from walk(pattern.url_patterns, prefix + str(pattern.pattern))
            elif isinstance(pattern, URLPattern):
                yield prefix + str(pattern.pattern), pattern.name

    return sorted(set(walk(get_resolver().url_patterns)))


ROUTES = routes()
OBJECT_ROUTES = [(route, name) for route, name in ROUTES if "<str:thread_id>" in route or "<int:graph_id>" in route]


@pytest.fixture
def world(alice):
    thread_save_agent_state(
        actor=alice, thread_id="alice-t", agent_code="bot", context=[{"role": "user", "content": "mine"}]
    )
    graph = GraphDefinition.objects.create(owner=alice, name="g", spec={"nodes": [], "edges": []})
    return {"thread_id": "alice-t", "checkpoint_id": "cp-1", "graph_id": graph.pk, "job_id": 1, "view_id": 1}


def url_for(route: str, values: dict) -> str:
    return "/" + re.sub(r"<(?:str|int):(\w+)>", lambda m: str(values[m.group(1)]), route)


@pytest.mark.parametrize(("route", "name"), [r for r in ROUTES if r[1] not in PUBLIC])
def test_anonymous_callers_get_nothing(client, world, route, name):
    url = url_for(route, world)
    statuses = {method: getattr(client, method)(url).status_code for method in METHODS}
    assert not any(200 <= s < 300 for s in statuses.values()), statuses
    expected = 401 if route.startswith("api/") else 302
    assert expected in statuses.values(), statuses


@pytest.mark.parametrize(("route", "name"), OBJECT_ROUTES)
def test_another_member_never_gets_alices_objects(world, route, name, client):
    bob = make_user("bob2")
    url = url_for(route, world)
    api = api_client_for(bob)
    caller = api if route.startswith("api/") else client
    if caller is client:
        client.force_login(bob)
    statuses = {method: getattr(caller, method)(url, {}, format="json") if caller is api else getattr(caller, method)(url)
                for method in METHODS}
    codes = {method: response.status_code for method, response in statuses.items()}
    assert not any(200 <= c < 300 for c in codes.values()), codes
    # Where the object can be read, the refusal is the ownership rule itself, not a side effect.
    if codes["get"] != 405:
        assert codes["get"] == 403, codes


@pytest.mark.parametrize(("route", "name"), [r for r in OBJECT_ROUTES if r[1] not in READING_POSTS])
def test_operators_read_but_never_write(world, route, name, operator, client):
    url = url_for(route, world)
    if route.startswith("api/"):
        caller = api_client_for(operator)
        codes = {m: getattr(caller, m)(url, {}, format="json").status_code for m in ("post", "put", "patch", "delete")}
    else:
        client.force_login(operator)
        codes = {m: getattr(client, m)(url).status_code for m in ("post", "put", "patch", "delete")}
    assert not any(200 <= c < 300 for c in codes.values()), codes


@pytest.mark.parametrize(("route", "name"), OBJECT_ROUTES)
def test_admins_are_never_refused_a_read(world, route, name, admin_user, client):
    url = url_for(route, world)
    if route.startswith("api/"):
        response = api_client_for(admin_user).get(url)
    else:
        client.force_login(admin_user)
        response = client.get(url)
    assert response.status_code != 403, response.status_code
