"""Deep JSON: refused at the door with a 400 naming the field, and harmless once stored.

A value nested a few hundred levels deep used to be accepted and then turn every read
of it into a 500 (recursive walks, serialisers with a depth limit), for its owner and
for every operator and admin listing threads; a deeper one made the write itself a 500.
"""

from __future__ import annotations

import io
import json
import zipfile
from typing import Any

import pytest
from django.db import connection
from django.test import override_settings

from memoryadmin.json import DEEP_MARKER
from memoryadmin.jsoncheck import (
    BODY_DEPTH_MAX,
    DEPTH_MAX,
    DOCUMENT_DEPTH_MAX,
    json_depth,
)
from sessions_app.checkpoints.services import checkpoint_input
from sessions_app.models import Block, Checkpoint, CheckpointWrite, Thread
from sessions_app.threads.services import thread_save_agent_state
from store_app.models import StoreItem
from store_app.services import store_item_put

from ..conftest import login_client

pytestmark = pytest.mark.django_db

# Deeper than every input limit and than orjson writes (254), inside the range that
# used to be accepted and then break every read (~470 to ~910 levels).
STORED_DEPTH = 600


def nested(depth: int, leaf=None) -> dict:
    """`depth` containers inside each other, objects and lists in turn, a string at the bottom."""
    value: Any = {"leaf": "bottom" if leaf is None else leaf}
    for level in range(depth - 1):
        value = {"k": value} if level % 2 else [value]
    return value if isinstance(value, dict) else {"k": value}


def wrapped(depth: int) -> list:
    value: list = []
    for _ in range(depth - 1):
        value = [value]
    return value


# --- refused at the door -----------------------------------------------------------------------


def put_state(client, **body):
    return client.put("/api/v1/threads/t1/agent-state", {"agent_code": "bot", "context": [], **body}, format="json")


@pytest.mark.parametrize(
    ("send", "field"),
    [
        (lambda c, v: put_state(c, extra_state={"v": v}), "extra_state"),
        (lambda c, v: c.post("/api/v1/threads", {"thread_id": "t1", "metadata": {"v": v}}, format="json"), "metadata"),
        (lambda c, v: c.post("/api/v1/threads/t1/checkpoints", {"checkpoint": {}, "metadata": {"v": v}}, format="json"), "metadata"),
        (lambda c, v: c.post("/api/v1/threads/search", {"metadata": {"v": v}}, format="json"), "metadata"),
        (lambda c, v: c.post("/api/v1/store/items/search", {"namespace_prefix": ["a"], "filter": {"v": v}}, format="json"), "filter"),
        (lambda c, v: c.put("/api/v1/store/items", {"namespace": ["a"], "key": "k", "value": {"v": v}}, format="json"), "value"),
    ],
    ids=["extra_state", "thread-metadata", "checkpoint-metadata", "search-filter", "store-filter", "store-value"],
)
def test_small_json_deeper_than_its_limit_is_a_400_naming_the_field(alice_api, send, field):
    # One level too deep for the field, far within what the body may be: the field's own check answers.
    response = send(alice_api, wrapped(DEPTH_MAX))
    assert response.status_code == 400, response.content
    assert f"is nested deeper than {DEPTH_MAX} levels" in response.json()["errors"][field][0]
    assert not Thread.objects.exists() and not Checkpoint.objects.exists() and not StoreItem.objects.exists()
    # One level less is the limit itself: accepted.
    assert send(alice_api, wrapped(DEPTH_MAX - 1)).status_code in (200, 201, 204)


def test_a_message_may_be_deeper_than_metadata_but_not_without_bound(alice_api):
    ok = [{"role": "user", "content": "x", "meta": wrapped(DOCUMENT_DEPTH_MAX - 1)}]
    assert put_state(alice_api, context=ok).status_code == 200
    deep = put_state(alice_api, context=[*ok, {"role": "user", "content": "y", "meta": wrapped(DOCUMENT_DEPTH_MAX)}])
    assert deep.status_code == 400
    assert f"is nested deeper than {DOCUMENT_DEPTH_MAX} levels" in deep.json()["errors"]["context[1]"][0]
    assert Block.objects.count() == 1


