"""A LangGraph thread's messages as its conversation (docs/checkpoints.md, "Conversation").

The messages channel of a thread's root checkpoints (`messages`, or
MEMORYADMIN_LANGGRAPH_MESSAGES_CHANNEL, or the first channel holding LangChain messages:
`conversation_channel`) is kept as the thread's blocks, through the
conversation store's own saves (`sessions_app.threads`): each message once, in order, on
the hash chain, the title from the first user message. A checkpoint then holds the channel
by reference, `messages_ref = {"channel", "agent", "upto", "count"}`: its messages are the
`count` blocks of that agent ending at seq `upto`. Blocks are never deleted while the
thread lives (a rewrite archives them), so every checkpoint reads back as it was put.

A block's message is the LangChain envelope exactly as the checkpoint held it, with the
`role` and `content` the conversation store reads added beside it; reading a checkpoint
takes them away again (`envelope_of`).

A put carries the channel either whole (in `channel_values`) or as a delta, `{"channel",
"head", "append"}`: the messages added since the chain head `head`. The delta is refused with a
412 and nothing written when `head` is not the head of the thread's active blocks; the
client then sends the step whole.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import Q, TextField
from django.db.models.functions import Cast

from memoryadmin.errors import InvalidInput, PreconditionFailed
from memoryadmin.json import stored_loads
from memoryadmin.jsoncheck import SHOWN_DEPTH_MAX
from memoryadmin.postgres.prepared import prepared_cursor

from sessions_app.threads import append as thread_append
from sessions_app.threads import services as thread_services
from sessions_app.threads.messages import ROLE_ALIASES
from sessions_app.threads.models import Block, Thread

from .references import checkpoints_expand
from .versions import values_hydrate
from .wire import MESSAGE_TYPES, lc_envelope

DEFAULT_AGENT_CODE = "langgraph"
ADDED = ("role", "content")
REF_KEYS = frozenset({"channel", "agent", "upto", "count"})
CHANNEL_MAX = 255


def messages_channel() -> str:
    return settings.MEMORYADMIN_LANGGRAPH_MESSAGES_CHANNEL


def conversation_channel(values: dict[str, Any], delta: Delta | None = None) -> tuple[str, list[dict[str, Any]] | None]:
    """The channel of a root checkpoint that is the thread's conversation, and its messages as
    blocks (None: the step leaves the conversation as it is). A delta names its channel; else
    the configured one (`messages`) when the checkpoint has it; else the first channel by name
    whose value is a non-empty list of LangChain messages (a state's `chat_history`, the
    functional API's `__previous__`)."""
    if delta is not None:
        return delta.channel, None
    channel = messages_channel()
    if channel in values:
        return channel, block_messages(values[channel])
    for name in sorted(values):
        value = values[name]
        if isinstance(value, list) and value and (converted := block_messages(value)) is not None:
            return name, converted
    return channel, None


def agent_code_given(metadata: dict[str, Any]) -> str | None:
    """The configured agent_code, else the graph or assistant id of the metadata; None when
    neither names one (the thread's agent then, see `agent_code_for`)."""
    configured = settings.MEMORYADMIN_LANGGRAPH_AGENT_CODE
    if configured:
        return configured
    for key in ("graph_id", "assistant_id"):
        value = metadata.get(key)
        if isinstance(value, str) and value.strip():
            try:
                return thread_services.validate_agent_code(value)
            except InvalidInput:
                continue
    return None


def agent_code_for(metadata: dict[str, Any], thread: Thread | None = None) -> str:
    """The configured agent_code, else the graph or assistant id of the metadata, else the
    thread's agent (an update_state's checkpoint names no graph), else "langgraph"."""
    given = agent_code_given(metadata)
    if given is not None:
        return given
    if thread is not None and thread.agent_code:
        return thread.agent_code
    return DEFAULT_AGENT_CODE


def _role(name: str, kwargs: dict[str, Any]) -> str | None:
    kind = kwargs.get("type") if isinstance(kwargs.get("type"), str) else name
    base = kind[: -len("MessageChunk")] if kind.endswith("MessageChunk") else kind
    base = base[: -len("Message")] if base.endswith("Message") else base
    base = base.lower()
    role = ROLE_ALIASES.get(base) or MESSAGE_TYPES.get(base)
    chat_role = kwargs.get("role")
    if base == "chat" and isinstance(chat_role, str) and chat_role in ROLE_ALIASES:
        role = ROLE_ALIASES[chat_role]
    return role


def block_message(value: Any) -> dict[str, Any] | None:
    """A LangChain message envelope as a block's message (role and content beside it), else None."""
    envelope = lc_envelope(value)
    if envelope is None or any(key in value for key in ADDED):
        return None
    name, kwargs = envelope
    if not name.endswith(("Message", "MessageChunk")) or "kwargs" not in value:
        return None
    role = _role(name, kwargs)
    content = kwargs.get("content", "")
    if role is None or not isinstance(content, str | list):
        return None
    return {**value, "role": role, "content": content}


def envelope_of(message: Any) -> Any:
    """A block's message as the checkpoint held it."""
    if isinstance(message, dict) and "role" in message and lc_envelope(message) is not None:
        return {key: item for key, item in message.items() if key not in ADDED}
    return message


def block_messages(values: Any) -> list[dict[str, Any]] | None:
    """The channel's value as block messages when it is a list of LangChain messages, else None."""
    if not isinstance(values, list):
        return None
    converted = []
    for value in values:
        message = block_message(value)
        if message is None:
            return None
        converted.append(message)
    return converted


@dataclass(frozen=True)
class Delta:
    head: str
    append: list[dict[str, Any]]
    channel: str = ""  # the checkpoint's channel the messages are (`messages_channel()` when the body names none)


def delta_input(value: Any) -> Delta | None:
    """The body's `messages` delta, `{"head": str, "append": [envelope...], "channel": str}` (the
    channel optional); every error names its field."""
    if value is None:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("head"), str) or not isinstance(value.get("append"), list):
        raise InvalidInput(
            'messages must be {"head": <chain head>, "append": [message...]}.',
            fields={"messages": ['must be an object with "head" (a string) and "append" (a list).']},
        )
    converted = block_messages(value["append"])
    if converted is None:
        for index, item in enumerate(value["append"]):
            if block_message(item) is None:
                where = f"messages.append[{index}]"
                raise InvalidInput(
                    f"{where} must be a LangChain message envelope.", fields={where: ["must be a LangChain message envelope."]}
                )
    channel = value.get("channel", messages_channel())
    if not isinstance(channel, str) or not channel or len(channel) > CHANNEL_MAX:
        message = f"must be a channel's name, 1 to {CHANNEL_MAX} characters."
        raise InvalidInput(f"messages.channel {message}", fields={"messages.channel": [message]})
    return Delta(head=value["head"], append=converted or [], channel=channel)


