"""Messages inside other values, held by reference to a checkpoint's messages channel
(docs/checkpoints.md, "Send packets and task writes").

The prebuilt ReAct agent routes each tool call with `Send("tools", {"tool_call", "state"})`,
whose `state` is the agent's whole state: its messages. Those packets are the pending writes
of the agent's task and then the `__pregel_tasks` channel of the next checkpoint, so a
thread that copied them would grow with the square of its conversation. `MemoryAdminSaver`
sends such a list as a marker instead,

    {"$messages": {"channel": "messages", "count": n, "append": [message...]}}

"the first `n` messages of the `channel` of the checkpoint this value belongs to (for a
pending write: the checkpoint it is written against), then `append`", and names where the
markers are: a put's `refs` lists the channels holding them, a write's `refs: true` says
its value does. Nothing else is ever read as a marker, so a value from any other client
stays what it is.

The markers are stored as sent (the checkpoint's `refs`, the write's `refers`) and put back
on every read: the messages channel is read first (from the thread's blocks when held by
reference, `conversation.py`), then each marker becomes that list's first `n` messages and
its `append`. A checkpoint's markers refer to its own messages, which change only with the
row. A write's markers may name another checkpoint of the thread (LangGraph sends a task's
writes while the put of their checkpoint is still on its way, so the saver refers to the
checkpoint it last put or read there); the server stores them as references to that
checkpoint's blocks (`writes_resolve`), which stay whatever becomes of that checkpoint, so
every value reads back exactly as it was put. Only retention's purge deletes blocks, and it
removes the writes whose markers hold one with them (holding.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db.models.fields.json import KeyTransform

from memoryadmin.errors import InvalidInput, PreconditionFailed

from .models import Checkpoint, CheckpointValue, CheckpointWrite

MARKER = "$messages"
MARKER_KEYS = frozenset({"channel", "count", "append"})


def is_marker(value: Any) -> bool:
    return type(value) is dict and len(value) == 1 and MARKER in value


def _invalid(where: str, message: str) -> InvalidInput:
    return InvalidInput(f"{where} {message}", fields={where: [message]})


def refs_input(value: Any, channel_values: dict[str, Any]) -> list[str] | None:
    """A put's `refs`: the channels of `channel_values` holding markers (a list of their names)."""
    if value in (None, []):
        return None
    if not isinstance(value, list) or not all(isinstance(name, str) for name in value) or len(set(value)) != len(value):
        raise _invalid("refs", "must be a list of distinct channel names.")
    for name in value:
        if name not in channel_values:
            raise _invalid("refs", f"names {name[:80]!r}, which channel_values does not hold.")
        markers_of(channel_values[name], f"checkpoint.channel_values.{name[:80]}")
    return list(value)


def markers_fit(value: Any, where: str, lengths: Callable[[str], int | None], *, refused=None) -> None:
    """Each marker of `value` names a channel the checkpoint holds as a list of at least `count`
    items, else `refused` (a 400 naming `where` by default; a write's is a 412)."""
    for marker in markers_of(value, where):
        length = lengths(marker["channel"])
        if length is None or marker["count"] > length:
            if refused is not None:
                raise refused
            raise _invalid(
                where, f"refers to {marker['count']} messages of {marker['channel'][:80]!r}, which this checkpoint does not hold."
            )


def refs_check(refs: list[str] | None, channel_values: dict[str, Any], lengths: Callable[[str], int | None]) -> None:
    """A put's markers fit its own messages: a channel not among the marked ones, long enough."""
    for name in refs or ():
        where = f"checkpoint.channel_values.{name[:80]}"

        def fitting(channel: str, _name: str = name) -> int | None:
            return None if channel in refs else lengths(channel)

        markers_fit(channel_values[name], where, fitting)


def list_lengths(channel_values: dict[str, Any], held: dict[str, int] | None = None) -> Callable[[str], int | None]:
    """The length of a channel's list: `held` first (a channel kept as blocks), else its value."""

    def length(channel: str) -> int | None:
        if held and channel in held:
            return held[channel]
        value = channel_values.get(channel)
        return len(value) if isinstance(value, list) else None

    return length


# --- reading ------------------------------------------------------------------------------------


