"""The checkpoint put in one round trip on PostgreSQL (two when the thread must be read), and
a task's pending writes in one.

The put of an agent's next step (docs/checkpoints.md, "Costs") is the hottest
write of the product. On PostgreSQL, a new checkpoint into a thread that exists and is the
caller's, carrying its messages as a delta, whole but beginning with the thread's active
messages (an agent that sends every step's messages whole: the same hash chain up to the
thread's head, so it is the delta of the rest), or not as blocks at all, is written without a
transaction of several statements:

1. the thread row's guarded columns and the head of its messages (for a delta): as this
   process's last put of the thread left them (`remembered`), or else read, unlocked;
2. one statement that writes everything or nothing: the thread row is updated only if it is
   as read (for a delta: seq, counts and updated_at unchanged; else its owner), and the
   blocks appended, the channel values stored by version and the checkpoint inserted all
   hang on that update, so PostgreSQL's row lock and its re-check of the guard order it
   against every other write to the thread. The nodes the step ran (`node_id`) are found in
   it against the parent as stored. When remembered columns no longer hold (another process
   or path wrote to the thread since), it writes nothing and answers the row as it is: the
   statement is made again from that (sessions_app/threads/remembered.py).

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

from dataclasses import dataclass, replace
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
from sessions_app.threads.remembered import Remembered
from sessions_app.threads.models import Block, Thread

from . import conversation, latest, references, status, versions
from .langgraph import is_langgraph_checkpoint, next_nodes
from .models import Checkpoint, CheckpointValue, CheckpointWrite
from .wire import ERROR, INTERRUPT

NODE_ID_MAX = 255

# The thread row's guarded columns and, for a put carrying messages, its chain head (the
# agent's latest active block): the read, and the tail of the statement that tells a put made
# from remembered columns what the row holds now when they no longer hold.
_STATE = """
SELECT t.id, t.owner_id, t.agent_code, t.last_seq, t.rewrite_count, t.active_count, t.updated_at, {head},
       EXISTS (SELECT 1 FROM {checkpoint} c WHERE c.thread_id = t.id AND c.checkpoint_ns = %s AND c.checkpoint_id = %s),
       t.archived_count
  FROM {thread} t
  {head_join}
 WHERE t.thread_id = %s"""
_HEAD_JOIN = """LEFT JOIN LATERAL (
        SELECT b.seq, b.position, b.chain_hash FROM {block} b
         WHERE b.thread_id = t.id AND b.agent_code = COALESCE(%s, NULLIF(t.agent_code, ''), %s) AND NOT b.archived
         ORDER BY b.seq DESC LIMIT 1) h ON true"""

# The thread row's update without a delta (a delta's is the append's MOVED_SQL), on which every other write hangs.
_MOVED_PLAIN = """
    UPDATE {thread} SET updated_at = %s{status} WHERE id = %s AND owner_id = %s RETURNING id"""
# A root checkpoint's put stores the thread's status in that update (status.py): the new
# checkpoint is the latest, and the writes its tasks may have sent before it count.
_STATUS = """, lg_status = CASE
        WHEN EXISTS (SELECT 1 FROM {write} w WHERE w.thread_id = {thread}.id AND w.checkpoint_ns = ''
                        AND w.checkpoint_id = %s AND w.channel = %s) THEN %s
        WHEN %s <> '' OR EXISTS (SELECT 1 FROM {write} w WHERE w.thread_id = {thread}.id AND w.checkpoint_ns = ''
                        AND w.checkpoint_id = %s AND w.channel = %s) THEN %s
        ELSE %s END"""
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
_INSERT = """, inserted AS (
INSERT INTO {checkpoint} (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, messages_ref,
                          refs, values_ref, metadata, run_id, node_id, next_node_id, created_at, updated_at)
SELECT moved.id, %s, %s, %s, %s::jsonb, %s::jsonb, %s::jsonb, %s::jsonb, %s::jsonb, %s, {node_id}, %s, %s, %s FROM moved
RETURNING 1)
SELECT (SELECT count(*) FROM inserted), now.*
  FROM (SELECT 1) AS one
  LEFT JOIN (SELECT * FROM ({state}) AS state WHERE NOT EXISTS (SELECT 1 FROM inserted)) AS now ON true
