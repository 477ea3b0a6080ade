"""The thread endpoints of docs/api.md over HTTP."""

from __future__ import annotations

import hashlib
import json

import pytest
from django.test import override_settings

from memoryadmin.models import ApiKey
from sessions_app.models import Block, Thread

from ..conftest import IS_POSTGRES, message_envelope
from .helpers import turns

pytestmark = pytest.mark.django_db

STATE = "/api/v1/threads/{}/agent-state"


def put_state(client, thread_id="t1", context=None, **extra):
    body = {"agent_code": "bot", "context": turns(2) if context is None else context, **extra}
    return client.put(STATE.format(thread_id), body, format="json")


def test_save_and_load_round_trip(alice_api):
    context = [{"role": "user", "content": "hi", "id": "x", "extra": {"keep": [1, "two"]}}, {"role": "ai", "content": "yo"}]
    response = put_state(alice_api, context=context, extra_state={"summary": "s"})
    assert response.status_code == 200
    # The head is the chain digest after the last message: SHA-256 of the previous digest
    # and the message's canonical JSON (sorted keys, no spaces).
    head = b""
    for message in context:
        head = hashlib.sha256(head + json.dumps(message, sort_keys=True, separators=(",", ":")).encode()).digest()
    assert response.json() == {
        "thread_id": "t1", "mode": "append", "appended": 2, "archived": 0, "active": 2, "max_seq": 2, "head": head.hex()
    }
    loaded = alice_api.get(STATE.format("t1"))
    assert loaded.json() == {
        "thread_id": "t1", "agent_code": "bot", "context": context, "extra_state": {"summary": "s"}, "head": head.hex()
    }


def test_x_api_key_header_works_too(alice):
    from rest_framework.test import APIClient

    from memoryadmin.apikeys import apikey_create

    client = APIClient()
    client.credentials(HTTP_X_API_KEY=apikey_create(owner=alice).plaintext)
    assert put_state(client).status_code == 200


def test_it_answers_401_without_or_with_bad_credentials(anon_api, alice):
    assert anon_api.get("/api/v1/threads").status_code == 401
    assert put_state(anon_api).status_code == 401
    anon_api.credentials(HTTP_AUTHORIZATION="Bearer ma_nope_nope")
    assert anon_api.get("/api/v1/threads").status_code == 401
    assert not Thread.objects.exists()


def test_a_revoked_key_is_refused(alice):
    from rest_framework.test import APIClient

    from memoryadmin.apikeys import apikey_create, apikey_revoke

    issued = apikey_create(owner=alice)
    apikey_revoke(prefix=issued.api_key.prefix)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {issued.plaintext}")
    assert client.get("/api/v1/threads").status_code == 401


def test_key_use_is_recorded(alice_api, alice):
    alice_api.get("/api/v1/threads")
    assert ApiKey.objects.get(owner=alice).last_used_at is not None


def test_the_secret_is_never_stored(alice):
    from memoryadmin.apikeys import apikey_create

    issued = apikey_create(owner=alice)
    secret = issued.plaintext.split("_", 2)[2]
    row = ApiKey.objects.get(pk=issued.api_key.pk)
    assert secret not in row.secret_hash and secret not in row.prefix


@pytest.mark.parametrize("name", [["a"], {"k": 1}, 3, None])
def test_a_name_of_any_json_type_is_kept_as_posted(alice_api, alice, client, name):
    """A message's `name` is the agent's own field: only a string names a summary, and nothing else breaks."""
    context = [{"role": "user", "content": "hi", "name": name},
               {**message_envelope("AIMessage", content="yo", type="ai", name=name), "role": "assistant", "content": "yo"}]
    assert put_state(alice_api, context=context).status_code == 200
    assert alice_api.get(STATE.format("t1")).json()["context"] == context
    assert [m["block_type"] for m in alice_api.get("/api/v1/threads/t1/messages").json()["results"]] == ["message", "message"]
    client.force_login(alice)
    assert client.get("/threads/t1/").status_code == 200


