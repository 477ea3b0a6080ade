"""Writes to threads and blocks. Every rule of the conversation store lives here.

The rules are docs/architecture.md, rules S1-S9 (a thread row, and a block per
message). Two of them avoid the production bugs of the store this one is modelled
on: a compaction is detected by the context no longer extending what is stored
(count shrink *or* a hash-chain mismatch), never by a summary field, which goes
unnoticed when the compaction leaves it empty (S5); and new seq numbers continue from
the highest seq ever given, archived rows included, since a rewrite restarting seq at
1 collides with the archived rows on the unique key at the second compaction (S6).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Case, Count, F, OuterRef, Subquery, Value, When
from django.utils import timezone

from memoryadmin import policy
from memoryadmin.audit import audit_record, audit_records
from memoryadmin.errors import InvalidInput, PreconditionFailed
from memoryadmin.json import db_text
from memoryadmin.jsoncheck import DEPTH_MAX, json_value_check, text_input_check
from memoryadmin.metrics import BLOCK_APPEND, BLOCK_ARCHIVE_WRITE, BLOCK_PERSIST_FAIL, BLOCK_TRUNCATE
from memoryadmin.postgres.prepared import prepared_cursor

from sessions_app.threads import remembered
from sessions_app.threads.messages import ContextHasher, ParsedMessage, parse_message
from sessions_app.threads.notify import stream_end_fields, thread_notify, threads_notify
from .models import TITLE_MAX, Block, Thread, thread_rows_delete, threads_rows_delete
from sessions_app.threads.selectors import etag_matches, thread_etag, thread_get_for_write, thread_id_validate, threads_get_for_write

AGENT_CODE_MAX = 64

Mode = Literal["append", "rewrite", "noop"]


@dataclass(frozen=True)
class SaveResult:
    thread_id: str
    mode: Mode
    appended: int
    archived: int
    active: int
    max_seq: int
    # The chain digest of the agent's last active message after the save ("" when its
    # context is empty): what an append continues from (docs/api.md).
    head: str = ""
    # The thread's entity tag after the save (an HTTP header, not part of the body).
    etag: str = ""

    def as_dict(self) -> dict[str, Any]:
        body = asdict(self)
        del body["etag"]
        return body


def _validate_context_shape(context: Any) -> None:
    if not isinstance(context, list):
        raise InvalidInput("context must be a list of messages.", fields={"context": ["must be a list."]})
    limit = settings.MEMORYADMIN_MAX_CONTEXT_MESSAGES
    if len(context) > limit:
        raise InvalidInput(
            f"context holds {len(context)} messages; the limit is {limit}.",
            fields={"context": [f"at most {limit} messages."]},
        )


def parse_messages(context: list, start: int, field: str = "context") -> list[ParsedMessage]:
    """Validate the messages from `start` on; errors name their index in the whole context.

    Messages before `start` match the stored chain, so they were validated when stored:
    a save costs a Python loop over the new messages only.
    """
    parsed: list[ParsedMessage] = []
    errors: dict[str, list[str]] = {}
    for index in range(start, len(context)):
        item, item_errors = parse_message(context[index], f"{field}[{index}]")
        if item_errors:
            errors.update(item_errors)
            if len(errors) >= 20:
                break
        else:
            parsed.append(item)
    if errors:
        first = next(iter(errors))
        raise InvalidInput(f"Invalid message: {first} {errors[first][0]}", fields=errors)
    return parsed


def not_json(exc: TypeError) -> InvalidInput:
    return InvalidInput(f"context cannot be stored as JSON: {exc}", fields={"context": [str(exc)]})


def validate_agent_code(agent_code: Any) -> str:
    if not isinstance(agent_code, str) or not agent_code.strip():
        raise InvalidInput("agent_code is required.", fields={"agent_code": ["is required."]})
    if len(agent_code) > AGENT_CODE_MAX:
        raise InvalidInput(
            f"agent_code is longer than {AGENT_CODE_MAX} characters.",
            fields={"agent_code": [f"at most {AGENT_CODE_MAX} characters."]},
        )
    return text_input_check(agent_code, "agent_code")


def validate_extra_state(extra_state: Any) -> dict | None:
    """extra_state as stored: a JSON object within the limits, or None (rule S8)."""
    if extra_state is None:
        return None
    if not isinstance(extra_state, dict):
        raise InvalidInput("extra_state must be a JSON object or null.", fields={"extra_state": ["must be an object or null."]})
    return json_value_check(extra_state, "extra_state", depth_max=DEPTH_MAX)


def title_from_text(text: str) -> str:
    """A thread's title: the text with its whitespace collapsed, at most TITLE_MAX characters;
    a longer text is cut at a word boundary (mid-word only for a word longer than half the
    title) and ends with an ellipsis, so a cut title never reads as the whole question."""
    text = " ".join(text.split())
    if len(text) <= TITLE_MAX:
        return text
    cut = text[: TITLE_MAX - 1]
    space = cut.rfind(" ")
    if space >= TITLE_MAX // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:.-") + "…"


def title_from(parsed: list[ParsedMessage]) -> str:
    """The first user message's text, as a title (title_from_text)."""
    for item in parsed:
        if item.role == "user":
            title = title_from_text(item.content)
            if title:
                return title
    return ""


