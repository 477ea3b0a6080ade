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

Messages by reference (`MessageRefs`): inside the other values of a checkpoint (the
prebuilt ReAct agent's `Send` packets carry its whole state) and inside the writes of a
task run from a checkpoint, a list that starts with the very message objects of that
checkpoint's messages channel goes as `{"$messages": {"channel", "count", "append"}}`:
its first `count` messages are the channel's, then `append`. A task's writes name the
checkpoint (`"checkpoint": id`) whose messages they start with. The server puts them back on
every read (docs/checkpoints.md, "Send packets and task writes"). A plain dict with a
`$messages` key therefore travels as a blob, as one with `$blob` does.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import math
import operator
from collections.abc import Callable
from typing import Any

from langchain_core.load import dumpd
from langchain_core.load.serializable import Serializable
from langchain_core.messages import BaseMessage
from langgraph.checkpoint.base import Checkpoint
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from ..errors import MemoryAdminInvalid
from ..http import dumps_strict
from ..turns import take_turn

BLOB_KEY = "$blob"
MESSAGES_KEY = "$messages"
# Beside a message's envelope: the message itself as a blob, when the envelope only shows it
# (`ValueCodec.shown_envelope`).
EXACT_KEY = "$exact"

# LangGraph types sent in the `{"lc": 2}` constructor form, which JsonPlusSerializer
# revives without an allowlist (they are in its list of safe types).
LC2_TYPES = {("langgraph.types", "Interrupt"), ("langgraph.types", "Send"), ("langgraph.types", "Command")}


class _NotJson(Exception):
    """The value has no JSON form that reads back equal: it travels as a blob."""


def _reserved(value: dict[str, Any]) -> bool:
    """A plain dict shaped like an envelope would be read back as one: it must travel as a blob."""
    return BLOB_KEY in value or MESSAGES_KEY in value or value.get("lc") in (1, 2)


def _without_surrogates(value: Any) -> Any:
    """A body on the wire with each lone surrogate (a string that is not Unicode, so not storable
    as text) written as "?", as LangGraph's own serializer writes it (msgpack's UTF-8)."""
    kind = type(value)
    if kind is str:
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return value.encode("utf-8", "replace").decode("utf-8")
        return value
    if kind is list:
        return [_without_surrogates(item) for item in value]
    if kind is dict:
        return {_without_surrogates(key): _without_surrogates(item) for key, item in value.items()}
    return value


def _shown(value: Any, depth: int = 0) -> Any:
    """A value as JSON the server stores and shows: U+0000 (which PostgreSQL's JSONB cannot
    hold) as U+FFFD, what has no JSON form as its repr."""
    kind = type(value)
    if kind is str:
        return value.replace("\x00", "\ufffd")
    if value is None or kind is bool or kind is int and _INT_MIN <= value < _INT_MAX or kind is float and math.isfinite(value):
        return value
    if depth < 32 and (kind is list or kind is tuple):
        return [_shown(item, depth + 1) for item in value]
    if depth < 32 and kind is dict:
        return {_shown(str(key)): _shown(item, depth + 1) for key, item in value.items()}
    return _shown(repr(value))


def _has_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any("\x00" in key or _has_nul(item) for key, item in value.items())
    if isinstance(value, list):
        return any(_has_nul(item) for item in value)
    return False


_INT_MIN, _INT_MAX = -(2**63), 2**64


def _plain(value: Any, depth: int = 0) -> bool:
    """Whether a value is JSON as it stands (exact types, storable, not envelope-shaped):
    what json.loads(json.dumps(value)) gives back unchanged. Loops rather than generators,
    and strings (most items) checked in line: it runs over every message of a step."""
    kind = type(value)
    if kind is str:
        return "\x00" not in value
    if value is None or kind is bool:
        return True
    if kind is int:
        return _INT_MIN <= value < _INT_MAX
    if kind is float:
        return math.isfinite(value)
    if depth > 64:
        return False
    if kind is list:
        for item in value:
            if type(item) is str:
                if "\x00" in item:
                    return False
            elif not _plain(item, depth + 1):
                return False
        return True
    if kind is dict:
        if _reserved(value):
            return False
        for key, item in value.items():
            if type(key) is not str or "\x00" in key:
                return False
            if type(item) is str:
                if "\x00" in item:
                    return False
            elif not _plain(item, depth + 1):
                return False
        return True
    return False


_REQUIRED = object()
_EXCLUDED = object()


class _MessageShape:
    """How LangChain's `to_json` writes one message class, read once: its id and each field's
    default, so that a message whose fields are plain JSON is written without `dumpd`'s
    JSON round trip and without reviving it to check (it revives equal: the fields are the
    constructor's arguments, as they are)."""

    def __init__(self, kind: type) -> None:
        self.id = kind.lc_id()
        self.attributes = "lc_attributes" in kind.__dict__
        self.attribute_fields: tuple[str, ...] | None = None  # `_attribute_fields`
        # Per field written: its default (a factory's value made once), or REQUIRED.
        self.defaults: dict[str, Any] = {}
        self.excluded = tuple(name for name, info in kind.model_fields.items() if info.exclude)
        for name, info in kind.model_fields.items():
            if info.exclude:
                continue
            factory = info.default_factory
            self.defaults[name] = _REQUIRED if info.is_required() else factory() if factory is not None else info.default

    def envelope(self, message: Any) -> dict[str, Any] | None:
        # Runs over every message of a step, so in as few steps as can be, in one loop: a field is
        # written when set, or when falsy but not its default (a required one always: REQUIRED
        # equals nothing), each value written checked as JSON (the names are the fields': plain
        # strings); a falsy field that is not one (excluded) reads back as itself and is left out.
        default_of = self.defaults.get
        kwargs = {}
        for name, value in message.__dict__.items():
            if not value and default_of(name, value) == value:
                continue
            if type(value) is str:
                if "\x00" in value:
                    return None
            elif not _plain(value, 1):
                return None
            kwargs[name] = value
        for name in self.excluded:
            kwargs.pop(name, None)
        if self.attributes:
            # AIMessage's tool calls, as to_json adds them: read from the fields they are (see
            # `_attribute_fields`), else from the property.
            fields = self.attribute_fields
            extra = message.lc_attributes if fields is None else {name: message.__dict__[name] for name in fields}
            if type(extra) is not dict:
                return None
            for name, value in extra.items():
                # Most often the very values of fields checked above, or empty lists.
                if type(name) is not str or "\x00" in name:
                    return None
                if value is not kwargs.get(name, _EXCLUDED) and not (type(value) is list and not value) and not _plain(value, 1):
                    return None
            kwargs.update(extra)
        return {"lc": 1, "type": "constructor", "id": self.id, "kwargs": kwargs}


def _attribute_fields(kind: type, probe: Any) -> tuple[str, ...] | None:
    """The fields whose values a message class's `lc_attributes` gives as they are (AIMessage's
    `tool_calls`, `invalid_tool_calls`), seen on a message of that class: its property then need
    not run for every message (it builds its dict in Python). None when it gives anything else."""
    extra = probe.lc_attributes
    if type(extra) is not dict or not all(name in kind.model_fields and extra[name] is probe.__dict__.get(name) for name in extra):
        return None
    return tuple(extra)


def _message_shapes() -> dict[type, _MessageShape]:
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    shapes = {}
    for kind in (AIMessage, HumanMessage, SystemMessage, ToolMessage):
        probe = kind(content="", tool_call_id="x") if kind is ToolMessage else kind(content="")
        if not probe.lc_secrets and kind.is_lc_serializable():
            shape = shapes[kind] = _MessageShape(kind)
            if shape.attributes:
                shape.attribute_fields = _attribute_fields(kind, probe)
    return shapes


MESSAGE_SHAPES = _message_shapes()


_CONTENT = operator.attrgetter("content")


def _hooked(value: Any, hook: Callable[[dict[str, Any]], Any]) -> Any:
    """What `json.loads(json.dumps(value), object_hook=hook)` gives: each object's members first,
    then the object passed to `hook`; lists kept as lists. (`value` holds only what JSON parses to.)"""
    kind = type(value)
    if kind is dict:
        return hook({key: _hooked(item, hook) for key, item in value.items()})
    if kind is list:
        return [_hooked(item, hook) for item in value]
    return value


def contents_of(items: list[Any]) -> list[Any]:
    """Each item's `content` (None for an item without one): what says a message object was
    not edited in place since it was sent."""
    try:
        return list(map(_CONTENT, items))
    except AttributeError:
        return [getattr(item, "content", None) for item in items]


class MessageRefs:
    """The messages a value may hold by reference: a checkpoint's messages channel, as the
    server holds it. `contents` (the messages' contents when they were sent) says
    a message object was not edited in place since; `used` counts the markers made and
    `marked` names the channels of a checkpoint that hold one."""

    __slots__ = ("channel", "messages", "contents", "checkpoint", "used", "marked")

    def __init__(self, channel: str, messages: Any, contents: Any = None, checkpoint: str | None = None) -> None:
        self.channel, self.messages, self.contents, self.checkpoint = channel, messages, contents, checkpoint
        self.used = 0
        self.marked: list[str] = []

    def prefix(self, value: list[Any]) -> int:
        """How many of the list's first items are the channel's messages, the same objects (their
        content the same as when sent, with `contents`)."""
        messages, contents = self.messages, self.contents
        n = min(len(value), len(messages))
        # The whole run at once, in C; item by item below when it differs.
        if all(map(operator.is_, value[:n], messages[:n])) and (
            contents is None or all(map(operator.is_, contents_of(value[:n]), contents[:n]))
        ):
            return n
        count = 0
        for item, message in zip(value, messages):
            if item is not message or contents is not None and getattr(item, "content", None) is not contents[count]:
                break
            count += 1
        return count

    def longest_in(self, values: list[Any]) -> int:
        """The most of these messages a list inside `values` starts with (a `Send`'s state, say)."""
        first, best, stack = self.messages[0], 0, list(values)
        while stack:
            value = stack.pop()
            kind = type(value)
            if kind is list and value and value[0] is first:
                best = max(best, self.prefix(value))
            elif kind is list or kind is tuple:
                stack.extend(item for item in value if type(item) in (list, tuple, dict) or hasattr(item, "arg"))
            elif kind is dict:
                stack.extend(item for item in value.values() if type(item) in (list, tuple, dict) or hasattr(item, "arg"))
            elif hasattr(value, "arg") and hasattr(value, "node"):  # a Send
                stack.append(value.arg)
        return best


# Messages encoded in one turn of the event loop (`adump_items`): a few microseconds each.
ITEMS_A_TURN = 50


class ValueCodec:
    """Turns channel values into the wire format and back (see the module docstring)."""

    def __init__(self, serde: SerializerProtocol):
        self.serde = serde
        self.readable = isinstance(serde, JsonPlusSerializer)
        # JsonPlusSerializer reads JSON as `json.loads(text, object_hook=self._reviver)`: the same hook
        # applied to the values already parsed (`_hooked`) gives the same objects without writing
        # each envelope out and parsing it again. Any other serializer (or one that reads JSON its
        # own way) is asked through its `loads_typed`.
        reviver = getattr(serde, "_reviver", None)
        plain = self.readable and type(serde).loads_typed is JsonPlusSerializer.loads_typed
        self._hook = reviver if plain and callable(reviver) else None

    # to the wire

    def dump(self, value: Any, refs: MessageRefs | None = None) -> Any:
        if self.readable:
            try:
                return self._json(value, refs)
            except _NotJson:
                pass
            kind = type(value)
            if kind is list or kind is tuple:
                return [self.dump(item, refs) for item in value]
            if kind is dict and all(type(key) is str and "\x00" not in key for key in value) and not _reserved(value):
                return {key: self.dump(item, refs) for key, item in value.items()}
        type_, data = self.serde.dumps_typed(value)
        return {BLOB_KEY: {"type": type_, "base64": base64.b64encode(data).decode("ascii")}}

    def _json(self, value: Any, refs: MessageRefs | None = None) -> Any:
        """`value` as JSON that reads back equal, or _NotJson. Exact types only (no subclasses).
        With `refs`, a list starting with their messages becomes a marker."""
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
            if refs is not None and kind is list and value and refs.messages and value[0] is refs.messages[0]:
                count = refs.prefix(value)
                if count:
                    refs.used += 1
                    append = [self._json(item, refs) for item in value[count:]]
                    marker = {"channel": refs.channel, "count": count, "append": append}
                    if refs.checkpoint is not None:
                        marker["checkpoint"] = refs.checkpoint
                    return {MESSAGES_KEY: marker}
            # LangGraph's own serializer gives a tuple back as a list; so does this one.
            out = []
            for item in value:
                # A list of messages (the messages channel) is the common case: straight to the shape.
                shape = MESSAGE_SHAPES.get(type(item))
                envelope = shape.envelope(item) if shape is not None else None
                out.append(envelope if envelope is not None else self._json(item, refs))
            return out
        if kind is dict:
            if not all(type(key) is str and "\x00" not in key for key in value) or _reserved(value):
                raise _NotJson
            return {key: self._json(item, refs) for key, item in value.items()}
        if isinstance(value, BaseException):
            # LangGraph's own serializer keeps an error as its repr; so does this one.
            return repr(value).replace("\x00", "")
        shape = MESSAGE_SHAPES.get(kind)
        if shape is not None:
            envelope = shape.envelope(value)
            if envelope is not None:
                return envelope
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
            used = refs.used if refs is not None else 0
            envelope = {"lc": 2, "type": "constructor", "id": [*module.split("."), name], "kwargs": {k: self._json(v, refs) for k, v in kwargs.items()}}
            if refs is not None and refs.used != used:
                # Its fields are exact JSON (`_json`) but for the markers, which the server
                # puts back as the messages they stand for: it revives equal, unchecked.
                return envelope
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
        """An envelope built here, read back as the server will give it: written out as strict JSON
        first (what is not JSON raises), then read by the serializer."""
        text = json.dumps(envelope, ensure_ascii=False, allow_nan=False)
        return self.serde.loads_typed(("json", text.encode()))

    def _revive_parsed(self, envelope: dict[str, Any]) -> Any:
        """An envelope parsed from the wire (JSON already): the serializer's hook on it, when the
        serializer reads JSON with one, instead of writing it out and parsing it again."""
        hook = self._hook
        if hook is not None:
            return _hooked(envelope, hook)
        return self._revive(envelope)

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
                exact = value.get(EXACT_KEY)
                if isinstance(exact, dict) and isinstance(exact.get(BLOB_KEY), dict):
                    blob = exact[BLOB_KEY]
                    return self.serde.loads_typed((blob["type"], base64.b64decode(blob["base64"])))
                return self._revive_parsed(value)
            return {key: self.load(item) for key, item in value.items()}
        return value

    def dump_items(self, items: list[Any], start: int = 0, stop: int | None = None) -> list[Any]:
        """`dump` of each of `items[start:stop]`: what `dump` makes of the list when the serializer
        is JSON's (a list's items are dumped one by one)."""
        if not self.readable:
            return [self.dump(item) for item in items[start:stop]]
        out = []
        shapes = MESSAGE_SHAPES
        for item in items[start:stop]:
            shape = shapes.get(type(item))  # a message (most items) straight to its shape
            envelope = shape.envelope(item) if shape is not None else None
            if envelope is None:
                envelope = self.dump(item)
                if isinstance(item, BaseMessage) and BLOB_KEY in envelope:  # a message's dump: an envelope or a blob
                    envelope = self.shown_envelope(item, envelope)
            out.append(envelope)
        return out

    @staticmethod
    def shown_envelope(message: BaseMessage, blob: dict[str, Any]) -> dict[str, Any]:
        """A message with no exact JSON form (a string holding U+0000, bytes in its fields) as an
        envelope that shows it, its strings' U+0000 as U+FFFD and other values as their repr, the
        message itself beside it as a blob (`$exact`), which is what reads back: so it is one of
        the thread's conversation like any other message and reads back exactly."""
        kind = type(message)
        kwargs = {name: _shown(value) for name, value in message.__dict__.items() if value or name == "content"}
        if not isinstance(kwargs.get("content"), str | list):
            kwargs["content"] = _shown(repr(message.content))
        ident = list(kind.lc_id()) if hasattr(kind, "lc_id") else ["langchain_core", "messages", kind.__name__]
        return {"lc": 1, "type": "constructor", "id": ident, "kwargs": kwargs, EXACT_KEY: blob}

    async def adump_items(self, items: list[Any], start: int = 0) -> list[Any]:
        """`dump_items` on the event loop, `ITEMS_A_TURN` items in each of its turns (`turns`)."""
        out: list[Any] = []
        for first in range(start, len(items), ITEMS_A_TURN):
            await take_turn()
            out += self.dump_items(items, first, first + ITEMS_A_TURN)
        return out

    def dump_checkpoint(
        self, checkpoint: Checkpoint, *, leave_out: str | None = None, refs: MessageRefs | None = None,
        dumped: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The checkpoint on the wire; `leave_out` names a channel sent apart (the messages of a
        delta); `dumped` holds channels already on the wire (`dump_items`); with `refs` (its own
        messages channel) the other channels hold those messages by reference, and `refs.marked`
        names the channels that do."""
        body = {key: self.dump(item) for key, item in checkpoint.items() if key != "channel_values"}
        values = {}
        for name, item in checkpoint.get("channel_values", {}).items():
            if name == leave_out:
                continue
            if dumped is not None and name in dumped:
                values[name] = dumped[name]
                continue
            if refs is None or name == refs.channel:
                values[name] = self.dump(item)
                continue
            used = refs.used
            values[name] = self.dump(item, refs)
            if refs.used != used:
                refs.marked.append(name)
        body["channel_values"] = values
        return body

    @staticmethod
    def encode(body: Any) -> bytes:
        """A body made of what `dump` gives (strict JSON by construction) as JSON bytes (`written`)."""
        return ValueCodec.written(body)[0]

    @staticmethod
    def written(body: Any) -> tuple[bytes, bool]:
        """`encode`, and whether the bytes hold the body exactly: in one pass and without reading
        it back (orjson where installed, `http.dumps_strict`). A string holding a lone surrogate,
        which no encoder writes as UTF-8, fails that pass: the body is then written again with
        "?" in its place, as LangGraph's own savers store it (not exactly, then)."""
        try:
            return dumps_strict(body), True
        except MemoryAdminInvalid:
            return dumps_strict(_without_surrogates(body)), False

    def load_checkpoint(self, body: dict[str, Any]) -> Checkpoint:
        checkpoint = {key: self.load(item) for key, item in body.items() if key != "channel_values"}
        checkpoint["channel_values"] = {name: self.load(item) for name, item in (body.get("channel_values") or {}).items()}
        return checkpoint  # type: ignore[return-value]


__all__ = ["BLOB_KEY", "EXACT_KEY", "LC2_TYPES", "MESSAGES_KEY", "MessageRefs", "ValueCodec", "contents_of"]
