"""The saver's wire format as the server reads it (messages, blobs on the dashboard), and its errors over HTTP.

The codec's own rules are tested without a server in clients/python/tests/test_codec.py.
"""

from __future__ import annotations

import base64
import json

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

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
from sessions_app.checkpoints import wire as wire_format

codec = ValueCodec(JsonPlusSerializer())


def wire(value):
    """Through JSON text, as the server stores and returns it."""
    return json.loads(json.dumps(codec.dump(value), allow_nan=False))


def roundtrip(value):
    return codec.load(wire(value))


def is_blob(value) -> bool:
    return isinstance(value, dict) and set(value) == {BLOB_KEY}


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
    assert [(m.role, m.content) for m in wire_format.message_list(sent)] == [
        ("system", "Be brief."),
        ("user", "What is 6 x 7?"),
        ("assistant", ""),
        ("tool", "42"),
        ("assistant", "6 x 7 = 42"),
    ]


def test_the_dashboard_never_shows_blob_bytes():
    sent = wire({"raw": b"\x00secret-bytes"})
    shown = wire_format.readable(sent)
    assert shown["raw"].startswith("<binary value (bytes, 13 bytes)")
    assert base64.b64encode(b"\x00secret-bytes").decode() not in json.dumps(shown)


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


def test_plain_messages_are_written_as_langchain_writes_them_without_its_round_trip():
    from langchain_core.load import dumpd

    codec = ValueCodec(JsonPlusSerializer())
    plain = [
        HumanMessage("hi", id="h-1"),
        AIMessage("", id="a-1", tool_calls=[{"name": "f", "args": {"x": 1}, "id": "c-1"}],
                  usage_metadata={"input_tokens": 1, "output_tokens": 2, "total_tokens": 3}),
        ToolMessage("42", tool_call_id="c-1", name="f", id="t-1"),
        SystemMessage([{"type": "text", "text": "be brief"}]),
        AIMessage("x", additional_kwargs={"lc": 1}),  # envelope-shaped inside: not plain, sent apart
    ]
    for message in plain:
        wire = codec.dump(message)
        assert codec.load(wire) == message
        if BLOB_KEY not in wire:
            assert wire == dumpd(message)
    odd = AIMessage("x", additional_kwargs={"raw": b"\x00\x01"})
    assert set(codec.dump(odd)) == {BLOB_KEY} and codec.load(codec.dump(odd)) == odd
