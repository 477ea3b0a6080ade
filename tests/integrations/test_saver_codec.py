"""The saver's wire format: readable JSON where it round-trips, typed blobs otherwise; and its errors."""

from __future__ import annotations

import base64
import json
import uuid
from datetime import datetime, timezone

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.types import Command, Interrupt, Send

from memoryadmin.apikeys import apikey_create, apikey_revoke
from memoryadmin_client.langgraph import (
    BLOB_KEY,
    MemoryAdminAuthError,
    MemoryAdminForbidden,
    MemoryAdminInvalid,
    MemoryAdminNotFound,
    MemoryAdminSaver,
    ValueCodec,
)
from sessions_app import checkpoint_selectors as cs

codec = ValueCodec(JsonPlusSerializer())


def wire(value):
    """Through JSON text, as the server stores and returns it."""
    return json.loads(json.dumps(codec.dump(value), allow_nan=False))


def roundtrip(value):
    return codec.load(wire(value))


def is_blob(value) -> bool:
    return isinstance(value, dict) and set(value) == {BLOB_KEY}


@pytest.mark.parametrize(
    "value",
    [None, True, 0, -7, 2**64 - 1, -(2**63), 1.5, "text", "", [], {}, [1, "a", None, {"k": [True, 2.5]}], {"nested": {"deep": ["x"]}}],
)
def test_plain_json_is_sent_as_itself(value):
    assert wire(value) == value
    assert roundtrip(value) == value


def test_langchain_messages_are_readable_json_and_come_back_equal():
    messages = [
        SystemMessage("Be brief.", id="s"),
        HumanMessage("What is 6 x 7?", id="h"),
        AIMessage("", id="a", tool_calls=[{"name": "mul", "args": {"a": 6, "b": 7}, "id": "c1"}], usage_metadata={"input_tokens": 3, "output_tokens": 1, "total_tokens": 4}),
        ToolMessage("42", tool_call_id="c1", id="t"),
        AIMessage([{"type": "text", "text": "6 x 7 = 42"}], id="a2"),
    ]
    sent = wire(messages)
    assert not any(is_blob(item) for item in sent)
    assert sent[1]["lc"] == 1 and sent[1]["id"][-1] == "HumanMessage" and sent[1]["kwargs"]["content"] == "What is 6 x 7?"
    assert roundtrip(messages) == messages
    assert [(m.role, m.content) for m in cs.message_list(sent)] == [
        ("system", "Be brief."),
        ("user", "What is 6 x 7?"),
        ("assistant", ""),
        ("tool", "42"),
        ("assistant", "6 x 7 = 42"),
    ]


def test_langgraph_types_use_the_constructor_form():
    values = [Interrupt(value={"q": "approve?"}, id="i-1"), Send("node", {"x": 1}), Command(resume="yes")]
    sent = wire(values)
    assert [item["id"][-1] for item in sent] == ["Interrupt", "Send", "Command"]
    assert roundtrip(values) == values


def test_tuples_come_back_as_lists_as_from_langgraphs_own_serializer():
    assert wire((1, "a")) == [1, "a"]
    serde = JsonPlusSerializer()
    assert serde.loads_typed(serde.dumps_typed((1, "a"))) == [1, "a"]


@pytest.mark.parametrize(
    "value",
    [
        b"\x00\x01bytes",
        {1, 2, 3},
        datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc),
        uuid.UUID("12345678-1234-5678-1234-567812345678"),
        float("nan"),
        "nul \x00 inside",
        {1: "int key"},
        {"$blob": "looks like an envelope"},
        {"lc": 1, "type": "secret", "id": ["OPENAI_API_KEY"]},
    ],
    ids=["bytes", "set", "datetime", "uuid", "nan", "nul", "int-key", "blob-shaped", "lc-shaped"],
)
def test_everything_else_is_a_typed_blob_that_round_trips(value):
    sent = wire(value)
    assert is_blob(sent)
    back = codec.load(sent)
    if isinstance(value, float):
        assert back != back  # NaN
    else:
        assert back == value and type(back) is type(value)


def test_only_the_odd_item_of_a_list_becomes_a_blob():
    value = [HumanMessage("hi", id="h"), b"raw", {"k": 1}]
    sent = wire(value)
    assert sent[0]["lc"] == 1 and is_blob(sent[1]) and sent[2] == {"k": 1}
    assert roundtrip(value) == value


def test_the_dashboard_never_shows_blob_bytes():
    sent = wire({"raw": b"\x00secret-bytes"})
    shown = cs.readable(sent)
    assert shown["raw"].startswith("<binary value (bytes, 13 bytes)")
    assert base64.b64encode(b"\x00secret-bytes").decode() not in json.dumps(shown)


class OpaqueSerializer:
    """A serializer that is not JsonPlusSerializer (as an encrypting one would be)."""

    def dumps_typed(self, obj):
        return "reversed-json", json.dumps(obj).encode()[::-1]

    def loads_typed(self, data):
        return json.loads(data[1][::-1])


def test_another_serializer_makes_every_value_an_opaque_blob():
    opaque = ValueCodec(OpaqueSerializer())
    sent = opaque.dump({"text": "private"})
    assert is_blob(sent) and sent[BLOB_KEY]["type"] == "reversed-json" and "private" not in json.dumps(sent)
    assert opaque.load(sent) == {"text": "private"}


# --- errors over HTTP ------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_http_errors_become_clear_exceptions(live_server, alice, bob):
    alice_key = apikey_create(owner=alice).plaintext
    bob_saver = MemoryAdminSaver(live_server.url, apikey_create(owner=bob).plaintext)
    alice_saver = MemoryAdminSaver(live_server.url, alice_key)
    try:
        config = {"configurable": {"thread_id": "alices", "checkpoint_ns": ""}}
        checkpoint = {"v": 4, "id": "c-1", "ts": "2026-01-01T00:00:00+00:00", "channel_values": {}, "channel_versions": {}, "versions_seen": {}}
        alice_saver.put(config, checkpoint, {"source": "input", "step": -1}, {})

        with pytest.raises(MemoryAdminForbidden) as forbidden:
            bob_saver.get_tuple(config)
        assert forbidden.value.status_code == 403 and isinstance(forbidden.value, PermissionError)
        with pytest.raises(MemoryAdminForbidden):
            bob_saver.put(config, {**checkpoint, "id": "c-2"}, {}, {})
        with pytest.raises(MemoryAdminNotFound):
            alice_saver.copy_thread("no-such-thread", "copy")
        with pytest.raises(MemoryAdminInvalid) as invalid:
            alice_saver.put({"configurable": {"thread_id": "has space"}}, checkpoint, {}, {})
        assert "thread_id" in invalid.value.errors and isinstance(invalid.value, ValueError)
        assert alice_saver.get_tuple({"configurable": {"thread_id": "never-made"}}) is None
        assert list(alice_saver.list({"configurable": {"thread_id": "never-made"}})) == []

        apikey_revoke(prefix=alice_key.split("_")[1])
        with pytest.raises(MemoryAdminAuthError) as unauthorised:
            MemoryAdminSaver(live_server.url, alice_key).get_tuple(config)
        assert unauthorised.value.status_code == 401
    finally:
        bob_saver.close()
        alice_saver.close()
