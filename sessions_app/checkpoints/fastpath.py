"""The checkpoint put in two round trips on PostgreSQL (one read, one guarded statement), and
a task's pending writes in one.

The put of an agent's next step (docs/checkpoints.md, "Costs") is the hottest
write of the product. On PostgreSQL, a new checkpoint into a thread that exists and is the
caller's, carrying its messages as a delta, whole but beginning with the thread's active
messages (an agent that sends every step's messages whole: the same hash chain up to the
thread's head, so it is the delta of the rest), or not as blocks at all, is written without a
transaction of several statements:

1. one read, unlocked: the thread row, the head of its messages (for a delta), whether the
   checkpoint id is stored already, and the parent's `versions_seen` (for `node_id`);
2. one statement that writes everything or nothing: the thread row is updated only if it is
   as read (for a delta: seq, counts and updated_at unchanged; else its owner), and the
   blocks appended, the channel values stored by version and the checkpoint inserted all
   hang on that update, so PostgreSQL's row lock and its re-check of the guard order it
   against every other write to the thread.

Everything else — a new thread, a checkpoint put again (replaced), messages sent whole that
rewrite the thread's (a compaction), a delta whose head is not the thread's, another user's
thread, a guard that no longer holds because another write came between — returns None, and
`services.checkpoint_put` takes the general path, under the thread's row lock, which decides
every refusal. The rules are the general path's: the same input checks ran before, and the
same pieces build the rows.

A task's pending writes (`checkpoint_put_writes_fast`) are one statement: the thread row
taken with a key-share lock (it cannot be deleted meanwhile, and concurrent writes of a
fan-out's tasks do not wait on one another), the writes inserted, a special channel's
write (negative idx) replacing the one stored, an ordinary one kept. Writes holding messages
by reference (a tool call's Send packet carries the agent's messages) are three statements in
one transaction (`_writes_marked`). A thread that is new or not the caller's, and markers
referring to a checkpoint not stored or holding its messages itself, take the general path.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from memoryadmin import policy
from memoryadmin.errors import InvalidInput, PreconditionFailed
from memoryadmin.json import db_text, stored_loads
from memoryadmin.metrics import BLOCK_APPEND
from memoryadmin.postgres.prepared import prepared_cursor

from sessions_app.threads import services as thread_services
from sessions_app.threads.messages import ContextHasher, chain_continue
from sessions_app.threads.models import Block, Thread

from . import conversation, references, versions
from .langgraph import is_langgraph_checkpoint, next_nodes, nodes_run
from .models import Checkpoint, CheckpointValue, CheckpointWrite

NODE_ID_MAX = 255

_READ = """
SELECT t.id, t.owner_id, t.agent_code, t.last_seq, t.rewrite_count, t.active_count, t.updated_at, t.title = '',
       {head},
       EXISTS (SELECT 1 FROM {checkpoint} c
                WHERE c.thread_id = t.id AND c.checkpoint_ns = %s AND c.checkpoint_id = %s),
       (SELECT (p.checkpoint -> 'versions_seen')::text FROM {checkpoint} p
         WHERE p.thread_id = t.id AND p.checkpoint_ns = %s AND p.checkpoint_id = %s)
  FROM {thread} t
  {head_join}
 WHERE t.thread_id = %s
"""
_HEAD_JOIN = """LEFT JOIN LATERAL (
        SELECT b.seq, b.position, b.chain_hash FROM {block} b
         WHERE b.thread_id = t.id AND b.agent_code = COALESCE(%s, NULLIF(t.agent_code, ''), %s) AND NOT b.archived
         ORDER BY b.seq DESC LIMIT 1) h ON true"""

# The thread row's update without a delta (a delta's is the append's MOVED_SQL), on which every other write hangs.
_MOVED_PLAIN = """
    UPDATE {thread} SET updated_at = %s WHERE id = %s AND owner_id = %s RETURNING id"""
_BLOCKS = """, blocks AS (
    INSERT INTO {block} (thread_id, agent_code, seq, position, role, content, message, block_type,
                         archived, chain_hash, created_at)
    SELECT moved.id, %s, v.seq, v.position, v.role, v.content, v.message::jsonb, v.block_type, false, v.chain_hash, %s
      FROM moved CROSS JOIN (VALUES {rows}) AS v(seq, position, role, content, message, block_type, chain_hash))"""
_VALUES = """, stored_values AS (
    INSERT INTO {value} (thread_id, checkpoint_ns, channel, version, digest, value)
    SELECT moved.id, %s, v.channel, v.version, v.digest, v.value::jsonb
      FROM moved CROSS JOIN (VALUES {rows}) AS v(channel, version, digest, value)
    ON CONFLICT DO NOTHING)"""
_VALUE_ROW = "(%s, %s, %s, %s)"
_INSERT = """
INSERT INTO {checkpoint} (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, messages_ref,
                          refs, values_ref, metadata, run_id, node_id, next_node_id, created_at, updated_at)