def expand(value: Any, channel_values: dict[str, Any]) -> Any:
    """The value with every marker put back as the messages it stands for."""
    if type(value) is dict:
        if MARKER in value and len(value) == 1 and type(value[MARKER]) is dict:
            inner = value[MARKER]
            messages = channel_values.get(inner.get("channel"))
            head = messages[: inner.get("count", 0)] if isinstance(messages, list) else []
            tail = inner.get("append")
            return [*head, *(tail if isinstance(tail, list) else [])]
        return {key: expand(item, channel_values) for key, item in value.items()}
    if type(value) is list:
        return [expand(item, channel_values) for item in value]
    return value


def checkpoints_expand(rows: list) -> list:
    """Every marked channel of these checkpoints put back in full (their messages channel
    already read back): in memory, no query."""
    for row in rows:
        refs = row.__dict__.get("refs")
        values = row.checkpoint.get("channel_values") if isinstance(row.checkpoint, dict) else None
        if not refs or not isinstance(refs, list) or not isinstance(values, dict):
            continue
        for name in refs:
            if name in values:
                values[name] = expand(values[name], values)
    return rows


# --- pending writes: markers stored as references to blocks ------------------------------------


def markers_of(value: Any, where: str, *, named: bool = False) -> list[dict[str, Any]]:
    """Every marker inside a value (not inside another marker's `append`), each checked for
    its shape; a malformed one is a 400 naming `where`. A write's markers (`named`) may name
    the checkpoint they refer to."""
    found, stack = [], [value]
    while stack:
        item = stack.pop()
        if type(item) is dict:
            if MARKER in item:
                inner = item[MARKER]
                keys = inner.keys() if type(inner) is dict else set()
                if (
                    len(item) != 1
                    or type(inner) is not dict
                    or not (keys == MARKER_KEYS or named and keys == MARKER_KEYS | {"checkpoint"})
                    or type(inner["channel"]) is not str
                    or type(inner["count"]) is not int
                    or inner["count"] < 0
                    or type(inner["append"]) is not list
                    or type(inner.get("checkpoint", "")) is not str
                ):
                    shape = '{"$messages": {"channel", "count", "append"%s}}' % (', "checkpoint"?' if named else "")
                    raise _invalid(where, f"holds a malformed {shape} marker.")
                found.append(inner)
                continue
            stack.extend(item.values())
        elif type(item) is list:
            stack.extend(item)
    return found


class _Held:
    """A stored write's marker as `conversation.checkpoints_hydrate` reads a checkpoint: the
    blocks it names are put into `checkpoint["channel_values"]`."""

    def __init__(self, thread_id: int, ref: dict[str, Any]) -> None:
        self.thread_id, self.messages_ref, self.checkpoint = thread_id, ref, {"channel_values": {}}

    @property
    def messages(self) -> list[Any]:
        found = self.checkpoint["channel_values"].get(self.messages_ref.get("channel"))
        return found if isinstance(found, list) else []


def stored_markers(value: Any) -> list[dict[str, Any]]:
    """The markers of a stored write's value (`{"ref", "count", "append"}` once resolved)."""
    found, stack = [], [value]
    while stack:
        item = stack.pop()
        if type(item) is dict:
            inner = item.get(MARKER)
            if len(item) == 1 and type(inner) is dict:
                found.append(inner)
            else:
                stack.extend(item.values())
        elif type(item) is list:
            stack.extend(item)
    return found


def writes_held(writes: list[CheckpointWrite]) -> list[_Held]:
    """What the writes holding markers refer to, for `checkpoints_hydrate` to read together with
    the checkpoints (one query for all); `writes_expand` then puts them in."""
    held = []
    for write in writes:
        if write.refers:
            write.held = []
            for marker in stored_markers(write.value):
                ref = marker.get("ref")
                item = _Held(write.thread_id, ref) if isinstance(ref, dict) else None
                write.held.append((id(marker), item))
                if item is not None:
                    held.append(item)
    return held


def _expand_stored(value: Any, held: dict[int, _Held | None]) -> Any:
    if type(value) is dict:
        inner = value.get(MARKER)
        if len(value) == 1 and type(inner) is dict:
            item = held.get(id(inner))
            count = inner.get("count") if type(inner.get("count")) is int else 0
            tail = inner.get("append")
            return [*(item.messages[:count] if item is not None else []), *(tail if isinstance(tail, list) else [])]
        return {key: _expand_stored(item, held) for key, item in value.items()}
    if type(value) is list:
        return [_expand_stored(item, held) for item in value]
    return value


