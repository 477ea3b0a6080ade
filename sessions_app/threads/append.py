"""The append-only save: only the new messages travel, continuing the chain from its head.

Every rule of the full save holds (docs/architecture.md, rules S1-S9; the shared steps are
in `services`): one owner, seq from the highest ever given, the title from the first user
message, extra_state overwritten when given. What differs is rule S3's work: the server
does not hash the context again, it continues the chain from the stored head (`chain_continue`),
so the cost of an append depends on the new messages alone, not on the thread's length.
A client that last saw the thread at ETag E sends `If-Match: E`; if another save moved the
thread since, the append answers 412 and writes nothing (rule A4 below, docs/api.md).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from memoryadmin import policy
from memoryadmin.errors import InvalidInput, PreconditionFailed
from memoryadmin.metrics import BLOCK_APPEND, BLOCK_PERSIST_FAIL

from sessions_app.threads import services
from sessions_app.threads.messages import chain_continue
from sessions_app.threads.models import Block
from sessions_app.threads.selectors import etag_matches, thread_etag, thread_id_validate
from sessions_app.threads.services import SaveResult


def _validate_messages(messages: Any) -> list:
    if not isinstance(messages, list):
        raise InvalidInput("messages must be a list of messages.", fields={"messages": ["must be a list."]})
    limit = settings.MEMORYADMIN_MAX_CONTEXT_MESSAGES
    if len(messages) > limit:
        raise InvalidInput(
            f"messages holds {len(messages)} messages; the limit is {limit}.",
            fields={"messages": [f"at most {limit} messages."]},
        )
    return messages


def _moved(detail: str, field: str = "If-Match") -> PreconditionFailed:
    """The 412 of a guard that does not hold, naming the header or field that carried it."""
    return PreconditionFailed(
        f"The thread changed since you read it ({detail}); read it again or save the full context.",
        fields={field: [detail]},
    )


def thread_append_messages(
    *,
    actor,
    thread_id: str,
    agent_code: Any,
    messages: Any,
    extra_state: Any = None,
    extra_state_given: bool = False,
    if_match: str | None = None,
    if_none_match: str | None = None,
    expect_head: str | None = None,
) -> SaveResult:
    """Append `messages` to the agent's active context of the thread (created when new).

    Guards, each a 412 with nothing written when it does not hold: `if_match`, the thread's
    ETag from a read or an earlier save; `if_none_match="*"`, the thread must not exist yet;
    `expect_head`, the chain digest of the agent's last active message ("" for an empty
    context). Without a guard the messages are appended after whatever is stored, under the
    thread's lock: concurrent appenders lose nothing and never share a seq. An empty list
    appends nothing (a no-op, or an extra_state overwrite).
    """
    try:
        thread_id_validate(thread_id)
        agent_code = services.validate_agent_code(agent_code)
        _validate_messages(messages)
        if extra_state_given:
            extra_state = services.validate_extra_state(extra_state)
        parsed = services.parse_messages(messages, 0, field="messages")
        services.ensure_can_write_at_all(actor, thread_id)
        guards = {"if_match": if_match, "if_none_match": if_none_match, "expect_head": expect_head}
        result = None
        if connection.vendor == "postgresql" and parsed and if_none_match is None:
            result = _append_in_one_statement(
                actor=actor, thread_id=thread_id, agent_code=agent_code, messages=messages, parsed=parsed,
                extra_state=extra_state, extra_state_given=extra_state_given, **guards,
            )
        if result is None:
            result = _append_locked(
                actor=actor, thread_id=thread_id, agent_code=agent_code, messages=messages, parsed=parsed,
                extra_state=extra_state, extra_state_given=extra_state_given, **guards,
            )
    except Exception:
        BLOCK_PERSIST_FAIL.inc()
        raise
    BLOCK_APPEND.inc(result.appended)
    return result


def _hashed(head: str, messages: list) -> list[str]:
    try:
        return chain_continue(head, messages)
    except TypeError as exc:
        raise services.not_json(exc) from exc


def _append_in_one_statement(
    *, actor, thread_id, agent_code, messages, parsed, extra_state, extra_state_given, if_match, if_none_match, expect_head
) -> SaveResult | None:
    """One guarded statement (services.guarded_append) after the head read, or without it when
    this process remembers the row (services.head_rows). None sends the append to the locked
    path, which decides every refusal."""
    for row in services.head_rows(actor=actor, thread_id=thread_id, agent_code=agent_code):
        _pk, owner_id, *_counts, position, head = row
        if not policy.may_write(actor, owner_id=owner_id, action="thread.write"):
            return None
        stored = position + 1 if position is not None else 0
        if stored + len(parsed) > settings.MEMORYADMIN_MAX_CONTEXT_MESSAGES:
            continue
        if if_match is not None and not services.head_row_etag_matches(if_match, row):
            continue
        if expect_head is not None and expect_head != (head or ""):
            continue
        result = services.guarded_append(
            actor=actor, thread_id=thread_id, agent_code=agent_code, head_row=row, parsed=parsed,
            digests=_hashed(head or "", messages), extra_state=extra_state, extra_state_given=extra_state_given,
        )
        if result is not None:
            return result
    return None


@transaction.atomic
def _append_locked(
    *, actor, thread_id, agent_code, messages, parsed, extra_state, extra_state_given, if_match, if_none_match, expect_head
) -> SaveResult:
    thread, created = services.lock_or_create(thread_id=thread_id, actor=actor, agent_code=agent_code)
    services.ensure_writer(actor, thread)
    if if_none_match is not None and not created:
        raise _moved("the thread exists (If-None-Match: *)")
    if if_match is not None and not etag_matches(if_match, None if created else thread_etag(thread)):
        raise _moved("If-Match does not match the thread's current ETag")
    last = (
        Block.objects.filter(thread=thread, agent_code=agent_code, archived=False)
        .order_by("-seq")
        .values_list("position", "chain_hash")
        .first()
    )
    stored, head = (last[0] + 1, last[1]) if last else (0, "")
    if expect_head is not None and expect_head != head:
        raise _moved("the chain head is not the one expected", field="head")
    limit = settings.MEMORYADMIN_MAX_CONTEXT_MESSAGES
    if stored + len(parsed) > limit:
        raise InvalidInput(
            f"the context would hold {stored + len(parsed)} messages; the limit is {limit}.",
            fields={"messages": [f"the context holds {stored}; at most {limit - stored} more."]},
        )
    digests = _hashed(head, messages)
    blocks = services.blocks_for(thread, agent_code, parsed, start=stored, digests=digests, now=timezone.now())
    if blocks:
        Block.objects.bulk_create(blocks, batch_size=1000)
    if created or blocks or extra_state_given or thread.agent_code != agent_code:
        thread.agent_code = agent_code
        thread.active_count += len(blocks)
        if not thread.title:
            thread.title = services.title_from(parsed)
        if extra_state_given:
            thread.extra_state = extra_state
        thread.save()
    return SaveResult(
        thread_id=thread.thread_id,
        mode="append" if blocks else "noop",
        appended=len(blocks),
        archived=0,
        active=stored + len(blocks),
        max_seq=thread.last_seq,
        head=digests[-1] if digests else head,
        etag=thread_etag(thread),
    )