@dataclass(frozen=True)
class Kept:
    ref: dict[str, Any]
    head: str
    moved: bool = False  # the save wrote the thread row (its updated_at is new)


def _stale_head() -> PreconditionFailed:
    return PreconditionFailed(
        "The thread's messages changed since that head; send the step's messages whole.",
        fields={"messages.head": ["is not the head of the thread's messages."]},
    )


def _active_head(thread: Thread, agent: str) -> tuple[int, int, str] | None:
    """(seq, position, chain_hash) of the agent's last active block: one indexed row."""
    return (
        Block.objects.filter(thread=thread, agent_code=agent, archived=False)
        .order_by("-seq")
        .values_list("seq", "position", "chain_hash")
        .first()
    )


def _ref(channel: str, agent: str, upto: int, count: int) -> dict[str, Any]:
    return {"channel": channel, "agent": agent, "upto": upto, "count": count}


def conversation_keep(
    *, actor, thread: Thread, channel: str, metadata: dict[str, Any], values: list[dict[str, Any]] | None,
    delta: Delta | None,
) -> Kept:
    """Make the thread's active blocks the checkpoint's messages; the reference to store.

    Whole: the conversation store's save (append, rewrite: a compaction, or no-op). Delta:
    the append-only save guarded by the chain head (412, nothing written, on a mismatch).
    The thread is locked by the caller's transaction.
    """
    agent = agent_code_for(metadata, thread)
    if delta is not None and not delta.append:
        head = _active_head(thread, agent)
        stored = head[2] if head else ""
        if stored != delta.head:
            raise _stale_head()
        return Kept(_ref(channel, agent, head[0] if head else 0, head[1] + 1 if head else 0), stored)
    if delta is not None:
        try:
            result = thread_append.thread_append_messages(
                actor=actor, thread_id=thread.thread_id, agent_code=agent, messages=delta.append, expect_head=delta.head
            )
        except PreconditionFailed as exc:
            # Its only guard is the head: said of the body's field, as the check above says it.
            raise _stale_head() from exc
    else:
        result = thread_services.thread_save_agent_state(
            actor=actor, thread_id=thread.thread_id, agent_code=agent, context=values
        )
    if result.mode == "noop":
        head = _active_head(thread, agent)
        return Kept(_ref(channel, agent, head[0] if head else 0, result.active), result.head)
    return Kept(_ref(channel, agent, result.max_seq, result.active), result.head, moved=True)


