"""Input checks that mean what they say: whole-string ids, reserved path steps, keys.

Each refusal is a 400 naming the field (401 for a key that is no key), and the row
counts before and after show that nothing was written.
"""

from __future__ import annotations

import base64
from urllib.parse import parse_qs, quote, urlencode, urlsplit

import pytest

from graphs_app.models import GraphDefinition
from memoryadmin.apikeys import apikey_authenticate, apikey_create
from memoryadmin.errors import InvalidInput
from memoryadmin.operations import bulk, erase, retention
from memoryadmin.operations.models import BulkJob, RetentionPolicy
from sessions_app.models import Block, Checkpoint, Thread
from sessions_app.threads.services import thread_save_agent_state

pytestmark = pytest.mark.django_db

CONTEXT = [{"role": "user", "content": "hi"}]


def counts() -> tuple[int, int]:
    return Thread.objects.count(), Checkpoint.objects.count()


def refused(response, field: str) -> None:
    assert response.status_code == 400, response.content
    assert field in response.json()["errors"], response.json()


@pytest.fixture
def thread(alice):
    thread_save_agent_state(actor=alice, thread_id="t1", agent_code="bot", context=CONTEXT)
    return "t1"


# --- thread ids -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "thread_id",
    ["x%0A", "t1%0A", "x" * 64 + "%0A", ".", ".."],
    ids=["trailing-newline", "existing-plus-newline", "maximal-plus-newline", "dot", "dot-dot"],
)
def test_a_thread_id_is_the_whole_string_in_the_path(alice_api, thread, thread_id):
    before = counts()
    response = alice_api.put(f"/api/v1/threads/{thread_id}/agent-state", {"agent_code": "bot", "context": CONTEXT}, format="json")
    refused(response, "thread_id")
    assert counts() == before


@pytest.mark.parametrize("thread_id", ["ok\n", "x" * 64 + "\n", ".", ".."])
def test_a_thread_id_in_a_body_is_the_whole_string(alice_api, thread, thread_id):
    before = counts()
    refused(alice_api.post("/api/v1/threads", {"thread_id": thread_id}, format="json"), "thread_id")
    refused(alice_api.post("/api/v1/threads/t1/copy", {"thread_id": thread_id}, format="json"), "thread_id")
    assert counts() == before


@pytest.mark.parametrize("thread_id", ["t1\n", ".", ".."])
def test_thread_id_lists_refuse_the_same_ids_by_index(alice_api, thread, thread_id):
    before = counts()
    response = alice_api.post("/api/v1/checkpoints/prune", {"thread_ids": ["t1", thread_id]}, format="json")
    refused(response, "thread_ids[1]")
    assert counts() == before


def test_the_dotted_ids_refused_are_only_the_path_steps(alice_api):
    for thread_id in ("...", ".a", "a.", "a..b"):
        response = alice_api.post("/api/v1/threads", {"thread_id": thread_id}, format="json")
        assert response.status_code == 201, (thread_id, response.content)
    for thread_id in (".", ".."):
        refused(alice_api.post("/api/v1/threads", {"thread_id": thread_id}, format="json"), "thread_id")
    assert Thread.objects.count() == 4


# --- checkpoint ids ---------------------------------------------------------------------------


@pytest.mark.parametrize("checkpoint_id", ["cp%0A", "c" * 128 + "%0A", ".", ".."])
def test_a_checkpoint_id_is_the_whole_string_in_the_path(alice_api, thread, checkpoint_id):
    before = counts()
    response = alice_api.put(f"/api/v1/threads/t1/checkpoints/{checkpoint_id}", {"checkpoint": {"v": 1}}, format="json")
    refused(response, "checkpoint_id")
    assert counts() == before


@pytest.mark.parametrize("checkpoint_id", ["cp\n", "c" * 128 + "\n", ".", ".."])
def test_a_checkpoint_id_in_a_body_is_the_whole_string(alice_api, thread, checkpoint_id):
    before = counts()
    response = alice_api.post(
        "/api/v1/threads/t1/checkpoints", {"checkpoint": {"v": 1}, "checkpoint_id": checkpoint_id}, format="json"
    )
    refused(response, "checkpoint_id")
    response = alice_api.post(
        "/api/v1/threads/t1/checkpoints", {"checkpoint": {"v": 1}, "parent_checkpoint_id": checkpoint_id}, format="json"
    )
    refused(response, "parent_checkpoint_id")
    assert counts() == before