def ensure_writer(actor, thread: Thread) -> None:
    """Only a thread's owner writes to it: not another member, not an operator, not an admin (memoryadmin.policy)."""
    policy.ensure_may_write(actor, owner_id=thread.owner_id, target=f"thread:{thread.thread_id}", action="thread.write")


def ensure_can_write_at_all(actor, thread_id: str) -> None:
    """Before anything is read: whether the actor may write a thread of their own (operators may not)."""
    policy.ensure_may_write(actor, owner_id=None, target=f"thread:{thread_id}", action="thread.write")


def lock_or_create(*, thread_id: str, actor, agent_code: str) -> tuple[Thread, bool]:
    """The thread row locked for this transaction, created (owned by actor) when new.

    Two first saves of one new thread race on the unique thread_id: the loser's
    insert waits for the winner and fails, and it then locks the winner's row.
    """
    thread = Thread.objects.select_for_update().filter(thread_id=thread_id).first()
    if thread is not None:
        return thread, False
    try:
        with transaction.atomic():
            return Thread.objects.create(thread_id=thread_id, owner=actor, agent_code=agent_code), True
    except IntegrityError:
        return Thread.objects.select_for_update().get(thread_id=thread_id), False


def thread_save_agent_state(
    *,
    actor,
    thread_id: str,
    agent_code: Any,
    context: Any,
    extra_state: Any = None,
    extra_state_given: bool = False,
    if_match: str | None = None,
) -> SaveResult:
    """Save an agent's state: context blocks appended or rewritten, extra_state overwritten.

    docs/architecture.md, rules S1-S9: one transaction with the thread row locked; 403
    on another owner's thread with nothing written; rewrite when the context is shorter
    than the active blocks or its stored prefix changed (hash chain); append
    the tail otherwise; no-op when equal; seq continues from max(seq)
    including archived rows. With `if_match` (an HTTP If-Match value) the save
    happens only if the thread is still in that state, else 412 and nothing is
    written: optimistic concurrency for agents that run several replicas.
    """
    try:
        thread_id_validate(thread_id)
        agent_code = validate_agent_code(agent_code)
        _validate_context_shape(context)
        if extra_state_given:
            extra_state = validate_extra_state(extra_state)
        ensure_can_write_at_all(actor, thread_id)
        save = {
            "actor": actor,
            "thread_id": thread_id,
            "agent_code": agent_code,
            "context": context,
            "extra_state": extra_state,
            "extra_state_given": extra_state_given,
            "if_match": if_match,
        }
        result = _append_in_one_statement(**save) if connection.vendor == "postgresql" else None
        counters = {"rewrite": False, "archived": 0}
        if result is None:
            result, counters = _save(**save)
    except Exception:
        BLOCK_PERSIST_FAIL.inc()
        raise
    if counters["rewrite"]:
        BLOCK_TRUNCATE.inc()
    BLOCK_ARCHIVE_WRITE.inc(counters["archived"])
    BLOCK_APPEND.inc(result.appended)
    return result


