"""Writes to checkpoints and pending writes, and LangGraph's thread writes.

Two sets of rules meet here.

The saver (docs/checkpoints.md, rules C1-C5): a thread's checkpoints are a history, newest
first; a put without an id pushes a new checkpoint; a put with an id replaces
that checkpoint in place (its position kept), and an id that does not exist is
a 404 with nothing written; release removes every checkpoint of the thread and
answers with what it removed.

LangGraph's checkpointer contract on top (langgraph.checkpoint.base): namespaces,
parent ids, pending writes idempotent per (task_id, idx) with the special
channels (error, interrupt, ...) upserted, delete_thread across namespaces,
copy_thread, prune, delete_for_runs.

Ownership (memoryadmin.policy decides): only a thread's owner writes
checkpoints into it; operators write nothing; admins may release, prune or
delete another user's checkpoints but never write content into them.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Literal

from django.db import IntegrityError, transaction
from django.db.models import JSONField, OuterRef, Q, Subquery, Value
from django.db.models.fields.json import KeyTransform
from django.utils import timezone

from memoryadmin import policy
from memoryadmin.errors import InvalidInput, NotFound, PreconditionFailed
from memoryadmin.jsoncheck import DEPTH_MAX, DOCUMENT_DEPTH_MAX, document_bytes_max, json_value_check, text_storable

from sessions_app.checkpoints import conversation, fastpath, references, versions
from sessions_app.checkpoints.langgraph import is_langgraph_checkpoint, next_nodes, nodes_run
from sessions_app.checkpoints.selectors import checkpoint_etag, checkpoint_id_validate, checkpoint_ns_validate
from sessions_app.checkpoints.wire import WRITES_IDX_MAP
from sessions_app.checkpoints.models import Checkpoint, CheckpointWrite
from sessions_app.checkpoints.removal import values_replaced
from sessions_app.checkpoints.status import status_refresh_named, status_touch, writes_change_status
from sessions_app.threads.models import Thread
from sessions_app.threads.selectors import etag_matches, thread_id_validate

NODE_ID_MAX = 255
TASK_ID_MAX = 255
TASK_PATH_MAX = 1024
CHANNEL_MAX = 255
MAX_WRITES_PER_CALL = 10_000

PruneStrategy = Literal["keep_latest", "delete"]


# --- input checks ------------------------------------------------------------------------------


def _json_value(value: Any, field_name: str, *, document: bool = True) -> Any:
    """JSON as it will be stored, else a 400 naming the field (memoryadmin/jsoncheck.py:
    storable strings, finite numbers, nesting and size). A document (a checkpoint, a write's
    value) may be DOCUMENT_DEPTH_MAX deep and as large as a body; metadata DEPTH_MAX deep
    and of the small-value size."""
    if document:
        return json_value_check(value, field_name, depth_max=DOCUMENT_DEPTH_MAX, bytes_max=document_bytes_max())
    return json_value_check(value, field_name, depth_max=DEPTH_MAX)


def _json_object(value: Any, field_name: str, *, required: bool = False, document: bool = False) -> dict[str, Any]:
    """A JSON object: metadata unless `document`."""
    if value is None and not required:
        return {}
    if not isinstance(value, dict):
        message = "is required (a JSON object)." if value is None else "must be a JSON object."
        raise InvalidInput(f"{field_name} {message}", fields={field_name: [message]})
    return _json_value(value, field_name, document=document)


def _short_text(value: Any, field_name: str, maximum: int, *, required: bool = False) -> str:
    if value is None or value == "":
        if required:
            raise InvalidInput(f"{field_name} is required.", fields={field_name: ["is required."]})
        return ""
    if not isinstance(value, str) or len(value) > maximum or not text_storable(value):
        message = f"must be a string of at most {maximum} characters."
        raise InvalidInput(f"{field_name} {message}", fields={field_name: [message]})
    return value


@dataclass(frozen=True)
class CheckpointInput:
    checkpoint: dict[str, Any]
    metadata: dict[str, Any]
    checkpoint_ns: str
    parent_checkpoint_id: str
    node_id: str | None
    next_node_id: str | None
    # The messages channel as a delta ({"head", "append"}), when it is not in channel_values.
    messages: conversation.Delta | None = None
    # The channels holding messages by reference to the messages channel (references.py).
    refs: list[str] | None = None


def checkpoint_input(
    *,
    checkpoint: Any,
    metadata: Any = None,
    checkpoint_ns: Any = None,
    parent_checkpoint_id: Any = None,
    node_id: Any = None,
    next_node_id: Any = None,
    messages: Any = None,
    refs: Any = None,
) -> CheckpointInput:
    """Validate the body of a checkpoint put; every error names its field."""
    body = _json_object(checkpoint, "checkpoint", required=True, document=True)
    if "channel_values" in body and not isinstance(body["channel_values"], dict):
        raise InvalidInput(
            "checkpoint.channel_values must be a JSON object.",
            fields={"checkpoint.channel_values": ["must be a JSON object."]},
        )
    delta = conversation.delta_input(None if messages is None else _json_value(messages, "messages"))
    if delta is not None:
        ns = checkpoint_ns_validate(checkpoint_ns)
        channel = delta.channel
        if ns or not is_langgraph_checkpoint(body) or channel in (body.get("channel_values") or {}):
            message = f"a delta is for a root LangGraph checkpoint whose channel_values leave out {channel!r}."
            raise InvalidInput(f"messages: {message}", fields={"messages": [message]})
    parent = None
    if parent_checkpoint_id not in (None, ""):
        parent = checkpoint_id_validate(parent_checkpoint_id, "parent_checkpoint_id")
    return CheckpointInput(
        checkpoint=body,
        metadata=_json_object(metadata, "metadata"),
        checkpoint_ns=checkpoint_ns_validate(checkpoint_ns),
        parent_checkpoint_id=parent or "",
        node_id=None if node_id is None else _short_text(node_id, "node_id", NODE_ID_MAX),
        next_node_id=None if next_node_id is None else _short_text(next_node_id, "next_node_id", NODE_ID_MAX),
        messages=delta,
        refs=references.refs_input(refs, body.get("channel_values") or {}),
    )


def _json_field_value(value: Any) -> Any:
    """A value for a JSONField: Django saves a bare None as SQL NULL, JSON null needs saying so."""
    return Value(None, output_field=JSONField()) if value is None else value


def _run_id(metadata: dict[str, Any]) -> str:
    run_id = metadata.get("run_id")
    return str(run_id)[:RUN_ID_MAX] if isinstance(run_id, str | int) and not isinstance(run_id, bool) else ""


# --- ownership ---------------------------------------------------------------------------------


def _ensure_may_write(actor, thread_id: str, action: str) -> None:
    """Before anything is read: whether the actor may do `action` to a thread of their own (operators may not)."""
    policy.ensure_may_write(actor, owner_id=None, target=f"thread:{thread_id}", action=action)


def _ensure_owner(actor, thread: Thread, action: str) -> None:
    """Only the owner writes content into a thread: not another member, not an admin."""
    policy.ensure_may_write(actor, owner_id=thread.owner_id, target=f"thread:{thread.thread_id}", action=action)


def _thread_for_write(*, actor, thread_id: str, action: str, create: bool) -> tuple[Thread, bool]:
    """The thread locked for this transaction, created for the actor when `create` and new.

    Two first writes of one new thread race on the unique thread_id: the loser's
    insert fails and it then locks the winner's row (as the agent-state save does).
    """
    thread_id_validate(thread_id)
    _ensure_may_write(actor, thread_id, action)
    thread = Thread.objects.select_for_update().filter(thread_id=thread_id).first()
    created = False
    if thread is None:
        if not create:
            raise NotFound(f"Thread {thread_id!r} does not exist.")
        try:
            with transaction.atomic():
                thread = Thread.objects.create(thread_id=thread_id, owner=actor)
                created = True
        except IntegrityError:
            thread = Thread.objects.select_for_update().get(thread_id=thread_id)
    _ensure_owner(actor, thread, action)
    return thread, created


def _same_checkpoint() -> Q:
    """Inside a subquery on checkpoints: the one the outer pending write belongs to."""
    return Q(thread=OuterRef("thread"), checkpoint_ns=OuterRef("checkpoint_ns"), checkpoint_id=OuterRef("checkpoint_id"))


def _touch(thread: Thread) -> None:
    Thread.objects.filter(pk=thread.pk).update(updated_at=timezone.now())


# --- put, replace, writes ----------------------------------------------------------------------


@dataclass(frozen=True)
class PutResult:
    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    created: bool
    etag: str = ""  # the checkpoint's ETag once written (an HTTP header, not part of the body)
    # The chain head and count of the thread's messages once this checkpoint's are the active blocks.
    messages: dict[str, Any] | None = None
    # The latest read's state tag once this checkpoint is stored (latest.py): given by the fast path.
    state_tag: str | None = None

    def as_dict(self) -> dict[str, Any]:
        answer: dict[str, Any] = {
            "thread_id": self.thread_id, "checkpoint_ns": self.checkpoint_ns, "checkpoint_id": self.checkpoint_id
        }
        if self.messages is not None:
            answer["messages"] = self.messages
        if self.state_tag is not None:
            answer["state_tag"] = self.state_tag
        return answer


NO_PARENT = object()


def _positions(thread: Thread, data: CheckpointInput, parent_seen: Any = NO_PARENT) -> tuple[str, str]:
    """node_id and next_node_id: as given, else read from a LangGraph checkpoint's versions
    (and its parent's `versions_seen`: read here unless the caller read it already)."""
    node_id, next_node_id = data.node_id, data.next_node_id
    if is_langgraph_checkpoint(data.checkpoint):
        if next_node_id is None:
            next_node_id = ",".join(next_nodes(data.checkpoint))[:NODE_ID_MAX]
        if node_id is None:
            if parent_seen is NO_PARENT:
                parent_seen = None
                if data.parent_checkpoint_id:
                    parent_seen = (
                        Checkpoint.objects.filter(
                            thread=thread, checkpoint_ns=data.checkpoint_ns, checkpoint_id=data.parent_checkpoint_id
                        )
                        .values_list("checkpoint__versions_seen", flat=True)
                        .first()
                    )
            node_id = ",".join(nodes_run(data.checkpoint["versions_seen"], parent_seen))[:NODE_ID_MAX]
    return node_id or "", next_node_id or ""


def _this_and_parent(thread: Thread, data: CheckpointInput, checkpoint_id: str) -> tuple[Checkpoint | None, Any]:
    """The checkpoint being put (None when new) and its parent's versions_seen: one query."""
    ids = {checkpoint_id, data.parent_checkpoint_id} - {""}
    rows = (
        Checkpoint.objects.filter(thread=thread, checkpoint_ns=data.checkpoint_ns, checkpoint_id__in=ids)
        .defer("checkpoint")
        .annotate(seen=KeyTransform("versions_seen", "checkpoint"))
    )
    found = {row.checkpoint_id: row for row in rows}
    parent = found.get(data.parent_checkpoint_id)
    return found.get(checkpoint_id), parent.seen if parent is not None else None


def _fields(thread: Thread, data: CheckpointInput, parent_seen: Any = NO_PARENT) -> dict[str, Any]:
    node_id, next_node_id = _positions(thread, data, parent_seen)
    return {
        "parent_checkpoint_id": data.parent_checkpoint_id,
        "checkpoint": data.checkpoint,
        "metadata": data.metadata,
        "run_id": _run_id(data.metadata),
        "node_id": node_id,
        "next_node_id": next_node_id,
        "refs": data.refs,
    }


def checkpoint_put(
    *, actor, thread_id: str, data: CheckpointInput, checkpoint_id: Any = None, action: str = "checkpoint.put"
) -> PutResult:
    """Push a checkpoint, or upsert it by id (POST /threads/{id}/checkpoints).

    The saver's put (docs/checkpoints.md, rule C2): without an id a new checkpoint is
    pushed and becomes the latest (the server makes its id). With an id, LangGraph's put: a new id is
    pushed, an existing one is replaced in place (a retried put is idempotent).
    The thread is created for the caller on its first checkpoint; another
    user's thread is a 403 with nothing written. `action` is the rule asked: a fork
    from the dashboard (state_update.checkpoint_fork) asks its own.
    """
    if checkpoint_id is None:
        checkpoint_id = str(uuid.uuid4())
    else:
        checkpoint_id_validate(checkpoint_id)
    thread_id_validate(thread_id)
    if action == "checkpoint.put":
        # On PostgreSQL the next step of an agent's own thread: one round trip, or two (fastpath.py).
        fast = fastpath.checkpoint_put_fast(
            actor=actor, thread_id=thread_id, data=data, checkpoint_id=checkpoint_id, run_id=_run_id(data.metadata)
        )
        if fast is not None:
            return PutResult(thread_id, data.checkpoint_ns, checkpoint_id, created=True, messages=fast.messages,
                             state_tag=fast.state_tag)
    return _checkpoint_put_locked(actor=actor, thread_id=thread_id, data=data, checkpoint_id=checkpoint_id, action=action)


@transaction.atomic
def _checkpoint_put_locked(*, actor, thread_id: str, data: CheckpointInput, checkpoint_id: str, action: str) -> PutResult:
    """The put under the thread's row lock: every case, every refusal."""
    thread, existing, parent_seen = _thread_and_checkpoints_for_put(actor, thread_id, data, checkpoint_id, action)
    fields = _fields(thread, data, parent_seen)
    answer, moved = _conversation(actor, thread, data, fields, existing)
    _refs_fit(data, fields)
    _by_version(thread, data, fields)
    if existing is None:
        Checkpoint.objects.create(thread=thread, checkpoint_ns=data.checkpoint_ns, checkpoint_id=checkpoint_id, **fields)
    else:
        before = existing.__dict__.get("values_ref")
        for name, value in fields.items():
            setattr(existing, name, value)
        existing.save_in_thread([*fields, "updated_at"])
        values_replaced(thread.pk, data.checkpoint_ns, before, fields["values_ref"])
    # The conversation's save, when it wrote, moved the thread's updated_at already.
    if not data.checkpoint_ns:
        status_touch(thread.pk, touch=not moved)  # a root checkpoint: the thread's status too (status.py)
    elif not moved:
        _touch(thread)
    return PutResult(thread.thread_id, data.checkpoint_ns, checkpoint_id, created=existing is None, messages=answer)


def _thread_and_checkpoints_for_put(actor, thread_id: str, data: CheckpointInput, checkpoint_id: str, action: str):
    """The thread locked for the put (created for the actor when new), the checkpoint being
    put when it exists, and its parent's versions_seen: one statement for a thread that exists
    (the row lock and both lookups), none but the insert for a new one."""
    thread_id_validate(thread_id)
    _ensure_may_write(actor, thread_id, action)
    same = Checkpoint.objects.filter(thread=OuterRef("pk"), checkpoint_ns=data.checkpoint_ns)
    thread = (
        Thread.objects.select_for_update(of=("self",))
        .filter(thread_id=thread_id)
        .annotate(
            put_pk=Subquery(same.filter(checkpoint_id=checkpoint_id).values("pk")[:1]),
            put_refs=Subquery(same.filter(checkpoint_id=checkpoint_id).values("values_ref")[:1]),
            parent_seen=Subquery(
                same.filter(checkpoint_id=data.parent_checkpoint_id or "")
                .annotate(seen=KeyTransform("versions_seen", "checkpoint"))
                .values("seen")[:1]
            ),
        )
        .first()
    )
    if thread is None:
        # A new thread has no checkpoint to find: nothing more is read before the first write.
        thread, created = _thread_for_write(actor=actor, thread_id=thread_id, action=action, create=True)
        existing, parent_seen = (None, None) if created else _this_and_parent(thread, data, checkpoint_id)
        return thread, existing, parent_seen
    _ensure_owner(actor, thread, action)
    existing = None
    if thread.put_pk is not None:
        existing = Checkpoint(
            pk=thread.put_pk, thread=thread, checkpoint_ns=data.checkpoint_ns, checkpoint_id=checkpoint_id, values_ref=thread.put_refs
        )
    return thread, existing, thread.parent_seen if isinstance(thread.parent_seen, dict) else None


def _refs_fit(data: CheckpointInput, fields: dict[str, Any]) -> None:
    """The put's markers fit its messages: those it holds, or those kept as the thread's blocks."""
    if not data.refs:
        return
    ref = fields.get("messages_ref")
    held = {ref["channel"]: ref["count"]} if isinstance(ref, dict) else None
    values = data.checkpoint.get("channel_values") or {}
    references.refs_check(data.refs, values, references.list_lengths(values, held))


def _by_version(thread: Thread, data: CheckpointInput, fields: dict[str, Any]) -> None:
    """Large channel values stored once per version (versions.py); `fields` changed in place."""
    fields["checkpoint"], fields["values_ref"] = versions.values_split(
        thread=thread, checkpoint_ns=data.checkpoint_ns, body=fields["checkpoint"], keep=set(data.refs or ())
    )


def _is_latest_root(thread: Thread, existing: Checkpoint | None) -> bool:
    """A put that makes (or replaces) the thread's latest root checkpoint: its messages are the active blocks."""
    if existing is None:
        return True
    latest = Checkpoint.objects.filter(thread=thread, checkpoint_ns="").order_by("-id").values_list("pk", flat=True).first()
    return latest == existing.pk


def _conversation(actor, thread: Thread, data: CheckpointInput, fields: dict[str, Any], existing) -> tuple[dict[str, Any] | None, bool]:
    """A root LangGraph checkpoint's messages kept as the thread's blocks, the channel stored by
    reference (conversation.py); `fields` are changed in place. The answer's `messages` (or
    None) and whether the thread row was written."""
    fields["messages_ref"] = None
    values = (data.checkpoint.get("channel_values") or {}) if is_langgraph_checkpoint(data.checkpoint) else {}
    channel, whole = conversation.conversation_channel(values, data.messages)
    if data.checkpoint_ns or (whole is None and data.messages is None):
        return None, False
    if not _is_latest_root(thread, existing):
        if data.messages is None:
            return None, False
        raise PreconditionFailed(
            "A delta is for the latest checkpoint; send this checkpoint's messages whole.",
            fields={"messages": ["the checkpoint is not the thread's latest."]},
        )
    # The blocks follow from a checkpoint write the policy already allowed (an admin's fork of
    # another user's thread, say): they are written as the thread's owner's, whose they are.
    writer = actor if policy.may_write(actor, owner_id=thread.owner_id, action="thread.write") else thread.owner
    kept = conversation.conversation_keep(
        actor=writer, thread=thread, channel=channel, metadata=data.metadata, values=whole, delta=data.messages
    )
    body = dict(data.checkpoint)
    body["channel_values"] = {name: value for name, value in values.items() if name != channel}
    fields["checkpoint"] = body
    fields["messages_ref"] = kept.ref
    return {"channel": channel, "head": kept.head, "count": kept.ref["count"]}, kept.moved


@transaction.atomic
def checkpoint_replace(
    *, actor, thread_id: str, checkpoint_id: str, data: CheckpointInput, if_match: str | None = None
) -> PutResult:
    """Replace a checkpoint in place (PUT /threads/{id}/checkpoints/{checkpoint_id}).

    The saver's put with an id (docs/checkpoints.md, rule C3): the checkpoint keeps its
    position in the history;
    an id (or thread) that does not exist is a 404 and nothing is written. With
    `if_match` (an HTTP If-Match value) the replacement happens only if the
    checkpoint still has that ETag (`*`: if it exists), else a 412 and nothing is
    written: the optimistic concurrency of the agent-state save, per checkpoint.
    The thread's row lock (taken first) orders the check and the write against
    every other write to the thread.
    """
    checkpoint_id_validate(checkpoint_id)
    thread, _ = _thread_for_write(actor=actor, thread_id=thread_id, action="checkpoint.replace", create=False)
    existing = Checkpoint.objects.filter(
        thread=thread, checkpoint_ns=data.checkpoint_ns, checkpoint_id=checkpoint_id
    ).first()
    if if_match is not None and not etag_matches(if_match, None if existing is None else checkpoint_etag(existing)):
        raise PreconditionFailed(
            "The checkpoint changed since you read it, or does not exist (If-Match does not match its ETag); "
            "read it again.",
            fields={"If-Match": ["does not match the checkpoint's current ETag."]},
        )
    if existing is None:
        raise NotFound(f"Checkpoint {checkpoint_id!r} does not exist in thread {thread_id!r}; nothing was written.")
    if data.messages is not None:
        raise InvalidInput(
            "messages: a replacement carries its channel values whole.", fields={"messages": ["is not accepted here."]}
        )
    fields = _fields(thread, data)
    fields["messages_ref"] = None  # a replacement in place holds its messages itself
    _refs_fit(data, fields)
    _by_version(thread, data, fields)
    before = existing.values_ref
    for name, value in fields.items():
        setattr(existing, name, value)
    existing.save_in_thread([*fields, "updated_at"])
    values_replaced(thread.pk, data.checkpoint_ns, before, fields["values_ref"])
    if data.checkpoint_ns:
        _touch(thread)
    else:
        status_touch(thread.pk)
    return PutResult(thread.thread_id, data.checkpoint_ns, checkpoint_id, created=False, etag=checkpoint_etag(existing))


@dataclass(frozen=True)
class WriteInput:
    task_id: str
    task_path: str
    writes: list[tuple[str, Any]]
    # The indexes (in `writes`) of the values holding messages by reference (references.py).
    refers: frozenset[int] = frozenset()


def write_input(*, task_id: Any, task_path: Any = None, writes: Any) -> WriteInput:
    """Validate the body of a pending-writes call; every error names its field."""
    task_id = _short_text(task_id, "task_id", TASK_ID_MAX, required=True)
    task_path = _short_text(task_path, "task_path", TASK_PATH_MAX)
    if not isinstance(writes, list):
        raise InvalidInput("writes must be a list of {channel, value}.", fields={"writes": ["must be a list."]})
    if len(writes) > MAX_WRITES_PER_CALL:
        raise InvalidInput(
            f"writes holds {len(writes)} items; the limit is {MAX_WRITES_PER_CALL}.",
            fields={"writes": [f"at most {MAX_WRITES_PER_CALL} items."]},
        )
    parsed, refers = [], set()
    for index, item in enumerate(writes):
        where = f"writes[{index}]"
        if not isinstance(item, dict) or "channel" not in item or "value" not in item:
            raise InvalidInput(
                f"{where} must be an object with channel and value.",
                fields={where: ["must be an object with channel and value."]},
            )
        channel = _short_text(item["channel"], f"{where}.channel", CHANNEL_MAX, required=True)
        parsed.append((channel, _json_value(item["value"], f"{where}.value")))
        flag = item.get("refs", False)
        if type(flag) is not bool:
            raise InvalidInput(f"{where}.refs must be true or false.", fields={f"{where}.refs": ["must be true or false."]})
        if flag:
            references.markers_of(parsed[-1][1], f"{where}.value", named=True)
            refers.add(index)
    return WriteInput(task_id=task_id, task_path=task_path, writes=parsed, refers=frozenset(refers))


def checkpoint_put_writes(
    *, actor, thread_id: str, checkpoint_id: str, checkpoint_ns: Any = None, data: WriteInput
) -> int:
    """Store a task's pending writes against a checkpoint; returns how many rows were written.

    LangGraph's put_writes: a write's index is its position, except for the
    special channels (WRITES_IDX_MAP: error -1, scheduled -2, interrupt -3,
    resume -4). A (task_id, idx) already stored is kept for ordinary writes (a
    retried task writes nothing twice) and replaced for special ones (the latest
    error or interrupt wins).

    The checkpoint need not be stored yet, and the thread is created for the
    caller if new: LangGraph's loop sends a task's writes concurrently with the
    put of their checkpoint, so they may arrive first.
    """
    checkpoint_id_validate(checkpoint_id)
    checkpoint_ns = checkpoint_ns_validate(checkpoint_ns)
    thread_id_validate(thread_id)
    # On PostgreSQL the writes of an agent's own thread: one statement, or three in one
    # transaction for writes holding messages by reference (fastpath.py).
    rows = {WRITES_IDX_MAP.get(channel, index): (channel, value) for index, (channel, value) in enumerate(data.writes)}
    marked = {WRITES_IDX_MAP.get(data.writes[index][0], index): data.writes[index][1] for index in data.refers}
    written = fastpath.checkpoint_put_writes_fast(
        actor=actor, thread_id=thread_id, checkpoint_ns=checkpoint_ns, checkpoint_id=checkpoint_id,
        task_id=data.task_id, task_path=data.task_path, rows=rows, marked=marked,
    )
    if written is not None:
        if writes_change_status(checkpoint_ns, [channel for channel, _ in data.writes]):
            status_refresh_named(thread_id)  # an error or an interrupt: the thread's status (status.py)
        return written
    return _checkpoint_put_writes_locked(
        actor=actor, thread_id=thread_id, checkpoint_ns=checkpoint_ns, checkpoint_id=checkpoint_id, data=data
    )


@transaction.atomic
def _checkpoint_put_writes_locked(*, actor, thread_id: str, checkpoint_ns: str, checkpoint_id: str, data: WriteInput) -> int:
    """The writes under the thread's row lock: every case, every refusal."""
    thread, _ = _thread_for_write(actor=actor, thread_id=thread_id, action="checkpoint.write", create=True)
    key = {"thread": thread, "checkpoint_ns": checkpoint_ns, "checkpoint_id": checkpoint_id}
    # Values holding messages by reference, as stored (references.py): one query, or a 412.
    marked = {}
    if data.refers:
        values = {index: data.writes[index][1] for index in data.refers}
        marked = references.writes_resolve(thread=thread, checkpoint_ns=checkpoint_ns, checkpoint_id=checkpoint_id, values=values)
    rows = {}
    for index, (channel, value) in enumerate(data.writes):
        kept, refers = marked.get(index, (value, False))
        rows[WRITES_IDX_MAP.get(channel, index)] = (channel, kept, refers)
    stored = {
        write.idx: write
        for write in CheckpointWrite.objects.filter(**key, task_id=data.task_id, idx__in=list(rows))
    }
    new, replaced = [], []
    for idx, (channel, value, refers) in rows.items():
        current = stored.get(idx)
        if current is None:
            new.append(
                CheckpointWrite(
                    **key,
                    task_id=data.task_id,
                    task_path=data.task_path,
                    idx=idx,
                    channel=channel,
                    value=_json_field_value(value),
                    refers=refers,
                )
            )
        elif idx < 0:
            replaced.append((current.pk, channel, value, refers))
    CheckpointWrite.objects.bulk_create(new, batch_size=1000)
    # The special channels' writes (an error, an interrupt: a handful) replace what the task wrote
    # there, one UPDATE each: a bulk update's CASE would write a JSON null as SQL NULL.
    for pk, channel, value, refers in replaced:
        CheckpointWrite.objects.filter(pk=pk).update(
            channel=channel, value=_json_field_value(value), task_path=data.task_path, refers=refers
        )
    if writes_change_status(checkpoint_ns, [channel for channel, _ in data.writes]):
        status_touch(thread.pk, touch=False)
    return len(new) + len(replaced)


# --- LangGraph's thread writes (POST /threads, PATCH /threads/{id}) ---------------------------------


RUN_ID_MAX = 128