def test_checkpoints_and_writes_take_documents_nested_up_to_their_limit(alice_api):
    inner = wrapped(DOCUMENT_DEPTH_MAX - 2)  # inside checkpoint -> channel_values
    body = {"checkpoint": {"channel_values": {"v": inner}}, "checkpoint_id": "c1"}
    assert alice_api.post("/api/v1/threads/t1/checkpoints", body, format="json").status_code == 201
    too_deep = {"checkpoint": {"channel_values": {"v": [inner]}}, "checkpoint_id": "c2"}
    response = alice_api.post("/api/v1/threads/t1/checkpoints", too_deep, format="json")
    assert response.status_code == 400 and "checkpoint" in response.json()["errors"]
    write = {"task_id": "t", "writes": [{"channel": "x", "value": wrapped(DOCUMENT_DEPTH_MAX + 1)}]}
    response = alice_api.post("/api/v1/threads/t1/checkpoints/c1/writes", write, format="json")
    assert response.status_code == 400 and "writes[0].value" in response.json()["errors"]
    assert Checkpoint.objects.count() == 1 and not CheckpointWrite.objects.exists()


@pytest.mark.parametrize("depth", [BODY_DEPTH_MAX, 1000])
def test_a_body_deeper_than_the_parser_takes_is_a_400_naming_its_field(alice_api, depth):
    body = '{"agent_code": "bot", "context": [], "extra_state": ' + "[" * depth + "]" * depth + "}"
    response = alice_api.generic("PUT", "/api/v1/threads/t1/agent-state", body, content_type="application/json")
    assert response.status_code == 400, response.content
    assert response.json()["errors"] == {"extra_state": [f"is nested deeper than {BODY_DEPTH_MAX} levels."]}
    assert not Thread.objects.exists()


def test_query_string_json_is_checked_as_a_body_is(alice, alice_api):
    thread_save_agent_state(actor=alice, thread_id="t1", agent_code="bot", context=[])
    for depth in (DEPTH_MAX, 3000):
        response = alice_api.get("/api/v1/threads/t1/checkpoints", {"metadata": '{"v": ' + "[" * depth + "]" * depth + "}"})
        assert response.status_code == 400 and "metadata" in response.json()["errors"], response.content


def test_a_store_filter_typed_into_the_page_is_checked_as_well(client, alice):
    login_client(client, alice)
    # Deeper than the standard parser's stack allows (the form used it), and than orjson reads.
    response = client.get("/store/", {"ns": "a", "filter": "[" * 1500 + "]" * 1500})
    assert response.status_code == 200 and '<ul class="error form-errors"><li>filter: Not JSON' in response.content.decode()
    response = client.get("/store/", {"ns": "a", "filter": '{"v": ' + "[" * 500 + "]" * 500 + "}"})
    assert response.status_code == 200 and f"filter is nested deeper than {DEPTH_MAX} levels" in response.content.decode()


def test_the_python_api_refuses_what_the_api_would(alice):
    from memoryadmin.errors import InvalidInput

    very_deep = wrapped(20_000)  # deeper than any recursive walk could take
    with pytest.raises(InvalidInput) as caught:
        thread_save_agent_state(
            actor=alice, thread_id="t1", agent_code="bot", context=[], extra_state={"v": very_deep}, extra_state_given=True
        )
    assert "extra_state" in caught.value.fields
    with pytest.raises(InvalidInput) as caught:
        thread_save_agent_state(actor=alice, thread_id="t1", agent_code="bot", context=[{"role": "user", "content": "x", "v": very_deep}])
    assert "context[0]" in caught.value.fields
    with pytest.raises(InvalidInput) as caught:
        checkpoint_input(checkpoint={"channel_values": {"v": very_deep}})
    assert "checkpoint" in caught.value.fields
    with pytest.raises(InvalidInput) as caught:
        store_item_put(actor=alice, namespace=["a"], key="k", value={"v": very_deep})
    assert "value" in caught.value.fields
    assert not Thread.objects.exists() and not StoreItem.objects.exists()


@override_settings(MEMORYADMIN_MAX_JSON_BYTES=1000)
def test_small_json_over_its_size_is_a_400_naming_the_field(alice_api):
    big = {"text": "x" * 2000}
    for response, field in (
        (put_state(alice_api, extra_state=big), "extra_state"),
        (alice_api.post("/api/v1/threads", {"thread_id": "t2", "metadata": big}, format="json"), "metadata"),
        (alice_api.put("/api/v1/store/items", {"namespace": ["a"], "key": "k", "value": big}, format="json"), "value"),
    ):
        assert response.status_code == 400 and field in response.json()["errors"], response.content
    assert not StoreItem.objects.exists() and not Thread.objects.exists()
    # A message is a document: it may be as large as a body.
    assert put_state(alice_api, context=[{"role": "user", "content": "x" * 2000}]).status_code == 200