SELECT moved.id, %s, %s, %s, %s::jsonb, %s::jsonb, %s::jsonb, %s::jsonb, %s::jsonb, %s, %s, %s, %s, %s FROM moved
"""


def _tables() -> dict[str, str]:
    return {
        "thread": Thread._meta.db_table, "block": Block._meta.db_table,
        "checkpoint": Checkpoint._meta.db_table, "value": CheckpointValue._meta.db_table,
    }


def _json(value: Any) -> str | None:
    return None if value is None else db_text(value)


@dataclass(frozen=True)
class Written:
    """A put the fast path made: a new checkpoint, and the answer's `messages` (or None)."""

    messages: dict[str, Any] | None


def checkpoint_put_fast(*, actor, thread_id: str, data, checkpoint_id: str, run_id: str) -> Written | None:
    """The put of a new checkpoint in two round trips (see the module); None when the general
    path must decide. `data` is the checked input (services.checkpoint_input)."""
    if connection.vendor != "postgresql":
        return None
    body = data.checkpoint
    langgraph = is_langgraph_checkpoint(body)
    channel = conversation.messages_channel()
    values = (body.get("channel_values") or {}) if langgraph else {}
    delta = data.messages
    whole = conversation.block_messages(values[channel]) if not data.checkpoint_ns and channel in values else None
    if whole is not None:
        if delta is not None:
            return None  # both: the general path decides
        # Messages sent whole are kept as blocks without the channel in the row, as the general path keeps them.
        body = dict(body, channel_values={name: value for name, value in values.items() if name != channel})
    conversing = delta is not None or whole is not None
    given = conversation.agent_code_given(data.metadata) if conversing else None
    tables = _tables()
    head_sql = "h.seq, h.position, h.chain_hash" if conversing else "NULL, NULL, NULL"
    head_join = _HEAD_JOIN.format(**tables) if conversing else ""
    params: list[Any] = [data.checkpoint_ns, checkpoint_id, data.checkpoint_ns, data.parent_checkpoint_id or ""]
    if conversing:
        params += [given, conversation.DEFAULT_AGENT_CODE]
    params.append(thread_id)
    with prepared_cursor() as cursor:
        cursor.execute(_READ.format(head=head_sql, head_join=head_join, **tables), params)
        row = cursor.fetchone()
    if row is None:
        return None
    pk, owner_id, agent_code, last_seq, rewrite_count, active_count, updated_at, untitled, seq, position, head, exists, seen = row
    if exists or not policy.may_write(actor, owner_id=owner_id, action="checkpoint.put"):
        return None

    node_id, next_node_id = data.node_id, data.next_node_id
    if langgraph:
        if next_node_id is None:
            next_node_id = ",".join(next_nodes(body))[:NODE_ID_MAX]
        if node_id is None:
            seen = stored_loads(seen) if seen is not None else None
            node_id = ",".join(nodes_run(body["versions_seen"], seen if isinstance(seen, dict) else None))[:NODE_ID_MAX]
    now = timezone.now()
    messages, answer, appended = None, None, []
    if whole is not None:
        delta = _whole_as_delta(whole, position, head)
        if delta is None:
            return None  # not an extension of the thread's messages: the general path's save rewrites
        if not delta.append and (given or agent_code or conversation.DEFAULT_AGENT_CODE) != agent_code:
            return None  # a save that only changes the thread's agent: the general path's
    if delta is not None:
        agent = given or agent_code or conversation.DEFAULT_AGENT_CODE
        if (head or "") != delta.head:
            return None  # the general path answers 412
        stored = position + 1 if position is not None else 0
        if stored + len(delta.append) > settings.MEMORYADMIN_MAX_CONTEXT_MESSAGES:
            return None  # the general path answers 400
        try:
            appended = thread_services.parse_messages(delta.append, 0, field="messages") if delta.append else []
        except InvalidInput:
            if whole is not None:
                return None  # the general path names the message in the channel it was sent in
            raise
        try:
            digests = chain_continue(head or "", delta.append) if appended else []
        except TypeError:
            return None  # the general path names what cannot be stored
        upto = last_seq + len(appended) if appended else (seq or 0)
        messages = {"channel": channel, "agent": agent, "upto": upto, "count": stored + len(appended)}
        answer = {"channel": channel, "head": digests[-1] if digests else (head or ""), "count": messages["count"]}
    if data.refs:
        held = {channel: messages["count"]} if messages else None
        references.refs_check(data.refs, values, references.list_lengths(values, held))
    document, values_ref, value_rows = versions.values_rows(
        checkpoint_ns=data.checkpoint_ns, body=body, keep=set(data.refs or ())
    )

    if delta is not None:
        sql = "WITH moved AS (" + thread_services.MOVED_SQL.format(thread=tables["thread"], extra_state="") + ")"
        params = [
            # An empty delta leaves the thread's agent as it is, as the general path does.
            last_seq + len(appended), len(appended), agent if appended else agent_code, now, thread_services.title_from(appended) if untitled else "",
            pk, owner_id, last_seq, rewrite_count, active_count, updated_at,
        ]
    else:
        sql = "WITH moved AS (" + _MOVED_PLAIN.format(**tables) + ")"
        params = [now, pk, owner_id]
    if appended:
        sql += _BLOCKS.format(rows=", ".join([thread_services.APPEND_ROW] * len(appended)), **tables)
        params += [agent, now]
        params += thread_services.append_row_params(appended, last_seq=last_seq, start=stored, digests=digests)
    if value_rows:
        sql += _VALUES.format(rows=", ".join([_VALUE_ROW] * len(value_rows)), **tables)
        params.append(data.checkpoint_ns)
        for name, version, digest, text in value_rows:
            params += [name, version, digest, text]
    sql += _INSERT.format(**tables)
    params += [
        data.checkpoint_ns, checkpoint_id, data.parent_checkpoint_id, db_text(document), _json(messages),
        _json(data.refs), _json(values_ref), db_text(data.metadata), run_id, node_id or "", next_node_id or "", now, now,
    ]
    try:
        written = _execute(sql, params)
    except IntegrityError:
        # The same checkpoint id put at the same moment by another request: nothing of this
        # statement was written; the general path, under the lock, finds it and replaces it.
        return None
    if written != 1:
        return None  # the thread moved since it was read: nothing was written
    if appended:
        BLOCK_APPEND.inc(len(appended))
    return Written(messages=answer)


