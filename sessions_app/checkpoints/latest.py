"""The latest checkpoint in two queries on PostgreSQL (GET /threads/{id}/checkpoints/latest).

An agent reads its thread's latest checkpoint at the start of every run (LangGraph's
`get_tuple` without an id). For a thread of the caller's own, one statement reads the
thread, its latest checkpoint of the namespace, the checkpoint's pending writes (in replay
order) and its channel values stored by version (versions.py); the messages it holds by
reference come from the blocks in a second (conversation.py). What it gives is exactly what
`selectors.checkpoint_get` gives: the same hydration puts everything back. The statement is
prepared once per connection (memoryadmin/postgres/prepared.py). Another user's
thread, a missing one, one with no checkpoint yet and SQLite take `checkpoint_get` itself.

The owner's read of a checkpoint with no pending writes answers its `state_tag`, and so does
the put that made it (fastpath.py): a tag of everything the answer is made of — the
checkpoint as stored (its id and `updated_at`, which every replacement moves) and the
thread's blocks (their counters, which every append, archive, rewrite or purge moves). A
read sent with `If-None-Match: <state_tag>` answers 304 with no body in one query while the
tag holds: the client (`MemoryAdminSaver`) has the checkpoint already, as it put or read it
(docs/checkpoints.md, "Costs").
"""

from __future__ import annotations

import datetime
import hashlib
from dataclasses import dataclass
from typing import Any

from django.db import connection

from memoryadmin import policy
from memoryadmin.json import stored_loads
from memoryadmin.postgres.prepared import prepared_cursor

from sessions_app.threads.models import Thread
from sessions_app.threads.selectors import etag_matches, thread_id_validate

from . import versions
from .models import Checkpoint, CheckpointValue, CheckpointWrite
from .selectors import attach_writes_read, checkpoint_etag, checkpoint_get

_LATEST = """
SELECT t.id, t.owner_id, c.id, c.checkpoint_id, c.parent_checkpoint_id, c.checkpoint::text, c.messages_ref::text,
       c.refs::text, c.metadata::text, c.run_id, c.node_id, c.next_node_id, c.created_at, c.updated_at,
       (SELECT json_agg(json_build_array(w.task_id, w.task_path, w.idx, w.channel, w.value, w.refers)
                        ORDER BY w.task_path, w.task_id, w.idx)::text
          FROM {write} w
         WHERE w.thread_id = t.id AND w.checkpoint_ns = c.checkpoint_ns AND w.checkpoint_id = c.checkpoint_id),
       c.values_ref::text,
       (SELECT json_agg(json_build_array(v.channel, v.version, v.digest, v.value))::text
          FROM {value} v
          JOIN jsonb_each(CASE WHEN jsonb_typeof(c.values_ref) = 'object' THEN c.values_ref END) AS r
            ON v.channel = r.key AND v.version = r.value ->> 0 AND v.digest = r.value ->> 1
         WHERE v.thread_id = t.id AND v.checkpoint_ns = c.checkpoint_ns),
       t.last_seq, t.rewrite_count, t.active_count, t.archived_count
  FROM {thread} t
  LEFT JOIN LATERAL (
        SELECT c.id, c.checkpoint_ns, c.checkpoint_id, c.parent_checkpoint_id, c.checkpoint, c.messages_ref, c.refs,
               c.metadata, c.run_id, c.node_id, c.next_node_id, c.created_at, c.updated_at, c.values_ref
          FROM {checkpoint} c WHERE c.thread_id = t.id AND c.checkpoint_ns = %s ORDER BY c.id DESC LIMIT 1) c ON true
 WHERE t.thread_id = %s
"""

# What a state tag is checked against: the thread's counters and its latest checkpoint's row, and
# whether the checkpoint has pending writes (a tag is only given to one without).
_TAGGED = """
SELECT t.owner_id, c.id, c.checkpoint_id, c.updated_at, t.last_seq, t.rewrite_count, t.active_count, t.archived_count,
       EXISTS (SELECT 1 FROM {write} w
                WHERE w.thread_id = t.id AND w.checkpoint_ns = c.checkpoint_ns AND w.checkpoint_id = c.checkpoint_id)
  FROM {thread} t
  JOIN LATERAL (
        SELECT c.id, c.checkpoint_ns, c.checkpoint_id, c.updated_at
          FROM {checkpoint} c WHERE c.thread_id = t.id AND c.checkpoint_ns = %s ORDER BY c.id DESC LIMIT 1) c ON true
 WHERE t.thread_id = %s
"""