# --- API keys ---------------------------------------------------------------------------------


@pytest.mark.parametrize("prefix", ["ab\x00cd", "abcd\n", "ab cd", "é" * 4])
def test_a_key_whose_prefix_cannot_be_a_prefix_is_no_key_and_no_query(anon_api, alice, prefix, django_assert_num_queries):
    issued = apikey_create(owner=alice)
    lookalike = f"ma_{prefix}_{issued.plaintext.rsplit('_', 1)[1]}"
    with django_assert_num_queries(0):
        assert apikey_authenticate(lookalike) is None
    anon_api.credentials(HTTP_AUTHORIZATION=f"Bearer {lookalike}")
    assert anon_api.get("/api/v1/threads").status_code == 401
    assert apikey_authenticate(issued.plaintext) is not None


# --- NUL and lone surrogates in text that reaches the database ---------------------------------


def test_a_nul_in_agent_code_is_a_400_naming_it(alice_api, thread):
    before = counts(), Block.objects.count()
    response = alice_api.put("/api/v1/threads/t2/agent-state", {"agent_code": "b\x00t", "context": CONTEXT}, format="json")
    refused(response, "agent_code")
    response = alice_api.put("/api/v1/threads/t1/agent-state", {"agent_code": "b\x00t", "context": CONTEXT * 2}, format="json")
    refused(response, "agent_code")
    assert (counts(), Block.objects.count()) == before


def test_a_lone_surrogate_in_agent_code_is_refused_by_the_service(alice):
    with pytest.raises(InvalidInput) as refusal:
        thread_save_agent_state(actor=alice, thread_id="t2", agent_code="b\ud800t", context=CONTEXT)
    assert "agent_code" in refusal.value.fields
    assert not Thread.objects.exists()


def test_a_nul_in_a_run_id_is_a_400_naming_it(alice_api, thread):
    alice_api.post("/api/v1/threads/t1/checkpoints", {"checkpoint": {"v": 1}, "metadata": {"run_id": "r1"}}, format="json")
    before = counts()
    response = alice_api.post("/api/v1/checkpoints/delete-for-runs", {"run_ids": ["r1", "r\x001"]}, format="json")
    refused(response, "run_ids[1]")
    assert counts() == before == (1, 1)


@pytest.mark.parametrize(
    ("url", "data", "field"),
    [
        ("/retention/policies", {"agent_code": "b\x00t", "keep_checkpoints": "3"}, "agent_code"),
        ("/retention/policies/delete", {"agent_code": "b\x00t"}, "agent_code"),
        ("/erase/", {"username": "al\x00ice", "confirm": "al\x00ice"}, "username"),
        ("/bulk/export", {"all": "1", "agent": "b\x00t"}, "agent"),
        ("/bulk/start", {"action": "delete", "all": "1", "owner": "al\x00ice"}, "owner"),
    ],
)
def test_a_nul_in_a_form_field_is_a_400_naming_it(client, admin_user, thread, url, data, field):
    client.force_login(admin_user)
    tables = (RetentionPolicy, BulkJob, Thread, Block)
    before = [model.objects.count() for model in tables]
    for encoding in ("multipart", "urlencoded"):
        if encoding == "multipart":
            response = client.post(url, data)
        else:
            response = client.post(url, urlencode(data), content_type="application/x-www-form-urlencoded")
        assert response.status_code == 400, (encoding, response.status_code)
        assert field in response.content.decode()
    assert [model.objects.count() for model in tables] == before