@override_settings(MEMORYADMIN_MAX_JSON_BYTES=1000)
def test_metadata_merged_past_its_size_is_refused(alice_api):
    assert alice_api.post("/api/v1/threads", {"thread_id": "t2", "metadata": {"a": "x" * 600}}, format="json").status_code == 201
    response = alice_api.patch("/api/v1/threads/t2", {"metadata": {"b": "y" * 600}}, format="json")
    assert response.status_code == 400 and "metadata" in response.json()["errors"]
    assert Thread.objects.get(thread_id="t2").metadata == {"a": "x" * 600}


# --- stored anyway: every read still answers -------------------------------------------------------


def deep_message(label: str) -> dict:
    return {
        "role": "assistant",
        "content": f"a {label} reply",
        "tool_calls": [{"id": "c1", "name": "lookup", "args": nested(STORED_DEPTH, label)}],
        "meta": nested(STORED_DEPTH, label),
    }


def lc_message(text: str) -> dict:
    return {"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", "AIMessage"],
            "kwargs": {"content": text, "type": "ai", "id": text, "additional_kwargs": {"deep": nested(STORED_DEPTH)}}}


@pytest.fixture
def stored_deep(alice):
    """Deep values in every JSON column, written through the model layer (no service checks them),
    as data stored before the limits (or by SQL) would be."""
    thread = Thread.objects.create(
        thread_id="deep", owner=alice, agent_code="bot", title="deep",
        metadata={"v": nested(STORED_DEPTH)}, extra_state={"v": nested(STORED_DEPTH)},
        last_seq=1, active_count=1,
    )
    Block.objects.create(thread=thread, agent_code="bot", seq=1, position=0, role="assistant", content="a deep reply",
                         message=deep_message("deep"), block_type="tool_call", chain_hash="0" * 64)
    Checkpoint.objects.create(thread=thread, checkpoint_id="c1", metadata={"step": 1, "v": nested(STORED_DEPTH)},
                              checkpoint={"channel_values": {"messages": [lc_message("one")], "v": nested(STORED_DEPTH)}})
    Checkpoint.objects.create(thread=thread, checkpoint_id="c2", parent_checkpoint_id="c1", next_node_id="act",
                              metadata={"step": 2, "v": nested(STORED_DEPTH, "other")},
                              checkpoint={"channel_values": {"messages": [lc_message("one"), lc_message("two")],
                                                             "v": nested(STORED_DEPTH, "other")}})
    for idx, channel in ((-3, "__interrupt__"), (-1, "__error__"), (0, "notes")):
        CheckpointWrite.objects.create(thread=thread, checkpoint_id="c2", task_id="task", idx=idx, channel=channel,
                                       value={"value": nested(STORED_DEPTH), "id": "i1"})
    StoreItem.objects.create(owner=alice, namespace_path="notes", depth=1, key="k",
                             value={"text": "a deep note", "topic": "x", "v": nested(STORED_DEPTH)})
    return thread


def test_reads_cut_what_is_stored_too_deep_and_mark_it(stored_deep):
    assert json_depth(nested(5)) == 5 and json_depth(nested(6)) == 7 and json_depth(wrapped(7)) == 7
    # The model layer stored it whole...
    with connection.cursor() as cursor:
        cursor.execute("SELECT metadata FROM sessions_app_thread WHERE thread_id = 'deep'")
        text = cursor.fetchone()[0]
    assert text.count("{") + text.count("[") > STORED_DEPTH
    # ...and reading it cuts it, marked.
    metadata = Thread.objects.get(thread_id="deep").metadata
    assert json_depth(metadata) <= 200 and DEEP_MARKER in json.dumps(metadata)


API_READS = [
    ("get", "/api/v1/threads/deep", None),
    ("get", "/api/v1/threads", None),
    ("get", "/api/v1/threads/deep/agent-state", None),
    ("get", "/api/v1/threads/deep/messages", None),
    ("get", "/api/v1/threads/deep/state", None),
    ("get", "/api/v1/threads/deep/state/c1", None),
    ("post", "/api/v1/threads/deep/history", {}),
    ("get", "/api/v1/threads/deep/checkpoints", None),
    ("get", "/api/v1/threads/deep/checkpoints/latest", None),
    ("get", "/api/v1/threads/deep/checkpoints/c1", None),
    ("post", "/api/v1/threads/search", {}),
    ("post", "/api/v1/threads/search", {"metadata": {"v": {"list": [{"k": {}}]}}}),
    ("post", "/api/v1/store/items/search", {"namespace_prefix": ["notes"]}),
    ("post", "/api/v1/store/items/search", {"namespace_prefix": ["notes"], "query": "deep note", "filter": {"topic": "x"}}),
    ("post", "/api/v1/store/items/search", {"filter": {"topic": "x"}}),
    ("get", "/api/v1/store/items?namespace=notes&key=k", None),
]