def test_an_envelope_s_fields_give_its_block_type(alice_api):
    """A LangGraph thread's blocks are LangChain envelopes: the name and tool calls are in their kwargs."""
    from sessions_app.checkpoints.conversation import block_messages

    context = block_messages([
        message_envelope("SystemMessage", content="so far", type="system", name="__compaction_summary__"),
        message_envelope("AIMessage", content="", type="ai", tool_calls=[{"name": "f", "args": {}, "id": "c1"}]),
    ])
    assert put_state(alice_api, context=context).status_code == 200
    assert list(Block.objects.order_by("seq").values_list("block_type", flat=True)) == ["summary", "tool_call"]


def test_the_migration_types_blocks_saved_before_the_envelope_s_fields_were_read(alice_api):
    """Blocks of LangGraph threads stored typed `message` get the type their envelope gives;
    plain messages, tool results and typed blocks stay as they are."""
    import importlib
    from types import SimpleNamespace

    from django.apps import apps
    from django.db import connection

    from sessions_app.checkpoints.conversation import block_messages

    context = block_messages([
        message_envelope("HumanMessage", content="hi", type="human"),
        message_envelope("SystemMessage", content="so far", type="system", name="__compaction_summary__"),
        message_envelope("AIMessage", content="", type="ai", tool_calls=[{"name": "f", "args": {}, "id": "c1"}]),
        message_envelope("ToolMessage", content="42", type="tool", tool_call_id="c1"),
        message_envelope("AIMessage", content="done", type="ai", tool_calls=[]),
    ]) + [{"role": "assistant", "content": "by hand", "block_type": "plan"}]
    assert put_state(alice_api, context=context).status_code == 200
    typed = list(Block.objects.order_by("seq").values_list("block_type", flat=True))
    assert typed == ["message", "summary", "tool_call", "tool_result", "message", "plan"]
    Block.objects.filter(block_type__in=["summary", "tool_call"]).update(block_type="message")  # as stored before
    retype = importlib.import_module("sessions_app.migrations.0016_langgraph_block_types").retype
    retype(apps, SimpleNamespace(connection=connection))
    assert list(Block.objects.order_by("seq").values_list("block_type", flat=True)) == typed


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"context": turns(1)}, "agent_code"),
        ({"agent_code": "bot", "context": [{"content": "x"}]}, "context[0].role"),
        ({"agent_code": "bot", "context": [{"role": "robot", "content": "x"}]}, "context[0].role"),
        ({"agent_code": "bot", "context": [{"role": "user", "content": 3}]}, "context[0].content"),
        ({"agent_code": "bot"}, "context"),
        ({"agent_code": "bot", "context": {"role": "user"}}, "context"),
        ({"agent_code": "bot", "context": turns(1), "extra_state": [1]}, "extra_state"),
        ({"agent_code": ["bot"], "context": turns(1)}, "agent_code"),
    ],
)
def test_bad_bodies_get_400_naming_the_field(alice_api, body, field):
    response = alice_api.put(STATE.format("t1"), body, format="json")
    assert response.status_code == 400
    assert field in response.json()["errors"]
    assert not Thread.objects.exists()


def test_malformed_json_and_non_objects_get_400(alice_api):
    response = alice_api.generic("PUT", STATE.format("t1"), '{"agent_code": "bot", "context": [', content_type="application/json")
    assert response.status_code == 400
    assert "JSON" in response.json()["detail"]
    response = alice_api.generic("PUT", STATE.format("t1"), "[1, 2]", content_type="application/json")
    assert response.status_code == 400
    response = alice_api.generic("PUT", STATE.format("t1"), '{"agent_code": "bot", "context": [], "x": NaN}', content_type="application/json")
    assert response.status_code == 400
    assert not Thread.objects.exists()