def _whole_as_delta(whole: list[dict[str, Any]], position: int | None, head: str | None) -> conversation.Delta | None:
    """Messages sent whole that begin with the thread's active messages (the same hash chain up
    to its head, `ContextHasher`) as the delta appending the rest; None for any other list."""
    stored = position + 1 if position is not None else 0
    if len(whole) < stored:
        return None
    try:
        if stored and ContextHasher(whole).prefix_digest(stored) != head:
            return None
    except TypeError:
        return None  # the general path names what cannot be stored
    return conversation.Delta(head=head or "", append=whole[stored:])


def _execute(sql: str, params: list) -> int:
    """The statement's rows written. Inside a caller's transaction (a test's, say) it runs in a
    savepoint, so that a failure leaves that transaction usable; otherwise alone, in autocommit."""
    if connection.in_atomic_block:
        with transaction.atomic(), prepared_cursor() as cursor:
            cursor.execute(sql, params)
            return cursor.rowcount
    with prepared_cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount


_WRITES = """
WITH t AS (SELECT id FROM {thread} WHERE thread_id = %s AND owner_id = %s FOR KEY SHARE),
written AS (
    INSERT INTO {write} (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, value, refers, created_at)
    SELECT t.id, %s, %s, %s, %s, v.idx, v.channel, v.value::jsonb, v.refers, %s
      FROM t CROSS JOIN (VALUES {rows}) AS v(idx, channel, value, refers)
    ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO UPDATE
       SET channel = EXCLUDED.channel, value = EXCLUDED.value, task_path = EXCLUDED.task_path, refers = EXCLUDED.refers
     WHERE EXCLUDED.idx < 0
    RETURNING 1)
SELECT (SELECT id FROM t), (SELECT count(*) FROM written)
"""
_WRITE_ROW = "(%s::integer, %s, %s, %s::boolean)"
_LOCK = "SELECT id FROM {thread} WHERE thread_id = %s AND owner_id = %s FOR KEY SHARE"
_REFERRED = """
SELECT checkpoint_id, messages_ref::text FROM {checkpoint}
 WHERE thread_id = %s AND checkpoint_ns = %s AND checkpoint_id = ANY(%s)"""