# --- reading: the referenced messages back into the checkpoints ------------------------------


def _valid_ref(ref: Any) -> bool:
    return (
        isinstance(ref, dict)
        and REF_KEYS <= ref.keys()
        and isinstance(ref["upto"], int)
        and isinstance(ref["count"], int)
        and ref["count"] >= 0
    )


def _picked_apart(thread_pk: int, agent: str, upto: int, count: int) -> list[tuple[int, Any, str]]:
    """The referenced blocks when their seqs are not contiguous: the agent's last `count` blocks
    up to `upto`, newest first while their positions go down (a position that does not is
    another context's: blocks are missing, and what is there is given)."""
    rows = (
        Block.objects.filter(thread_id=thread_pk, agent_code=agent, seq__lte=upto)
        .order_by("-seq")
        .values_list("seq", "position", "message", "chain_hash")[:count]
    )
    picked, below = [], count
    for seq, position, message, chain_hash in rows:
        if position >= below:
            break
        picked.append((seq, message, chain_hash))
        below = position
    return picked[::-1]


def checkpoints_hydrate(rows: list, also: list = ()) -> list:
    """Read checkpoints back as they were put: their values stored by version
    (`versions.values_hydrate`), their messages channel from the blocks, then the values
    holding messages by reference (`references.checkpoints_expand`). `also` are
    what pending writes refer to (`references.writes_held`), read in the same query."""
    values_hydrate(rows)
    _messages_hydrate([*rows, *also])
    return checkpoints_expand(rows)


def _messages_read(rows: list) -> list:
    """The blocks' messages (each row's fourth item, its stored JSON text) as Python values, read
    as one JSON array: one parse for all of them instead of one per block, with what reading a
    stored value guarantees (`stored_loads`: exact integers, a message too deep cut and marked).
    Text that is not JSON (which no write stores) is read block by block, kept as text, as the
    model field keeps it."""
    texts = [row[3] for row in rows]
    if not texts:
        return []
    try:
        if all(isinstance(text, str) for text in texts):
            messages = stored_loads("[" + ",".join(texts) + "]", depth_max=SHOWN_DEPTH_MAX + 1)
            if isinstance(messages, list) and len(messages) == len(texts):
                return messages
    except ValueError:
        pass
    read = []
    for text in texts:
        try:
            read.append(stored_loads(text) if isinstance(text, str) else text)
        except ValueError:
            read.append(text)
    return read


