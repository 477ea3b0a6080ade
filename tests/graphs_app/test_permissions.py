"""Ownership on every graph endpoint and page: 403 to others, nothing written, audited.

Graphs are owned like threads: members see and edit their own; operators read every
graph and write none; admins read every graph and may delete one, not edit it.
"""

from __future__ import annotations

import json

import pytest

from graphs_app.models import GraphDefinition
from memoryadmin.models import AuditEvent

from ..conftest import login_client
from .helpers import REACT_AGENT, SEED_SUBGRAPH, save

pytestmark = pytest.mark.django_db


@pytest.fixture
def alices_graph(alice):
    return save(alice, "react", REACT_AGENT)


def snapshot():
    return list(GraphDefinition.objects.order_by("pk").values_list("pk", "name", "spec", "updated_at"))


def api_writes(graph_id: int):
    url = f"/api/v1/graphs/{graph_id}"
    return [
        ("put", url, {"name": "taken-over"}),
        ("put", url, {"spec": SEED_SUBGRAPH}),
        ("put", url, {"spec": "junk"}),  # junk from a stranger is still a 403, not a 400
        ("put", url, [1]),
        ("delete", url, None),
    ]


def page_writes(graph_id: int):
    return [
        (f"/graphs/{graph_id}/", {"spec": json.dumps(SEED_SUBGRAPH), "action": "save"}),
        (f"/graphs/{graph_id}/", {"spec": "{junk", "action": "save"}),
        (f"/graphs/{graph_id}/rename", {"name": "taken-over"}),
        (f"/graphs/{graph_id}/delete", {}),
    ]


def denials(actor_name: str, target: str) -> int:
    return AuditEvent.objects.filter(action="access.denied", actor_name=actor_name, target=target).count()


# --------------------------------------------------------------------------- API


def test_another_member_cannot_read_a_graph(alices_graph, bob_api):
    assert bob_api.get(f"/api/v1/graphs/{alices_graph.pk}").status_code == 403
    assert denials("bob", f"graph:{alices_graph.pk}") == 1
    assert bob_api.get("/api/v1/graphs").json()["results"] == []


def test_another_member_cannot_write_and_nothing_changes(alices_graph, bob_api):
    before = snapshot()
    for method, url, body in api_writes(alices_graph.pk):
        response = getattr(bob_api, method)(url, body, format="json")
        assert response.status_code == 403, (method, body, response.json())
    assert snapshot() == before
    assert denials("bob", f"graph:{alices_graph.pk}") == len(api_writes(alices_graph.pk))


def test_operators_read_every_graph_and_write_none(alices_graph, operator_api):
    assert operator_api.get(f"/api/v1/graphs/{alices_graph.pk}").json()["spec"] == REACT_AGENT
    assert [g["owner"] for g in operator_api.get("/api/v1/graphs").json()["results"]] == ["alice"]
    before = snapshot()
    for method, url, body in api_writes(alices_graph.pk):
        assert getattr(operator_api, method)(url, body, format="json").status_code == 403
    created = operator_api.post("/api/v1/graphs", {"name": "mine", "spec": REACT_AGENT}, format="json")
    assert created.status_code == 403
    assert operator_api.post("/api/v1/graphs", "junk", format="json").status_code == 403
    assert snapshot() == before
    assert denials("olivia", "graph:new") == 2


def test_admins_read_and_delete_but_do_not_edit_another_users_graph(alices_graph, admin_api):
    url = f"/api/v1/graphs/{alices_graph.pk}"
    assert admin_api.get(url).status_code == 200
    before = snapshot()
    assert admin_api.put(url, {"name": "renamed-by-admin"}, format="json").status_code == 403
    assert admin_api.put(url, {"spec": SEED_SUBGRAPH}, format="json").status_code == 403
    assert snapshot() == before
    assert admin_api.delete(url).status_code == 204
    assert not GraphDefinition.objects.exists()
    event = AuditEvent.objects.get(action="graph.delete")
    assert event.actor_name == "adam" and event.detail == {"name": "react", "owner": "alice"}


def test_admins_save_graphs_of_their_own(admin_api):
    assert admin_api.post("/api/v1/graphs", {"name": "ops", "spec": REACT_AGENT}, format="json").status_code == 201


def test_owners_delete_their_own_graph(alices_graph, alice_api):
    assert alice_api.delete(f"/api/v1/graphs/{alices_graph.pk}").status_code == 204
    assert AuditEvent.objects.filter(action="graph.delete", actor_name="alice").count() == 1


# ------------------------------------------------------------------------- pages


def test_another_member_meets_a_403_page_and_nothing_changes(alices_graph, client, bob):
    login_client(client, bob)
    assert client.get(f"/graphs/{alices_graph.pk}/").status_code == 403
    before = snapshot()
    for url, data in page_writes(alices_graph.pk):
        assert client.post(url, data).status_code == 403, url
        assert client.post(url, data, HTTP_HX_REQUEST="true").status_code == 403, url
    assert snapshot() == before
    assert "react" not in client.get("/graphs/").content.decode()


def test_operators_see_a_read_only_editor_and_cannot_write_from_pages(alices_graph, client, operator):
    login_client(client, operator)
    page = client.get(f"/graphs/{alices_graph.pk}/").content.decode()
    assert "readonly" in page and 'value="save"' not in page
    assert "Rename" not in page and "Delete" not in page
    before = snapshot()
    for url, data in page_writes(alices_graph.pk):
        assert client.post(url, data).status_code == 403, url
    assert client.post("/graphs/new/", {"name": "mine", "spec": json.dumps(REACT_AGENT), "action": "save"}).status_code == 403
    assert snapshot() == before
    # Trying a graph out stores nothing, so it is open to them.
    assert client.post("/graphs/preview", {"spec": json.dumps(REACT_AGENT)}).status_code == 200
    assert client.post("/graphs/new/", {"name": "x", "spec": json.dumps(REACT_AGENT), "action": "preview"}).status_code == 200
    assert snapshot() == before


def test_admins_delete_from_the_page_but_cannot_save_or_rename(alices_graph, client, admin_user):
    login_client(client, admin_user)
    page = client.get(f"/graphs/{alices_graph.pk}/").content.decode()
    assert "Delete" in page and 'value="save"' not in page and "Rename" not in page
    before = snapshot()
    for url, data in page_writes(alices_graph.pk)[:3]:
        assert client.post(url, data).status_code == 403, url
    assert snapshot() == before
    response = client.post(f"/graphs/{alices_graph.pk}/delete", HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and response["HX-Redirect"] == "/graphs/"
    assert not GraphDefinition.objects.exists()


def test_pages_and_preview_need_a_sign_in(alices_graph, client):
    for url in ("/graphs/", "/graphs/new/", f"/graphs/{alices_graph.pk}/", "/graphs/thread/t1/"):
        assert client.get(url).status_code == 302
    assert client.post("/graphs/preview", {"spec": "{}"}).status_code == 302
    assert client.post(f"/graphs/{alices_graph.pk}/delete").status_code == 302
    assert GraphDefinition.objects.count() == 1