@pytest.mark.parametrize("thread_id", ["searches", "Search", "search-1"])
def test_only_the_exact_reserved_name_is_refused(alice_api, thread_id):
    assert put_state(alice_api, thread_id=thread_id).status_code == 200
    assert alice_api.get(f"/api/v1/threads/{thread_id}").status_code == 200


@pytest.mark.parametrize("thread_id", ["x" * 65, "bad%20id", "semi;colon", "%C3%BC", "search"])
def test_bad_thread_ids_get_400(alice_api, thread_id):
    response = put_state(alice_api, thread_id=thread_id)
    assert response.status_code == 400
    assert "thread_id" in response.json()["errors"]
    assert alice_api.get(STATE.format(thread_id)).status_code == 400


@override_settings(MEMORYADMIN_MAX_BODY_BYTES=2000)
def test_an_oversized_body_gets_413_and_writes_nothing(alice_api):
    response = put_state(alice_api, context=[{"role": "user", "content": "x" * 5000}])
    assert response.status_code == 413
    assert response.json()["code"] == "too_large"
    assert not Thread.objects.exists()


def test_nul_characters_are_refused_in_bodies_and_urls(alice_api):
    response = alice_api.generic("PUT", STATE.format("t1"), '{"agent_code": "bot", "context": [{"role": "user", "content": "a\\u0000b"}]}', content_type="application/json")
    assert response.status_code == 400 and "context[0]" in response.json()["errors"]
    for url in ("/api/v1/threads?q=%00", "/api/v1/threads?agent_code=a%00b", "/api/v1/threads/t%001/agent-state"):
        response = alice_api.get(url)
        assert response.status_code == 400, url
    assert not Thread.objects.exists()


def test_unknown_thread_is_404(alice_api):
    for url in (STATE.format("nope"), "/api/v1/threads/nope", "/api/v1/threads/nope/messages"):
        assert alice_api.get(url).status_code == 404
    assert alice_api.delete("/api/v1/threads/nope").status_code == 404


def test_messages_lists_user_and_assistant_blocks_with_archived_filter(alice_api):
    context = [{"role": "system", "content": "sys"}, *turns(4), {"role": "tool", "content": "r", "tool_call_id": "c"}]
    put_state(alice_api, context=context)
    put_state(alice_api, context=[{"role": "user", "content": "summary"}])
    active = alice_api.get("/api/v1/threads/t1/messages").json()["results"]
    archived = alice_api.get("/api/v1/threads/t1/messages?archived=true").json()["results"]
    everything = alice_api.get("/api/v1/threads/t1/messages?archived=all").json()["results"]
    assert [m["content"] for m in active] == ["summary"]
    assert [m["role"] for m in archived] == ["user", "assistant", "user", "assistant"]
    assert all(m["archived"] for m in archived)
    assert len(everything) == 5
    assert set(everything[0]) == {"seq", "agent_code", "role", "content", "block_type", "archived", "message", "created_at"}
    assert alice_api.get("/api/v1/threads/t1/messages?archived=maybe").status_code == 400


def test_messages_paginate_by_cursor_in_one_query_per_page(alice_api, django_assert_num_queries):
    put_state(alice_api, context=turns(25))
    seen = []
    url = "/api/v1/threads/t1/messages?limit=10"
    pages = 0
    while url:
        # auth (key lookup) + thread + blocks
        with django_assert_num_queries(3):
            body = alice_api.get(url).json()
        seen += [m["seq"] for m in body["results"]]
        url = body["next"]
        pages += 1
    assert seen == list(range(1, 26)) and pages == 3


@pytest.mark.parametrize("size", [10, 1000])
def test_loading_state_takes_the_same_queries_at_any_size(alice_api, size, django_assert_num_queries):
    put_state(alice_api, context=turns(size))
    with django_assert_num_queries(3):
        body = alice_api.get(STATE.format("t1")).json()
    assert len(body["context"]) == size