"""
# `langgraph.nodes_run` in SQL, against the parent as stored: the nodes whose `versions_seen`
# differ from the parent's (a node the parent has not seen: against JSON null, as the parent's
# missing key reads in Python), sorted by code point, joined with "," and cut at NODE_ID_MAX.
_NODES_RUN = """COALESCE((
    SELECT left(string_agg(n.key, ',' ORDER BY n.key COLLATE "C"), {max})
      FROM jsonb_each(%s::jsonb) AS n
     WHERE n.key <> '{interrupt}'
       AND n.value IS DISTINCT FROM COALESCE((
           SELECT CASE WHEN jsonb_typeof(p.checkpoint -> 'versions_seen') = 'object' THEN p.checkpoint -> 'versions_seen' -> n.key END
             FROM {checkpoint} p WHERE p.thread_id = moved.id AND p.checkpoint_ns = %s AND p.checkpoint_id = %s), 'null'::jsonb)
), '')"""


def _tables() -> dict[str, str]:
    return {
        "thread": Thread._meta.db_table, "block": Block._meta.db_table,
        "checkpoint": Checkpoint._meta.db_table, "value": CheckpointValue._meta.db_table,
        "write": CheckpointWrite._meta.db_table,
    }


def _json(value: Any) -> str | None:
    return None if value is None else db_text(value)


@dataclass(frozen=True)
class Written:
    """A put the fast path made: a new checkpoint, the answer's `messages` (or None) and the
    state tag of the latest read it leaves (latest.py)."""

    messages: dict[str, Any] | None
    state_tag: str | None = None


@dataclass(frozen=True)
class _Row:
    """The thread row's guarded columns, and the chain head of `agent`'s messages (None: not read)."""

    pk: int
    owner_id: int
    agent_code: str
    last_seq: int
    rewrite_count: int
    active_count: int
    updated_at: Any
    agent: str | None
    seq: int | None
    position: int | None
    head: str | None
    # Whether the checkpoint being put is stored already (then the general path replaces it);
    # what a put leaves is its own checkpoint, so a put again of it (a retry) is one too.
    exists: bool = False
    last: str = ""
    archived_count: int = 0  # not guarded: for the state tag the put answers

    @classmethod
    def of(cls, values, agent: str | None) -> _Row | None:
        if values is None or values[0] is None:
            return None
        return cls(*values[:7], agent, *values[7:10], exists=bool(values[10]), archived_count=values[11])


# The checkpoint puts' rows (sessions_app/threads/remembered.py): a `_Row` per (thread, caller).
remembered = Remembered()


def checkpoint_put_fast(*, actor, thread_id: str, data, checkpoint_id: str, run_id: str) -> Written | None:
    """The put of a new checkpoint in one round trip, or two (see the module); None when the
    general path must decide. `data` is the checked input (services.checkpoint_input)."""
    if connection.vendor != "postgresql":
        return None
    body = data.checkpoint
    langgraph = is_langgraph_checkpoint(body)
    values = (body.get("channel_values") or {}) if langgraph else {}
    delta = data.messages
    channel, whole = conversation.conversation_channel(values, delta) if not data.checkpoint_ns else ("", None)
    if whole is not None:
        # Messages sent whole are kept as blocks without the channel in the row, as the general path keeps them.
        body = dict(body, channel_values={name: value for name, value in values.items() if name != channel})
    conversing = delta is not None or whole is not None
    given = conversation.agent_code_given(data.metadata) if conversing else None
    tables = _tables()
    head = "h.seq, h.position, h.chain_hash" if conversing else "NULL, NULL, NULL"
    state_sql = _STATE.format(head=head, head_join=_HEAD_JOIN.format(**tables) if conversing else "", **tables)
    state_params = [data.checkpoint_ns, checkpoint_id]
    state_params += [given, conversation.DEFAULT_AGENT_CODE, thread_id] if conversing else [thread_id]

    def agent_of(row: _Row) -> str | None:
        return (given or row.agent_code or conversation.DEFAULT_AGENT_CODE) if conversing else None

    def read() -> _Row | None:
        with prepared_cursor() as cursor:
            cursor.execute(state_sql, state_params)
            return now(cursor.fetchone())

    def now(found) -> _Row | None:
        row = _Row.of(found, None)
        return row and _Row.of(found, agent_of(row))

    key = remembered.key(actor, thread_id)
    row = remembered.get(key)
    if row is not None and (row.agent != agent_of(row) or row.last == checkpoint_id):
        row = None  # remembered for another agent's messages (or without any), or this very checkpoint's put
    from_memory = row is not None
    if row is None:
        row = read()
    while row is not None and not row.exists and policy.may_write(actor, owner_id=row.owner_id, action="checkpoint.put"):
        plan = _plan(data=data, body=body, values=values, delta=delta, whole=whole, given=given, channel=channel,
                     row=row, langgraph=langgraph, checkpoint_id=checkpoint_id, run_id=run_id, tables=tables,
                     state=(state_sql, state_params))
        if plan is not None:
            sql, params, after, answer, appended = plan
            try:
                written, found = _execute(sql, params)
            except IntegrityError:
                # The checkpoint id is stored already, or put at this moment by another request: nothing
                # of this statement was written; the general path, under the lock, finds it and replaces it.
                break
            if written == 1:
                remembered.put(key, after)
                if appended:
                    BLOCK_APPEND.inc(appended)
                tag = None if data.checkpoint_ns else latest.state_tag(
                    checkpoint_id, after.updated_at, after.last_seq, after.rewrite_count, after.active_count, after.archived_count
                )
                return Written(messages=answer, state_tag=tag)
        if not from_memory:
            break  # the general path decides (the thread moved since it was read: nothing was written)
        # What was remembered no longer holds, or sends the put to the general path: once more,
        # with the row as it is now (as the statement saw it, or read).
        from_memory = False
        row = read() if plan is None else now(found)
    remembered.put(key, None)
    return None


def _plan(*, data, body, values, delta, whole, given, channel, row: _Row, langgraph, checkpoint_id, run_id,
          tables, state) -> tuple | None:
    """The guarded statement of a put against the thread `row`, its parameters, the row it
    leaves, the answer's `messages` and how many blocks it appends; None when the general path
    must decide (the same refusals and the same rows as it)."""
    node_id, next_node_id = data.node_id, data.next_node_id
    node_sql, node_params = "%s", [node_id or ""]
    if langgraph:
        if next_node_id is None:
            next_node_id = ",".join(next_nodes(body))[:NODE_ID_MAX]
        if node_id is None:
            node_sql = _NODES_RUN.format(max=NODE_ID_MAX, interrupt=INTERRUPT, **tables)
            node_params = [db_text(body["versions_seen"]), data.checkpoint_ns, data.parent_checkpoint_id or ""]
    now = timezone.now()
    messages, answer, appended = None, None, []
    if whole is not None:
        delta = _whole_as_delta(whole, row.position, row.head, channel)
        if delta is None:
            return None  # not an extension of the thread's messages: the general path's save rewrites
        if not delta.append and (given or row.agent_code or conversation.DEFAULT_AGENT_CODE) != row.agent_code:
            return None  # a save that only changes the thread's agent: the general path's
    after = replace(row, updated_at=now, last=checkpoint_id)
    if delta is not None:
        agent = row.agent
        if (row.head or "") != delta.head:
            return None  # the general path answers 412
        stored = row.position + 1 if row.position is not None else 0
        if stored + len(delta.append) > settings.MEMORYADMIN_MAX_CONTEXT_MESSAGES:
            return None  # the general path answers 400
        try:
            appended = thread_services.parse_messages(delta.append, 0, field="messages") if delta.append else []
        except InvalidInput:
            if whole is not None:
                return None  # the general path names the message in the channel it was sent in
            raise
        try:
            digests = chain_continue(row.head or "", delta.append) if appended else []
        except TypeError:
            return None  # the general path names what cannot be stored
        upto = row.last_seq + len(appended) if appended else (row.seq or 0)
        messages = {"channel": channel, "agent": agent, "upto": upto, "count": stored + len(appended)}
        answer = {"channel": channel, "head": digests[-1] if digests else (row.head or ""), "count": messages["count"]}
        if appended:
            after = replace(after, agent_code=agent, last_seq=upto, active_count=row.active_count + len(appended),
                            seq=upto, position=stored + len(appended) - 1, head=digests[-1])
    if data.refs:
        held = {channel: messages["count"]} if messages else None
        references.refs_check(data.refs, values, references.list_lengths(values, held))
    document, values_ref, value_rows = versions.values_rows(
        checkpoint_ns=data.checkpoint_ns, body=body, keep=set(data.refs or ())
    )

    status_sql, status_params = "", []
    if not data.checkpoint_ns:
        status_sql = _STATUS.format(**tables)
        status_params = [checkpoint_id, ERROR, status.FAILED, next_node_id or "", checkpoint_id, INTERRUPT,
                         status.INTERRUPTED, status.IDLE]
    if delta is not None:
        sql = "WITH moved AS (" + thread_services.MOVED_SQL.format(thread=tables["thread"], extra_state=status_sql) + ")"
        params = [
            # An empty delta leaves the thread's agent as it is, as the general path does. The
            # title is the first human message's while the thread has none (the statement's CASE).
            row.last_seq + len(appended), len(appended), after.agent_code, now, thread_services.title_from(appended),
            *status_params, row.pk, row.owner_id, row.last_seq, row.rewrite_count, row.active_count, row.updated_at,
        ]
    else:
        sql = "WITH moved AS (" + _MOVED_PLAIN.format(status=status_sql, **tables) + ")"
        params = [now, *status_params, row.pk, row.owner_id]
    if appended:
        sql += _BLOCKS.format(rows=", ".join([thread_services.APPEND_ROW] * len(appended)), **tables)
        params += [after.agent_code, now]
        params += thread_services.append_row_params(appended, last_seq=row.last_seq, start=stored, digests=digests)
    if value_rows:
        sql += _VALUES.format(rows=", ".join([_VALUE_ROW] * len(value_rows)), **tables)
        params.append(data.checkpoint_ns)
        for name, version, digest, text in value_rows:
            params += [name, version, digest, text]
    sql += _INSERT.format(node_id=node_sql, state=state[0], **tables)
    params += [
        data.checkpoint_ns, checkpoint_id, data.parent_checkpoint_id, db_text(document), _json(messages),
        _json(data.refs), _json(values_ref), db_text(data.metadata), run_id, *node_params, next_node_id or "", now, now,
        *state[1],
    ]
    return sql, params, after, answer, len(appended)


def _whole_as_delta(whole: list[dict[str, Any]], position: int | None, head: str | None, channel: str) -> conversation.Delta | None:
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
    return conversation.Delta(head=head or "", append=whole[stored:], channel=channel)


def _execute(sql: str, params: list) -> tuple[int, tuple | None]:
    """How many checkpoints the statement wrote (0 or 1) and the thread row as it was before it
    (the `_STATE` columns). Inside a caller's transaction (a test's, say) it runs in a savepoint,
    so that a failure leaves that transaction usable; otherwise alone, in autocommit."""
    if connection.in_atomic_block:
        with transaction.atomic(), prepared_cursor() as cursor:
            cursor.execute(sql, params)
            found = cursor.fetchone()
    else:
        with prepared_cursor() as cursor:
            cursor.execute(sql, params)
            found = cursor.fetchone()
    return found[0], found[1:]


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
