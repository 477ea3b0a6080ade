"""The saver's wire format for channel values: readable JSON where it round-trips, typed blobs otherwise.

A channel value that LangGraph's serializer (`JsonPlusSerializer`) can express
as JSON is sent as JSON: plain JSON as is, LangChain messages in LangChain's
serialised form (`{"lc": 1, ...}`), a few LangGraph types (`Interrupt`, `Send`,
`Command`) in the constructor form that serializer revives (`{"lc": 2, ...}`).
Every such value is checked to come back equal before it is sent that way (a
tuple comes back as a list, as it does from LangGraph's own serializer);
anything else (bytes, sets, datetimes, custom classes) goes as a typed blob
`{"$blob": {"type", "base64"}}` made by the saver's serializer, which
round-trips exactly. A serializer other than `JsonPlusSerializer` (an
encrypting one, say) makes every value a blob.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import math
from typing import Any

from langchain_core.load import dumpd
from langchain_core.load.serializable import Serializable
from langgraph.checkpoint.base import Checkpoint
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

BLOB_KEY = "$blob"

# LangGraph types sent in the `{"lc": 2}` constructor form, which JsonPlusSerializer
# revives without an allowlist (they are in its list of safe types).
LC2_TYPES = {("langgraph.types", "Interrupt"), ("langgraph.types", "Send"), ("langgraph.types", "Command")}


class _NotJson(Exception):
    """The value has no JSON form that reads back equal: it travels as a blob."""


def _reserved(value: dict[str, Any]) -> bool:
    """A plain dict shaped like an envelope would be read back as one: it must travel as a blob."""
    return BLOB_KEY in value or value.get("lc") in (1, 2)


def _has_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any("\x00" in key or _has_nul(item) for key, item in value.items())
    if isinstance(value, list):
        return any(_has_nul(item) for item in value)
    return False


class ValueCodec:
    """Turns channel values into the wire format and back (see the module docstring)."""

    def __init__(self, serde: SerializerProtocol):
        self.serde = serde
        self.readable = isinstance(serde, JsonPlusSerializer)

    # to the wire

    def dump(self, value: Any) -> Any:
        if self.readable:
            try:
                return self._json(value)
            except _NotJson:
                pass
            kind = type(value)
            if kind is list or kind is tuple:
                return [self.dump(item) for item in value]
            if kind is dict and all(type(key) is str and "\x00" not in key for key in value) and not _reserved(value):
                return {key: self.dump(item) for key, item in value.items()}
        type_, data = self.serde.dumps_typed(value)
        return {BLOB_KEY: {"type": type_, "base64": base64.b64encode(data).decode("ascii")}}

    def _json(self, value: Any) -> Any:
        """`value` as JSON that reads back equal, or _NotJson. Exact types only (no subclasses)."""
        kind = type(value)
        if value is None or kind is bool:
            return value
        if kind is int:
            # The server reads JSON numbers as 64-bit integers; a larger one would come back a float.
            if not -(2**63) <= value < 2**64:
                raise _NotJson
            return value
        if kind is str:
            if "\x00" in value:  # PostgreSQL's JSONB cannot hold U+0000
                raise _NotJson
            return value
        if kind is float:
            if not math.isfinite(value):
                raise _NotJson
            return value
        if kind is list or kind is tuple:
            # LangGraph's own serializer gives a tuple back as a list; so does this one.
            return [self._json(item) for item in value]
        if kind is dict:
            if not all(type(key) is str and "\x00" not in key for key in value) or _reserved(value):
                raise _NotJson
            return {key: self._json(item) for key, item in value.items()}
        if isinstance(value, BaseException):
            # LangGraph's own serializer keeps an error as its repr; so does this one.
            return repr(value).replace("\x00", "")
        if isinstance(value, Serializable) and value.is_lc_serializable():
            return self._checked(value, dumpd(value))
        module, name = kind.__module__, kind.__name__
        if (module, name) in LC2_TYPES:
            if name == "Send":
                if getattr(value, "timeout", None) is not None:
                    raise _NotJson
                kwargs = {"node": value.node, "arg": value.arg}
            elif dataclasses.is_dataclass(value):
                # Fields left at their default are left out: the constructor restores them
                # exactly (a default tuple would otherwise come back as a list).
                kwargs = {
                    f.name: getattr(value, f.name)
                    for f in dataclasses.fields(value)
                    if f.init and not (f.default is not dataclasses.MISSING and getattr(value, f.name) == f.default)
                }
            else:
                raise _NotJson
            envelope = {"lc": 2, "type": "constructor", "id": [*module.split("."), name], "kwargs": {k: self._json(v) for k, v in kwargs.items()}}
            return self._checked(value, envelope)
        raise _NotJson

    def _checked(self, value: Any, envelope: Any) -> Any:
        if not isinstance(envelope, dict) or envelope.get("type") != "constructor" or _has_nul(envelope):
            raise _NotJson
        try:
            revived = self._revive(envelope)
        except Exception:
            raise _NotJson from None
        if type(revived) is not type(value) or revived != value:
            raise _NotJson
        return envelope

    def _revive(self, envelope: dict[str, Any]) -> Any:
        text = json.dumps(envelope, ensure_ascii=False, allow_nan=False)
        return self.serde.loads_typed(("json", text.encode()))

    # from the wire

    def load(self, value: Any) -> Any:
        kind = type(value)
        if kind is list:
            return [self.load(item) for item in value]
        if kind is dict:
            blob = value.get(BLOB_KEY)
            if len(value) == 1 and isinstance(blob, dict):
                return self.serde.loads_typed((blob["type"], base64.b64decode(blob["base64"])))
            if value.get("lc") in (1, 2) and value.get("type") == "constructor":
                return self._revive(value)
            return {key: self.load(item) for key, item in value.items()}
        return value

    def dump_checkpoint(self, checkpoint: Checkpoint, *, leave_out: str | None = None) -> dict[str, Any]:
        """The checkpoint on the wire; `leave_out` names a channel sent apart (the messages of a delta)."""
        body = {key: self.dump(item) for key, item in checkpoint.items() if key != "channel_values"}
        body["channel_values"] = {
            name: self.dump(item) for name, item in checkpoint.get("channel_values", {}).items() if name != leave_out
        }
        return body

    def load_checkpoint(self, body: dict[str, Any]) -> Checkpoint:
        checkpoint = {key: self.load(item) for key, item in body.items() if key != "channel_values"}
        checkpoint["channel_values"] = {name: self.load(item) for name, item in (body.get("channel_values") or {}).items()}
        return checkpoint  # type: ignore[return-value]


__all__ = ["BLOB_KEY", "LC2_TYPES", "ValueCodec"]