# The common save, an agent adding a turn to its own thread, in one round trip on PostgreSQL
# (two when the thread must be read: sessions_app/threads/remembered.py): read the thread
# with its chain head (no lock) unless this process remembers it, check the posted prefix
# against that head in Python, then ONE statement that moves the thread row only if
# it is still in the state that was read and inserts the new blocks only if it moved.
# A concurrent writer makes the conditional UPDATE match nothing (PostgreSQL
# re-checks its WHERE on the row's newest version after waiting for the writer's
# lock), so nothing is inserted and the save goes through the locked path below.
# Everything else (a new thread, another owner, a rewrite, a no-op, an If-Match
# that does not match) also goes through the locked path, which holds every rule.
#
# The statements are public (HEAD_SQL, APPEND_SQL, APPEND_ROW; rendered with the table
# names by `thread_head_sql` and `thread_append_sql`) so that a measurement of the save
# (bench/run.py) sends exactly what a save sends. HEAD_SQL takes (agent_code,
# thread_id) and returns the thread row's guarded columns with the chain head;
# APPEND_SQL takes the thread's new values, the values read (the guard), then one
# APPEND_ROW per new block: (seq, position, role, content, message JSON, block_type,
# chain_hash). It inserts nothing when the guard no longer holds.
HEAD_SQL = """
SELECT t.id, t.owner_id, t.agent_code, t.last_seq, t.rewrite_count, t.active_count, t.updated_at,
       t.title = '', h.position, h.chain_hash
  FROM {thread} t
  LEFT JOIN LATERAL (
        SELECT b.position, b.chain_hash FROM {block} b
         WHERE b.thread_id = t.id AND b.agent_code = %s AND NOT b.archived
         ORDER BY b.seq DESC LIMIT 1) h ON true
 WHERE t.thread_id = %s
"""

# The guarded update of the thread row that the one-statement append's (and the checkpoint fast
# path's) other writes hang on: it matches only a row unchanged since HEAD_SQL read it.
MOVED_SQL = """
    UPDATE {thread}
       SET last_seq = %s, active_count = active_count + %s, agent_code = %s, updated_at = %s,
           title = CASE WHEN title = '' THEN %s ELSE title END{extra_state}
     WHERE id = %s AND owner_id = %s AND last_seq = %s AND rewrite_count = %s
       AND active_count = %s AND updated_at = %s
 RETURNING id"""

APPEND_SQL = "\nWITH moved AS (" + MOVED_SQL + """)
INSERT INTO {block} (thread_id, agent_code, seq, position, role, content, message, block_type,
                     archived, chain_hash, created_at)
SELECT moved.id, %s, v.seq, v.position, v.role, v.content, v.message::jsonb, v.block_type, false,
       v.chain_hash, %s
  FROM moved CROSS JOIN (VALUES {rows}) AS v(seq, position, role, content, message, block_type, chain_hash)
"""
APPEND_ROW = "(%s::bigint, %s::integer, %s, %s, %s, %s, %s)"


def thread_head_sql() -> str:
    """HEAD_SQL with this database's table names: the read of the one-statement append."""
    return HEAD_SQL.format(thread=Thread._meta.db_table, block=Block._meta.db_table)


def thread_append_sql(*, rows: int, with_extra_state: bool = False) -> str:
    """APPEND_SQL for `rows` new blocks with this database's table names: the one-statement append.

    With `with_extra_state` the statement also overwrites extra_state (one more
    parameter, after the title's).
    """
    return APPEND_SQL.format(
        thread=Thread._meta.db_table,
        block=Block._meta.db_table,
        extra_state=", extra_state = %s::jsonb" if with_extra_state else "",
        rows=", ".join([APPEND_ROW] * rows),
    )


def append_row_params(parsed: list, *, last_seq: int, start: int, digests: list[str], messages: list[str] | None = None) -> list:
    """The parameters of `parsed`'s APPEND_ROWs: each block's seq after `last_seq`, position from
    `start`, role, content, message (its stored JSON text), type and chain digest."""
    texts = messages if messages is not None else [db_text(item.message) for item in parsed]
    params: list[Any] = []
    for offset, item in enumerate(parsed):
        params += [last_seq + 1 + offset, start + offset, item.role, item.content, texts[offset], item.block_type, digests[offset]]
    return params