@pytest.mark.parametrize("who", ["alice_api", "operator_api", "admin_api"])
def test_every_api_read_of_deep_data_answers_200(request, stored_deep, who):
    client = request.getfixturevalue(who)
    for method, url, body in API_READS:
        response = getattr(client, method)(url, body, format="json") if body is not None else getattr(client, method)(url)
        assert response.status_code == 200, (who, url, response.content[:300])
    state = client.get("/api/v1/threads/deep/state").json()
    assert "nested deeper than" in json.dumps(state["values"]) and state["tasks"][0]["error"] is not None
    found = client.post("/api/v1/threads/search", {"ids": ["deep"]}, format="json").json()
    assert [thread["thread_id"] for thread in found] == ["deep"] and "nested deeper than" in json.dumps(found)
    items = client.post("/api/v1/store/items/search", {"namespace_prefix": ["notes"], "query": "note"}, format="json").json()
    assert [item["key"] for item in items["items"]] == ["k"]


def test_a_value_deeper_than_json_parsers_read_is_cut_as_well(alice_api, stored_deep):
    # Beyond Python's stack; on PostgreSQL 3 000 levels, beyond orjson's 1 024 as well (SQLite's
    # JSON check takes at most 1 000): only SQL can store that.
    depth = 3000 if connection.vendor == "postgresql" else 999
    text = '{"channel_values": {"v": ' + "[" * depth + "]" * depth + "}}"
    with connection.cursor() as cursor:
        cast = "::jsonb" if connection.vendor == "postgresql" else ""
        cursor.execute(f"UPDATE sessions_app_checkpoint SET checkpoint = %s{cast} WHERE checkpoint_id = 'c1'", [text])
    for url in ("/api/v1/threads/deep/checkpoints/c1", "/api/v1/threads/deep/state/c1"):
        response = alice_api.get(url)
        assert response.status_code == 200 and "nested deeper than" in response.content.decode()


PAGES = [
    "/threads/",
    "/threads/deep/",
    "/threads/deep/?tab=state",
    "/threads/deep/checkpoints/",
    "/threads/deep/checkpoints/?checkpoint=c1",
    "/threads/deep/checkpoints/?checkpoint=c2",
    "/search/?q=deep",
    "/store/?ns=notes",
    "/store/?ns=notes&q=deep&filter=%7B%22topic%22%3A%20%22x%22%7D",
    "/store/item?ns=notes&key=k",
]


@pytest.mark.parametrize("who", ["alice", "operator", "admin_user"])
def test_every_page_showing_deep_data_answers_200(request, client, stored_deep, who):
    login_client(client, request.getfixturevalue(who))
    for url in PAGES:
        response = client.get(url)
        assert response.status_code == 200, (who, url)
    assert "nested deeper than" in client.get("/threads/deep/checkpoints/?checkpoint=c2").content.decode()
    assert "nested deeper than" in client.get("/store/item?ns=notes&key=k").content.decode()


def unzip(response) -> zipfile.ZipFile:
    assert response.status_code == 200
    archive = zipfile.ZipFile(io.BytesIO(b"".join(response.streaming_content)))
    assert archive.testzip() is None
    return archive


def test_exports_of_deep_data_stream_completely(client, operator, stored_deep, alice, alice_api):
    login_client(client, operator)
    for response, prefix in ((client.get("/threads/deep/export"), ""), (alice_api.get("/api/v1/threads/deep/export"), "")):
        archive = unzip(response)
        manifest = json.loads(archive.read(prefix + "manifest.json"))
        assert manifest["counts"]["checkpoints"] == 2 and manifest["counts"]["pending_writes"] == 3
        lines = archive.read(prefix + "checkpoints.jsonl").decode().splitlines()
        assert len(lines) == 2 and all(json.loads(line)["thread_id"] == "deep" for line in lines)
        assert json.loads(archive.read(prefix + "agent-state.json"))["context"][0]["content"] == "a deep reply"
        assert "lookup" in archive.read(prefix + "transcript.md").decode()
    thread_save_agent_state(actor=alice, thread_id="plain", agent_code="bot", context=[{"role": "user", "content": "hi"}])
    archive = unzip(client.post("/bulk/export", {"all": "1", "q": "", "action": "export"}))
    assert {"deep/manifest.json", "plain/manifest.json", "index.json"} <= set(archive.namelist())