def checkpoint_put_writes_fast(
    *, actor, thread_id: str, checkpoint_ns: str, checkpoint_id: str, task_id: str, task_path: str, rows: dict,
    marked: dict | None = None,
) -> int | None:
    """A task's pending writes in one statement (see the module): how many rows were written, or
    None when the general path must decide. `rows` maps each write's idx to (channel, value);
    `marked` maps the idx of those holding messages by reference to their value (see below)."""
    if connection.vendor != "postgresql" or not policy.may_write(actor, owner_id=actor.pk, action="checkpoint.write"):
        return None
    if not rows:
        return None
    tables = {"thread": Thread._meta.db_table, "write": CheckpointWrite._meta.db_table, "checkpoint": Checkpoint._meta.db_table}
    if marked:
        return _writes_marked(tables, actor=actor, thread_id=thread_id, checkpoint_ns=checkpoint_ns,
                              checkpoint_id=checkpoint_id, task_id=task_id, task_path=task_path, rows=rows, marked=marked)
    with prepared_cursor() as cursor:
        return _writes_insert(cursor, tables, actor, thread_id, checkpoint_ns, checkpoint_id, task_id, task_path,
                              {idx: (channel, value, False) for idx, (channel, value) in rows.items()})


def _writes_insert(cursor, tables, actor, thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, rows) -> int | None:
    sql = _WRITES.format(rows=", ".join([_WRITE_ROW] * len(rows)), **tables)
    params: list[Any] = [thread_id, actor.pk, checkpoint_ns, checkpoint_id, task_id, task_path, timezone.now()]
    for idx, (channel, value, refers) in rows.items():
        params += [idx, channel, db_text(value), refers]
    cursor.execute(sql, params)
    found, written = cursor.fetchone()
    return None if found is None else written


def _writes_marked(tables, *, actor, thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, rows, marked) -> int | None:
    """Writes holding messages by reference (a Send packet carrying the agent's state): each
    marker stored as a reference to the blocks of the checkpoint it refers to
    (`references.writes_resolve`), when that checkpoint holds its messages as blocks.

    One transaction of three statements: the thread row key-share locked first (a purge of
    its blocks, which locks it for update, comes wholly before or wholly after; a concurrent
    put, which does not, is not waited for), then the referred checkpoints read (after the
    lock, so a purge that came before is seen), then the writes. A referred checkpoint missing
    or holding its messages itself declines (None): the general path decides, 412 included."""
    markers = references.writes_markers(marked)
    ids = sorted(references.referred_ids(markers, checkpoint_id))
    with transaction.atomic(), prepared_cursor() as cursor:
        cursor.execute(_LOCK.format(**tables), [thread_id, actor.pk])
        found = cursor.fetchone()
        if found is None:
            return None
        cursor.execute(_REFERRED.format(**tables), [found[0], checkpoint_ns, ids])
        referred = {cid: {"checkpoint_id": cid, "messages_ref": stored_loads(ref) if ref else None}
                    for cid, ref in cursor.fetchall()}
        if len(referred) != len(ids) or not all(isinstance(row["messages_ref"], dict) for row in referred.values()):
            return None
        try:
            resolved = references.writes_rebuilt(marked, referred, checkpoint_id, lambda row, channel: None)
        except PreconditionFailed:
            return None
        stored = {
            idx: (channel, *(resolved[idx] if idx in resolved else (value, False))) for idx, (channel, value) in rows.items()
        }
        return _writes_insert(cursor, tables, actor, thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, stored)