def state_tag(checkpoint_id: str, updated_at, last_seq: int, rewrite_count: int, active_count: int, archived_count: int) -> str:
    """The tag of the latest checkpoint's answer (module docstring): a quoted entity tag."""
    stored = updated_at.astimezone(datetime.timezone.utc).isoformat()
    parts = "\x00".join(map(str, (checkpoint_id, stored, last_seq, rewrite_count, active_count, archived_count)))
    return '"s' + hashlib.sha256(parts.encode()).hexdigest()[:32] + '"'


@dataclass(frozen=True)
class Unchanged:
    """The latest checkpoint is the one the If-None-Match tag names: a 304, with the checkpoint's ETag."""

    etag: str


def checkpoint_latest_unless(*, actor, thread_id: str, checkpoint_ns: str = "", if_none_match: str | None = None):
    """`checkpoint_latest`, or `Unchanged` when `if_none_match` lists the answer's state tag (one query)."""
    if if_none_match and connection.vendor == "postgresql":
        thread_id_validate(thread_id)
        with prepared_cursor() as cursor:
            cursor.execute(_TAGGED.format(**_tables()), [checkpoint_ns, thread_id])
            row = cursor.fetchone()
        if row is not None and policy.owns(actor, row[0]) and policy.may_read(actor, owner_id=row[0]):
            # A checkpoint with pending writes has no tag: only `*` (any latest checkpoint there is) names it.
            current = "*" if row[8] else state_tag(*row[2:8])
            if etag_matches(if_none_match, current):
                return Unchanged(etag=checkpoint_etag(Checkpoint(pk=row[1], updated_at=row[3])))
    return checkpoint_latest(actor=actor, thread_id=thread_id, checkpoint_ns=checkpoint_ns)


def _tables() -> dict[str, str]:
    return {
        "thread": Thread._meta.db_table, "checkpoint": Checkpoint._meta.db_table,
        "write": CheckpointWrite._meta.db_table, "value": CheckpointValue._meta.db_table,
    }


def _loads(text: str | None) -> Any:
    return None if text is None else stored_loads(text)


def checkpoint_latest(*, actor, thread_id: str, checkpoint_ns: str = "") -> Checkpoint:
    """The latest checkpoint of the namespace with its pending writes (`selectors.checkpoint_get`
    without an id): on PostgreSQL, of a thread of the caller's own, in two queries."""
    thread_id_validate(thread_id)
    found = _latest_own(actor=actor, thread_id=thread_id, checkpoint_ns=checkpoint_ns)
    if found is not None:
        return found
    return checkpoint_get(actor=actor, thread_id=thread_id, checkpoint_ns=checkpoint_ns)


def _latest_own(*, actor, thread_id: str, checkpoint_ns: str) -> Checkpoint | None:
    """The thread, the checkpoint, its writes and its values stored by version in one query; its
    messages from the blocks in the other (when it holds them by reference). None when the
    general path must decide (another user's thread, none, a thread without a checkpoint: its
    refusals and its audit are the general path's)."""
    if connection.vendor != "postgresql":
        return None
    with prepared_cursor() as cursor:
        cursor.execute(_LATEST.format(**_tables()), [checkpoint_ns, thread_id])
        row = cursor.fetchone()
    # The owner's own read: allowed by the policy, and no foreign read to audit.
    if row is None or row[2] is None or not (policy.owns(actor, row[1]) and policy.may_read(actor, owner_id=row[1])):
        return None
    (thread_pk, owner_id, pk, checkpoint_id, parent_id, document, messages_ref, refs, metadata, run_id, node_id,
     next_node_id, created_at, updated_at, writes, values_ref, values, *counters) = row
    thread = Thread(pk=thread_pk, thread_id=thread_id, owner_id=owner_id)
    checkpoint = Checkpoint(
        pk=pk, thread=thread, checkpoint_ns=checkpoint_ns, checkpoint_id=checkpoint_id, parent_checkpoint_id=parent_id,
        checkpoint=_loads(document), messages_ref=_loads(messages_ref), refs=_loads(refs), values_ref=_loads(values_ref),
        metadata=_loads(metadata), run_id=run_id, node_id=node_id, next_node_id=next_node_id,
        created_at=created_at, updated_at=updated_at,
    )
    found = {(thread_pk, checkpoint_ns, name, version, digest): value for name, version, digest, value in _loads(values) or ()}
    versions.values_apply([checkpoint], found)
    checkpoint.values_ref = None  # in this object only: its values are in, the hydration below reads none
    pending = [
        CheckpointWrite(
            thread=thread, checkpoint_ns=checkpoint_ns, checkpoint_id=checkpoint_id, task_id=task_id, task_path=task_path,
            idx=idx, channel=channel, value=value, refers=refers,
        )
        for task_id, task_path, idx, channel, value, refers in _loads(writes) or ()
    ]
    found = attach_writes_read([checkpoint], pending)[0]
    if not pending:
        found.state_tag = state_tag(checkpoint_id, updated_at, *counters)
    return found