def test_saving_takes_the_same_queries_at_any_size(alice_api, django_assert_num_queries):
    put_state(alice_api, context=turns(10), thread_id="small")
    put_state(alice_api, context=turns(1000), thread_id="large")
    counts = []
    for thread_id, size in (("small", 10), ("large", 1000)):
        # PostgreSQL: key (with its owner's role), thread with its chain head, one conditional
        # update-and-insert. SQLite: key, savepoint, lock thread, chain head, insert, update, release.
        with django_assert_num_queries(3 if IS_POSTGRES else 7) as captured:
            assert put_state(alice_api, thread_id=thread_id, context=turns(size + 2)).json()["mode"] == "append"
        counts.append(len(captured))
        # The next save: on PostgreSQL the process remembers the row its last save left, so no read.
        with django_assert_num_queries(2 if IS_POSTGRES else 7) as captured:
            assert put_state(alice_api, thread_id=thread_id, context=turns(size + 4)).json()["mode"] == "append"
        counts.append(len(captured))
    assert counts[0] == counts[2] and counts[1] == counts[3]


def test_thread_list_filters_and_paginates(alice_api, bob_api):
    for i in range(5):
        put_state(alice_api, thread_id=f"a{i}", context=[{"role": "user", "content": f"topic {i}"}])
    alice_api.put(STATE.format("h1"), {"agent_code": "helpdesk", "context": [{"role": "user", "content": "printer on fire"}]}, format="json")
    put_state(bob_api, thread_id="b1")
    listed = alice_api.get("/api/v1/threads").json()["results"]
    assert {t["thread_id"] for t in listed} == {"a0", "a1", "a2", "a3", "a4", "h1"}
    assert [t["thread_id"] for t in alice_api.get("/api/v1/threads?agent_code=helpdesk").json()["results"]] == ["h1"]
    assert [t["thread_id"] for t in alice_api.get("/api/v1/threads?q=printer").json()["results"]] == ["h1"]
    page = alice_api.get("/api/v1/threads?limit=4").json()
    assert len(page["results"]) == 4 and page["next"]
    rest = alice_api.get(page["next"]).json()
    assert len(rest["results"]) == 2


@pytest.mark.parametrize("count", [3, 30])
def test_thread_list_query_count_does_not_grow(alice_api, count, django_assert_num_queries):
    for i in range(count):
        put_state(alice_api, thread_id=f"t{i}", context=turns(4))
    # key with its owner's role, the page of threads
    with django_assert_num_queries(2):
        alice_api.get("/api/v1/threads?limit=50")


def test_thread_detail_has_the_counts(alice_api):
    put_state(alice_api, context=turns(4))
    put_state(alice_api, context=turns(2))
    body = alice_api.get("/api/v1/threads/t1").json()
    assert body["thread_id"] == "t1" and body["owner"] == "alice"
    assert (body["active_blocks"], body["archived_blocks"]) == (2, 4)
    for key in ("agent_code", "title", "created_at", "updated_at", "metadata", "status", "values", "checkpoints"):
        assert key in body


def test_owner_deletes_a_thread_with_its_blocks(alice_api):
    put_state(alice_api)
    assert alice_api.delete("/api/v1/threads/t1").status_code == 204
    assert not Thread.objects.exists() and not Block.objects.exists()


def test_admin_clears_a_thread(alice_api, admin_api):
    put_state(alice_api, extra_state={"a": 1})
    response = admin_api.post("/api/v1/threads/t1/clear")
    assert response.status_code == 200
    assert response.json() == {"archived": 2, "active_blocks": 0, "archived_blocks": 2}
    assert alice_api.get(STATE.format("t1")).json()["context"] == []


def test_the_schema_lists_the_endpoints(alice_api, client):
    response = client.get("/api/schema/?format=json")
    assert response.status_code == 200
    paths = json.loads(response.content)["paths"]
    assert "/api/v1/threads/{thread_id}/agent-state" in paths
    docs = client.get("/api/docs/")
    assert docs.status_code == 200 and b"cdn" not in docs.content.lower()