def head_row_etag_matches(if_match: str, row: tuple) -> bool:
    """Whether If-Match names the ETag of the thread read by `thread_head_sql` (its row, unlocked)."""
    pk, _owner_id, agent_code, last_seq, rewrite_count, _active, updated_at, *_rest = row
    read = Thread(pk=pk, last_seq=last_seq, rewrite_count=rewrite_count, updated_at=updated_at, agent_code=agent_code)
    return etag_matches(if_match, thread_etag(read))


def blocks_for(thread: Thread, agent_code: str, parsed: list, *, start: int, digests: list[str], now) -> list[Block]:
    """The Block rows of `parsed` placed from position `start`, each taking the thread's next seq
    (`thread.last_seq` advances; rule S2) and its chain digest."""
    blocks = []
    for offset, item in enumerate(parsed):
        thread.last_seq += 1
        blocks.append(
            Block(
                thread=thread, agent_code=agent_code, seq=thread.last_seq, position=start + offset, role=item.role,
                content=item.content, message=item.message, block_type=item.block_type, chain_hash=digests[offset],
                created_at=now,
            )
        )
    return blocks


def _append_in_one_statement(
    *, actor, thread_id, agent_code, context, extra_state, extra_state_given, if_match
) -> SaveResult | None:
    """The save as an append in one conditional statement, or None for the locked path: tried
    on the thread row as this process's last save left it, then on the row as read."""
    hasher = ContextHasher(context)
    for row in head_rows(actor=actor, thread_id=thread_id, agent_code=agent_code):
        _pk, owner_id, *_counts, position, head = row
        if not policy.may_write(actor, owner_id=owner_id, action="thread.write"):
            return None  # the locked path refuses it, with the refusal's audit detail
        if if_match is not None and not head_row_etag_matches(if_match, row):
            continue
        stored = position + 1 if head is not None else 0
        if len(context) <= stored:
            continue
        try:
            if stored and hasher.prefix_digest(stored) != head:
                continue
            digests = hasher.digests_from(stored)
        except TypeError as exc:
            raise not_json(exc) from exc
        result = guarded_append(
            actor=actor, thread_id=thread_id, agent_code=agent_code, head_row=row, parsed=parse_messages(context, stored),
            digests=digests, extra_state=extra_state, extra_state_given=extra_state_given,
        )
        if result is not None:
            return result
    return None


def head_rows(*, actor, thread_id: str, agent_code: str):
    """HEAD_SQL's row of the thread for the agent: as remembered (`remembered.saves`), then as read."""

    def read():
        with prepared_cursor() as cursor:
            cursor.execute(thread_head_sql(), [agent_code, thread_id])
            return cursor.fetchone()

    return remembered.saves.rows(remembered.saves.key(actor, thread_id, agent_code), read)


def guarded_append(
    *, actor, thread_id, agent_code, head_row, parsed, digests, extra_state, extra_state_given
) -> SaveResult | None:
    """Append `parsed` (hashed to `digests`) after the head read by HEAD_SQL (`head_row`), in
    one statement that writes only if the thread row is unchanged since that read; None
    when it moved (nothing written)."""
    pk, _owner_id, _agent_code, last_seq, rewrite_count, active_count, updated_at, untitled, position, _head = head_row
    stored = position + 1 if position is not None else 0
    # The text the model field would store: doubles stay doubles in jsonb (memoryadmin/json.py).
    messages = [db_text(item.message) for item in parsed]
    state = db_text(extra_state) if extra_state_given and extra_state is not None else None
    count = len(parsed)

    now = timezone.now()
    params: list[Any] = [last_seq + count, count, agent_code, now, title_from(parsed) if untitled else ""]
    if extra_state_given:
        params.append(state)
    params += [pk, actor.pk, last_seq, rewrite_count, active_count, updated_at, agent_code, now]
    params += append_row_params(parsed, last_seq=last_seq, start=stored, digests=digests, messages=messages)
    sql = thread_append_sql(rows=count, with_extra_state=extra_state_given)
    with prepared_cursor() as cursor:
        cursor.execute(sql, params)
        inserted = cursor.rowcount
    if inserted != count:
        # The thread moved since it was read (or the UPDATE matched nothing): nothing was written.
        return None
    title = title_from(parsed) if untitled else ""
    remembered.saves.put(remembered.saves.key(actor, thread_id, agent_code), (
        pk, actor.pk, agent_code, last_seq + count, rewrite_count, active_count + count, now, untitled and not title,
        stored + count - 1, digests[-1]))
    written = Thread(pk=pk, last_seq=last_seq + count, rewrite_count=rewrite_count, updated_at=now, agent_code=agent_code)
    return SaveResult(
        thread_id=thread_id,
        mode="append",
        appended=count,
        archived=0,
        active=stored + count,
        max_seq=written.last_seq,
        head=digests[-1],
        etag=thread_etag(written),
    )


