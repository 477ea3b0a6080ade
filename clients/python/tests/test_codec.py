"""The saver's wire format: readable JSON where it round-trips, typed blobs otherwise."""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timezone

import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.types import Command, Interrupt, Send

from memoryadmin_client.langgraph import BLOB_KEY, ValueCodec

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


def test_an_error_value_is_kept_as_its_repr_as_langgraphs_serializer_keeps_it():
    assert wire(ValueError("bad\x00input")) == "ValueError('bad\\x00input')".replace("\x00", "")


def test_a_checkpoint_travels_with_each_channel_value_encoded_and_comes_back_whole():
    checkpoint = {
        "v": 4,
        "id": "c-1",
        "ts": "2026-01-01T00:00:00+00:00",
        "channel_values": {"messages": [HumanMessage("hi", id="h")], "raw": b"\x01\x02", "count": 3},
        "channel_versions": {"messages": "00000000000000000000000000000001.0"},
        "versions_seen": {"agent": {"messages": "00000000000000000000000000000001.0"}},
    }
    sent = json.loads(json.dumps(codec.dump_checkpoint(checkpoint), allow_nan=False))
    values = sent["channel_values"]
    assert values["messages"][0]["lc"] == 1 and is_blob(values["raw"]) and values["count"] == 3
    assert sent["versions_seen"] == checkpoint["versions_seen"]
    assert codec.load_checkpoint(sent) == checkpoint


def _envelopes():
    from langchain_core.load import dumpd
    from langchain_core.messages import AIMessage, ToolMessage

    ai = AIMessage(content=[{"type": "text", "text": "hi"}], id="a1", tool_calls=[{"name": "f", "args": {"x": [1, 2.5]}, "id": "c1"}],
                   additional_kwargs={"nested": {"deep": [{"k": None}]}}, response_metadata={"model": "m"})
    codec = ValueCodec(JsonPlusSerializer())
    return [
        dumpd(HumanMessage(content="hello", id="h1")),
        dumpd(ai),
        dumpd(ToolMessage(content="18 °C", tool_call_id="c1", id="t1")),
        codec.dump(Send("tools", {"messages": [HumanMessage(content="x", id="h2")], "n": 1})),
        codec.dump(Interrupt(value={"ask": "why?"}, id="i1")),
        {"lc": 1, "type": "constructor", "id": ["not", "allowed", "Thing"], "kwargs": {}},
    ]


@pytest.mark.parametrize("envelope", _envelopes())
def test_a_value_is_revived_as_langgraphs_serializer_reads_its_json(envelope):
    """The codec revives parsed envelopes with the serializer's own hook, without writing them out again."""
    serde = JsonPlusSerializer()
    codec = ValueCodec(serde)
    assert codec._hook is not None
    try:
        expected = serde.loads_typed(("json", json.dumps(envelope).encode()))
    except Exception as exc:  # a class LangChain does not revive: the same refusal
        with pytest.raises(type(exc)):
            codec.load(envelope)
        return
    revived = codec.load(envelope)
    assert type(revived) is type(expected) and revived == expected


def test_a_value_that_is_not_json_is_still_sent_as_a_blob():
    """The check of an envelope built for sending still writes it out as strict JSON."""
    from langchain_core.messages import AIMessage

    codec = ValueCodec(JsonPlusSerializer())
    dumped = codec.dump(AIMessage(content="x", id="a", additional_kwargs={"at": (1, 2), "nan": float("nan")}))
    assert BLOB_KEY in dumped and codec.load(dumped).content == "x"


def test_a_serializer_reading_json_its_own_way_is_asked_through_loads_typed():
    class Own(JsonPlusSerializer):
        def loads_typed(self, data):
            return ("own", data[0])

    codec = ValueCodec(Own())
    assert codec._hook is None
    assert codec.load({"lc": 1, "type": "constructor", "id": ["x"], "kwargs": {}}) == ("own", "json")


def test_a_message_with_no_exact_json_form_is_shown_and_carried_exactly():
    """U+0000 (which PostgreSQL's JSONB cannot hold) or bytes in a message: the messages channel
    still gets an envelope, which shows it, and the message itself beside it reads back."""
    from langchain_core.messages import AIMessage

    from memoryadmin_client.langgraph.codec import EXACT_KEY

    messages = [
        HumanMessage("plain", id="h1"),
        AIMessage("a nul \x00 here", id="a1", additional_kwargs={"raw": b"\x00\xff", "k\x00": 1}),
    ]
    items = json.loads(codec.encode(codec.dump_items(messages)))
    assert EXACT_KEY not in items[0] and items[0]["kwargs"]["content"] == "plain"
    assert is_blob(items[1][EXACT_KEY])
    shown = items[1]
    assert shown["lc"] == 1 and shown["id"][-1] == "AIMessage"
    assert shown["kwargs"]["content"] == "a nul \ufffd here"
    assert shown["kwargs"]["additional_kwargs"] == {"raw": repr(b"\x00\xff"), "k\ufffd": 1}
    assert "\x00" not in json.dumps(shown)
    assert [codec.load(item) for item in items] == messages
    # Whatever else a channel holds is dumped as ever.
    assert codec.dump_items([1, "$blob", [2]]) == [1, "$blob", [2]]


def test_a_lone_surrogate_is_written_as_langgraph_s_own_serializer_writes_it():
    """Not Unicode, so no encoder writes it as UTF-8: "?" in its place, as msgpack stores it."""
    value = {"text": "broken \ud83d emoji", "list": ["ok", "x\udfff"]}
    serde = JsonPlusSerializer()
    assert json.loads(codec.encode(codec.dump(value))) == serde.loads_typed(serde.dumps_typed(value))
    assert json.loads(codec.encode(codec.dump({"k\ud800": 1}))) == {"k?": 1}  # (msgpack refuses a key)
    assert json.loads(codec.encode({"fine": "é ✓"})) == {"fine": "é ✓"}