def test_the_services_refuse_a_nul_whoever_calls_them(admin_user):
    for call, field in (
        (lambda: retention.retention_policy_save(actor=admin_user, agent_code="b\x00t", keep_checkpoints=3), "agent_code"),
        (lambda: retention.retention_policy_delete(actor=admin_user, agent_code="b\x00t"), "agent_code"),
        (lambda: erase.user_erase_preview(actor=admin_user, username="al\x00ice"), "username"),
        (lambda: bulk.Selection.from_data({"all": "1", "q": "a\x00"}), "q"),
    ):
        with pytest.raises(InvalidInput) as refusal:
            call()
        assert field in refusal.value.fields
    assert not RetentionPolicy.objects.exists()


# --- cursors ----------------------------------------------------------------------------------


def cursor_of(text: str) -> str:
    return quote(base64.b64encode(text.encode()).decode())


BAD_CURSORS = {
    "non-numeric-seq": cursor_of("p=abc"),
    "huge-seq": cursor_of("p=99999999999999999999"),
    "non-time": cursor_of("p=yesterday"),
    "bad-offset": cursor_of("o=x"),
    "bad-padding": "a",
    "not-ascii": quote("é"),
}


@pytest.mark.parametrize("url", ["/api/v1/threads/t1/messages", "/api/v1/threads", "/api/v1/graphs"])
@pytest.mark.parametrize("cursor", BAD_CURSORS.values(), ids=BAD_CURSORS.keys())
def test_a_cursor_the_list_did_not_give_is_a_400_naming_cursor(alice_api, thread, url, cursor):
    response = alice_api.get(f"{url}?cursor={cursor}")
    refused(response, "cursor")


@pytest.mark.parametrize("url", ["/api/v1/threads/t1/messages", "/api/v1/threads", "/api/v1/graphs"])
def test_the_cursors_a_list_gives_page_it_and_a_tampered_one_is_refused(alice, alice_api, url):
    for index in range(3):
        thread_save_agent_state(actor=alice, thread_id=f"t{index + 1}", agent_code="bot", context=CONTEXT * 2 if index == 0 else CONTEXT)
        alice_api.post("/api/v1/graphs", {"name": f"g{index}", "spec": {"nodes": [], "edges": []}}, format="json")
    seen, page = [], alice_api.get(f"{url}?limit=1").json()
    while True:
        seen.extend(page["results"])
        if not page["next"]:
            break
        page = alice_api.get(page["next"]).json()
    assert len(seen) in (2, 3) and len({str(row) for row in seen}) == len(seen)
    previous = alice_api.get(alice_api.get(f"{url}?limit=1").json()["next"]).json()["previous"]
    assert alice_api.get(previous).status_code == 200
    given = parse_qs(urlsplit(previous).query)["cursor"][0]
    tampered = parse_qs(base64.b64decode(given).decode()) | {"p": ["not-a-position"]}
    refused(alice_api.get(f"{url}?limit=1&cursor={cursor_of(urlencode(tampered, doseq=True))}"), "cursor")


# --- page numbers and offsets of the pages -------------------------------------------------------


@pytest.mark.parametrize("url", ["/threads/", "/graphs/"])
@pytest.mark.parametrize("page", ["99999999999999999999", "20002", "0", "-1", "two"])
def test_a_page_number_no_list_reaches_is_a_400_naming_page(client, alice, thread, url, page):
    client.force_login(alice)
    response = client.get(url, {"page": page})
    assert response.status_code == 400 and "page" in response.content.decode()
    assert client.get(url, {"page": "20001"}).status_code == 200


def test_a_tree_offset_no_level_reaches_is_a_400_naming_offset(client, alice):
    client.force_login(alice)
    response = client.get("/store/tree", {"offset": "99999999999999999999"})
    assert response.status_code == 400 and "offset" in response.content.decode()


def test_a_langgraph_paste_that_is_not_one_is_a_400_in_the_editor_without_htmx(client, alice):
    client.force_login(alice)
    response = client.post("/graphs/convert", {"langgraph": '{"nodes": 1}', "name": "mine"})
    assert response.status_code == 400
    page = response.content.decode()
    assert "not LangGraph" in page and 'value="mine"' in page and not GraphDefinition.objects.exists()
    assert client.post("/graphs/convert", {"langgraph": "{}", "graph_id": "²"}).status_code == 400