@transaction.atomic
def _save(*, actor, thread_id, agent_code, context, extra_state, extra_state_given, if_match):
    thread, created = lock_or_create(thread_id=thread_id, actor=actor, agent_code=agent_code)
    ensure_writer(actor, thread)
    if if_match is not None and not etag_matches(if_match, None if created else thread_etag(thread)):
        raise PreconditionFailed(
            "The thread changed since you read it (If-Match does not match its ETag); read it again.",
            fields={"If-Match": ["does not match the thread's current ETag."]},
        )

    head = (
        Block.objects.filter(thread=thread, agent_code=agent_code, archived=False)
        .order_by("-seq")
        .values_list("position", "chain_hash")
        .first()
    )
    stored = head[0] + 1 if head else 0
    hasher = ContextHasher(context)
    total = len(context)
    try:
        extends = total >= stored and (not stored or hasher.prefix_digest(stored) == head[1])
    except TypeError as exc:
        raise not_json(exc) from exc
    if not extends:
        mode: Mode = "rewrite"
        start = 0
    elif total == stored:
        mode = "noop"
        start = total
    else:
        mode = "append"
        start = stored

    parsed = parse_messages(context, start)
    try:
        digests = hasher.digests_from(start) if start < total else []
    except TypeError as exc:
        raise not_json(exc) from exc

    archived = 0
    now = timezone.now()
    if mode == "rewrite":
        thread.rewrite_count += 1
        archived = Block.objects.filter(thread=thread, agent_code=agent_code, archived=False).update(
            archived=True, archived_by=thread.rewrite_count, archived_at=now
        )

    new_blocks = blocks_for(thread, agent_code, parsed, start=start, digests=digests, now=now)
    if new_blocks:
        Block.objects.bulk_create(new_blocks, batch_size=1000)

    changed = created or mode != "noop" or extra_state_given or thread.agent_code != agent_code
    if changed:
        thread.agent_code = agent_code
        thread.active_count += len(new_blocks) - archived
        thread.archived_count += archived
        if not thread.title:
            thread.title = title_from(parsed)
        if extra_state_given:
            thread.extra_state = extra_state
        thread.save()

    result = SaveResult(
        thread_id=thread.thread_id,
        mode=mode,
        # On a rewrite this counts the whole context written again as new blocks.
        appended=len(new_blocks),
        archived=archived,
        active=total,
        max_seq=thread.last_seq,
        head=digests[-1] if digests else (head[1] if head and mode == "noop" else ""),
        etag=thread_etag(thread),
    )
    return result, {"rewrite": mode == "rewrite", "archived": archived}


@transaction.atomic
def thread_clear(*, actor, thread_id: str, request=None) -> dict[str, int]:
    """Admin: archive every active block and drop extra_state. Nothing is deleted."""
    thread = thread_get_for_write(actor=actor, thread_id=thread_id, action="thread.clear", lock=True)
    before = {"active_blocks": thread.active_count, "archived_blocks": thread.archived_count}
    thread.rewrite_count += 1
    archived = Block.objects.filter(thread=thread, archived=False).update(
        archived=True, archived_by=thread.rewrite_count, archived_at=timezone.now()
    )
    thread.active_count = 0
    thread.archived_count += archived
    thread.extra_state = None
    # Its open live streams end, saying why, when this commits (notified, and kept on the row
    # for the streams that poll).
    for name, value in stream_end_fields("cleared").items():
        setattr(thread, name, value)
    thread.save()
    thread_notify(thread.pk, "cleared")
    after = {"active_blocks": thread.active_count, "archived_blocks": thread.archived_count}
    audit_record(
        actor=actor,
        action="thread.clear",
        target=f"thread:{thread.thread_id}",
        detail={"before": before, "after": after, "archived": archived},
        request=request,
    )
    transaction.on_commit(lambda: BLOCK_ARCHIVE_WRITE.inc(archived))
    return {"archived": archived, **after}


