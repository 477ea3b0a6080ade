"""Context building over HTTP: the preview API and the page, with memories from the store.

The builder's own rules are tested without Django in clients/python/tests/test_context.py.
"""

from __future__ import annotations

import pytest

from memoryadmin.models import AuditEvent
from memoryadmin_client.context import MESSAGE_OVERHEAD, approx_tokens
from sessions_app.threads.services import thread_save_agent_state
from store_app.services import store_item_put

from ..conftest import login_client


def msg(role, text):
    return {"role": role, "content": text}


def cost(text):
    return approx_tokens(text) + MESSAGE_OVERHEAD


HISTORY = [msg("system", "be brief"), *[msg("user" if i % 2 == 0 else "assistant", f"message {i:02d}") for i in range(10)]]


# --- over HTTP ---------------------------------------------------------------


@pytest.fixture
def thread(alice):
    thread_save_agent_state(actor=alice, thread_id="c1", agent_code="bot", context=HISTORY)
    store_item_put(actor=alice, namespace=["mem", "alice"], key="tea", value={"text": "alice likes green tea"})
    store_item_put(actor=alice, namespace=["mem", "alice"], key="tea2", value={"text": "tea tea tea tea green"})
    store_item_put(actor=alice, namespace=["mem", "alice"], key="car", value={"text": "drives a blue car"})
    return "c1"


URL = "/api/v1/threads/c1/context-preview"


@pytest.mark.django_db
def test_the_api_shows_the_messages_with_memory_from_the_store(alice_api, thread):
    body = alice_api.post(URL, {"budget": 1000, "namespace": ["mem"], "query": "green tea", "min_score": 0}, format="json").json()
    assert body["messages"][0]["source"] == "memory"
    assert "alice likes green tea" in body["messages"][0]["content"] and "blue car" not in body["messages"][0]["content"]
    assert [m["content"] for m in body["messages"][1:]] == [m["content"] for m in HISTORY]
    assert all(m["tokens"] == cost(m["content"]) for m in body["messages"])


@pytest.mark.django_db
def test_the_api_filters_memories_by_min_score(alice_api, thread):
    low = alice_api.post(URL, {"budget": 1000, "namespace": ["mem"], "query": "tea", "min_score": 0}, format="json").json()
    scores = sorted(m["score"] for m in low["memories"])
    assert low["memories_used"] == 2 and len(scores) == 2 and scores[0] < scores[1]
    # A threshold between the two scores the store gave keeps the better match only.
    threshold = (scores[0] + scores[1]) / 2
    high = alice_api.post(URL, {"budget": 1000, "namespace": ["mem"], "query": "tea", "min_score": threshold}, format="json").json()
    assert high["memories_used"] == 1 and high["memories_below_threshold"] == 1
    assert "tea tea tea" in high["messages"][0]["content"]


@pytest.mark.django_db
@pytest.mark.parametrize(
    "body, field",
    [
        ({}, "budget"),
        ({"budget": 0}, "budget"),
        ({"budget": "many"}, "budget"),
        ({"budget": 100, "min_score": 2}, "min_score"),
        ({"budget": 100, "namespace": 5}, "namespace"),
        ({"budget": 100, "namespace": ["a.b"]}, "namespace"),
        ({"budget": 100, "query": "tea"}, "namespace"),
        ({"budget": 100, "namespace": ["mem"], "query": 5}, "query"),
        # JSON types, as the schema says: the page turns its form's text into them, the API does not.
        ({"budget": "100"}, "budget"),
        ({"budget": True}, "budget"),
        ({"budget": 100, "min_score": "0.5"}, "min_score"),
        ({"budget": 100, "namespace": ["mem"], "query": 0}, "query"),
        ({"budget": 100, "namespace": [], "query": "tea"}, "namespace"),
        ({"budget": 100, "namespace": "a..b"}, "namespace"),
    ],
)
def test_the_api_rejects_bad_input_naming_the_field(alice_api, thread, body, field):
    response = alice_api.post(URL, body, format="json")
    assert response.status_code == 400 and field in response.json()["errors"]


@pytest.mark.django_db
def test_the_api_takes_the_namespace_in_its_dotted_form_too(alice_api, thread):
    dotted = alice_api.post(URL, {"budget": 1000, "namespace": "mem.alice", "query": "green tea", "min_score": 0}, format="json")
    listed = alice_api.post(URL, {"budget": 1000, "namespace": ["mem", "alice"], "query": "green tea", "min_score": 0}, format="json")
    assert dotted.status_code == 200 and dotted.json()["messages"] == listed.json()["messages"]
    assert dotted.json()["namespace"] == ["mem", "alice"]


@pytest.mark.django_db
def test_the_preview_of_another_members_thread_is_refused(bob_api, thread):
    before = AuditEvent.objects.filter(action="access.denied").count()
    assert bob_api.post(URL, {"budget": 100}, format="json").status_code == 403
    assert AuditEvent.objects.filter(action="access.denied").count() == before + 1


@pytest.mark.django_db
def test_an_operator_may_preview(operator_api, thread):
    assert operator_api.post(URL, {"budget": 100}, format="json").status_code == 200


@pytest.mark.django_db
def test_the_page_shows_the_preview_escaped(client, alice, thread):
    thread_save_agent_state(actor=alice, thread_id="c1", agent_code="bot", context=[*HISTORY, msg("user", "<script>x</script>")])
    login_client(client, alice)
    page = client.get("/threads/c1/context/", {"budget": 500, "namespace": "mem", "query": "tea", "min_score": "0"})
    html = page.content.decode()
    assert page.status_code == 200 and "alice likes green tea" in html
    assert "&lt;script&gt;x&lt;/script&gt;" in html and "<script>x</script>" not in html
    fragment = client.get("/threads/c1/context/", {"budget": 500}, HTTP_HX_REQUEST="true")
    assert fragment.content.decode().lstrip().startswith('<section id="preview-result">')


@pytest.mark.django_db
def test_the_page_names_a_bad_field(client, alice, thread):
    login_client(client, alice)
    page = client.get("/threads/c1/context/", {"budget": "-3"})
    assert page.status_code == 400 and "budget:" in page.content.decode()
    for params in ({"budget": "1.5"}, {"budget": "many"}, {"budget": "100", "min_score": "high"}):
        assert client.get("/threads/c1/context/", params).status_code == 400


@pytest.mark.django_db
def test_the_page_of_another_members_thread_is_refused(client, bob, thread):
    login_client(client, bob)
    assert client.get("/threads/c1/context/", {"budget": 100}).status_code == 403


@pytest.mark.parametrize("query", [{}, {"budget": "500"}, {"budget": "500", "namespace": "mem.alice", "query": "tea"}, {"budget": "x"}])
def test_one_view_of_the_preview_is_one_audited_read(client, thread, operator, settings, query):
    """Every read recorded (no window): the page and the preview it runs are still one thread.read."""
    settings.MEMORYADMIN_AUDIT_READ_WINDOW_SECONDS = 0
    login_client(client, operator)
    response = client.get("/threads/c1/context/", query)
    assert response.status_code == (400 if query.get("budget") == "x" else 200)
    assert AuditEvent.objects.filter(action="thread.read", target="thread:c1").count() == 1