# The blocks of (thread, agent, lowest seq, highest seq) ranges on PostgreSQL: one text for any
# number of ranges, so that it is prepared once per connection (memoryadmin/postgres/prepared.py).
_BLOCKS_IN = """
SELECT b.thread_id, b.agent_code, b.seq, b.message::text, b.chain_hash
  FROM unnest(%s::bigint[], %s::text[], %s::bigint[], %s::bigint[]) AS r(thread_id, agent_code, low, high)
  JOIN {block} b ON b.thread_id = r.thread_id AND b.agent_code = r.agent_code AND b.seq BETWEEN r.low AND r.high
 ORDER BY b.thread_id, b.agent_code, b.seq
"""


def _blocks_in(ranges: list[tuple[int, str, int, int]]) -> list[tuple]:
    """(thread_id, agent_code, seq, message as JSON text, chain_hash) of the blocks in the ranges, in that order."""
    if connection.vendor == "postgresql":
        with prepared_cursor() as cursor:
            cursor.execute(_BLOCKS_IN.format(block=Block._meta.db_table), [list(column) for column in zip(*ranges)])
            return cursor.fetchall()
    where = Q()
    for thread_pk, agent, low, high in ranges:
        where |= Q(thread_id=thread_pk, agent_code=agent, seq__gte=low, seq__lte=high)
    return list(
        Block.objects.filter(where)
        .order_by("thread_id", "agent_code", "seq")
        .annotate(text=Cast("message", TextField()))
        .values_list("thread_id", "agent_code", "seq", "text", "chain_hash")
    )


def _messages_hydrate(rows: list) -> list:
    """Put every referenced messages channel back into its checkpoint's `channel_values`.

    One query for any number of checkpoints and threads: per (thread, agent), the blocks
    between the lowest and the highest seq referenced. A checkpoint whose blocks are not
    contiguous (another agent saved into the thread between them) takes one query of its
    own. Blocks no longer there (purged by retention) are left out, never a failure.
    """
    wanted: dict[tuple[int, str], list] = {}
    for row in rows:
        ref = getattr(row, "messages_ref", None)
        if _valid_ref(ref) and isinstance(row.checkpoint, dict):
            wanted.setdefault((row.thread_id, ref["agent"]), []).append(row)
    if not wanted:
        return rows
    ranges = []
    for (thread_pk, agent), group in wanted.items():
        low = min(row.messages_ref["upto"] - row.messages_ref["count"] + 1 for row in group)
        high = max(row.messages_ref["upto"] for row in group)
        ranges.append((thread_pk, agent, low, high))
    found: dict[tuple[int, str], list] = {}
    rows_read = _blocks_in(ranges)
    for (thread_pk, agent, seq, _text, chain_hash), message in zip(rows_read, _messages_read(rows_read), strict=True):
        found.setdefault((thread_pk, agent), []).append((seq, message, chain_hash))
    for key, group in wanted.items():
        blocks = found.get(key, [])
        index = {seq: i for i, (seq, _, _) in enumerate(blocks)}
        shown: dict[int, Any] = {}
        for row in group:
            ref = row.messages_ref
            count, end = ref["count"], index.get(ref["upto"])
            if count == 0:
                picked = []
            elif end is not None and end + 1 >= count and blocks[end - count + 1][0] == ref["upto"] - count + 1:
                picked = blocks[end - count + 1 : end + 1]
            else:
                picked = _picked_apart(key[0], key[1], ref["upto"], count)
            messages = []
            for seq, message, _ in picked:
                if seq not in shown:
                    shown[seq] = envelope_of(message)
                messages.append(shown[seq])
            values = row.checkpoint.setdefault("channel_values", {})
            if isinstance(values, dict):
                values[ref["channel"]] = messages
            # The chain head of these messages: a client that read this checkpoint sends its next step as a delta.
            if len(picked) == count:
                row.messages_held = {"channel": ref["channel"], "head": picked[-1][2] if picked else "", "count": count}
    return rows