@transaction.atomic
def threads_clear(*, actor, thread_pks: list[int], request=None) -> dict[int, dict[str, int]]:
    """`thread_clear` for many threads at once (a bulk clear's batch), by its rules, in a fixed number
    of statements whatever their number: the threads locked and each allowed (one refusal refuses
    them all, nothing cleared), every active block archived as that thread's next rewrite,
    extra_state dropped, their open live streams ended, one audit event per thread. Answers each
    cleared thread's counts by its primary key, as `thread_clear` does; a thread deleted meanwhile
    is not in it."""
    threads = threads_get_for_write(actor=actor, thread_pks=thread_pks, action="thread.clear")
    if not threads:
        return {}
    pks = [thread.pk for thread in threads]
    active = Block.objects.filter(thread__in=pks, archived=False)
    archived = dict(active.order_by().values_list("thread").annotate(n=Count("id")).values_list("thread", "n"))
    now = timezone.now()
    # Each thread's blocks go as its own next rewrite (its rewrite_count, raised just below).
    active.update(
        archived=True, archived_at=now,
        archived_by=Subquery(Thread.objects.filter(pk=OuterRef("thread_id")).values("rewrite_count")[:1]) + 1,
    )
    Thread.objects.filter(pk__in=pks).update(
        rewrite_count=F("rewrite_count") + 1, active_count=0, extra_state=None, updated_at=now,
        archived_count=F("archived_count") + Case(*[When(pk=pk, then=Value(n)) for pk, n in archived.items()], default=Value(0)),
        **stream_end_fields("cleared"),
    )
    threads_notify(pks, "cleared")
    results, events = {}, []
    for thread in threads:
        count = archived.get(thread.pk, 0)
        before = {"active_blocks": thread.active_count, "archived_blocks": thread.archived_count}
        after = {"active_blocks": 0, "archived_blocks": thread.archived_count + count}
        results[thread.pk] = {"archived": count, **after}
        events.append((f"thread:{thread.thread_id}", {"before": before, "after": after, "archived": count}))
    audit_records(actor=actor, action="thread.clear", events=events, request=request)
    total = sum(archived.values())
    transaction.on_commit(lambda: BLOCK_ARCHIVE_WRITE.inc(total))
    return results


@transaction.atomic
def threads_delete(*, actor, thread_pks: list[int], request=None) -> dict[int, dict[str, int]]:
    """`thread_delete` for many threads at once (a bulk purge's batch), by its rules, in a fixed
    number of statements whatever their number: the threads locked, each one allowed by the policy
    (one refusal refuses them all, nothing deleted), their open live streams told, everything they
    hold deleted, one audit event per thread. Answers each deleted thread's counts by its primary
    key; a thread deleted meanwhile is not in it."""
    threads = threads_get_for_write(actor=actor, thread_pks=thread_pks, action="thread.delete")
    if not threads:
        return {}
    pks = [thread.pk for thread in threads]
    counts = {thread.pk: {"active": thread.active_count, "archived": thread.archived_count} for thread in threads}
    threads_notify(pks, "deleted")
    threads_rows_delete(pks)
    Thread.objects.filter(pk__in=pks).delete()
    audit_records(
        actor=actor,
        action="thread.delete",
        events=[
            (f"thread:{thread.thread_id}", {"owner": thread.owner.get_username(), "before": counts[thread.pk]})
            for thread in threads
        ],
        request=request,
    )
    return counts


@transaction.atomic
def thread_delete(*, actor, thread_id: str, request=None) -> dict[str, int]:
    """Owner or admin: remove the thread with its blocks (and everything else it holds)."""
    thread = thread_get_for_write(actor=actor, thread_id=thread_id, action="thread.delete", lock=True)
    counts = {"active": thread.active_count, "archived": thread.archived_count}
    owner_name = thread.owner.get_username()
    # Its open live streams end, saying why, when this commits (and never read it again).
    thread_notify(thread.pk, "deleted")
    thread_rows_delete(thread)
    thread.delete()
    audit_record(
        actor=actor,
        action="thread.delete",
        target=f"thread:{thread_id}",
        detail={"owner": owner_name, "before": counts},
        request=request,
    )
    return counts