def writes_expand(writes: list[CheckpointWrite]) -> None:
    """The writes' markers put back as the messages they stand for (once `writes_held` are read)."""
    for write in writes:
        held = getattr(write, "held", None)
        if write.refers and held is not None:
            write.value = _expand_stored(write.value, dict(held))
            write.refers, write.held = False, None


def writes_resolve(*, thread, checkpoint_ns: str, checkpoint_id: str, values: dict[int, Any]) -> dict[int, tuple[Any, bool]]:
    """A put_writes' marked values as stored: each marker names the blocks of the checkpoint it
    refers to (the one written against, or the one it names) as `{"ref": messages_ref,
    "count", "append"}`, or is written out in full when that checkpoint holds its messages
    itself. One query. A checkpoint not stored (yet), or holding fewer messages, is a 412 and
    nothing is written: the client sends the writes whole. Answers {index: (value, refers)}."""
    markers = writes_markers(values)
    ids = referred_ids(markers, checkpoint_id)
    channels = sorted({marker["channel"] for found in markers.values() for marker in found})[:8]
    inline = {f"c{i}": KeyTransform(name, KeyTransform("channel_values", "checkpoint")) for i, name in enumerate(channels)}
    rows = {
        row["checkpoint_id"]: row
        for row in Checkpoint.objects.filter(thread=thread, checkpoint_ns=checkpoint_ns, checkpoint_id__in=ids).values(
            "checkpoint_id", "messages_ref", "values_ref", **inline
        )
    }

    def held(row: dict[str, Any], channel: str) -> Any:
        """The channel's list in that checkpoint's row, or stored by version (one more query)."""
        if channel in channels and row.get(f"c{channels.index(channel)}") is not None:
            return row[f"c{channels.index(channel)}"]
        ref = (row["values_ref"] or {}).get(channel) if isinstance(row["values_ref"], dict) else None
        if not (isinstance(ref, list) and len(ref) == 2):
            return None
        found = CheckpointValue.objects.filter(
            thread=thread, checkpoint_ns=checkpoint_ns, channel=channel, version=ref[0], digest=ref[1]
        ).values_list("value", flat=True).first()
        return found

    return writes_rebuilt(values, rows, checkpoint_id, held)


def writes_markers(values: dict[int, Any]) -> dict[int, list[dict[str, Any]]]:
    """Each marked value's markers, checked for their shape (a 400 naming the write)."""
    return {index: markers_of(value, f"writes[{index}].value", named=True) for index, value in values.items()}


def referred_ids(markers: dict[int, list[dict[str, Any]]], checkpoint_id: str) -> set[str]:
    """The checkpoints the markers refer to: the one written against, or the one each names."""
    return {marker.get("checkpoint") or checkpoint_id for found in markers.values() for marker in found}


def writes_rebuilt(
    values: dict[int, Any], rows: dict[str, dict[str, Any]], checkpoint_id: str, held: Callable[[dict[str, Any], str], Any]
) -> dict[int, tuple[Any, bool]]:
    """The marked values as stored, from the referred checkpoints' rows (`rows` by checkpoint id,
    each with its `messages_ref`); `held(row, channel)` gives the list of a checkpoint that holds
    its messages itself. A 412 (`write_refused`) when a checkpoint is missing or holds fewer."""

    def stored(marker: dict[str, Any]) -> Any:
        row = rows.get(marker.get("checkpoint") or checkpoint_id)
        if row is None:
            raise write_refused()
        ref, count = row["messages_ref"], marker["count"]
        if isinstance(ref, dict) and ref.get("channel") == marker["channel"] and isinstance(ref.get("count"), int):
            if count > ref["count"]:
                raise write_refused()
            return {MARKER: {"ref": ref, "count": count, "append": marker["append"]}}
        messages = held(row, marker["channel"])
        if not isinstance(messages, list) or count > len(messages):
            raise write_refused()
        return [*messages[:count], *marker["append"]]

    def rebuilt(value: Any) -> Any:
        if type(value) is dict:
            if MARKER in value:
                return stored(value[MARKER])
            return {key: rebuilt(item) for key, item in value.items()}
        if type(value) is list:
            return [rebuilt(item) for item in value]
        return value

    answer = {}
    for index, value in values.items():
        value = rebuilt(value)
        answer[index] = (value, bool(stored_markers(value)))
    return answer


def write_refused() -> PreconditionFailed:
    return PreconditionFailed(
        "The checkpoint these writes refer to does not hold those messages (not stored yet); send the writes whole.",
        fields={"writes": ["refer to messages the checkpoint does not hold."]},
    )
