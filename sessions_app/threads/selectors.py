"""Reads of threads and blocks. Each takes the acting user; memoryadmin.policy decides what they may read."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Literal

from django.db import connection
from django.db.models import QuerySet

from memoryadmin import policy
from memoryadmin.errors import InvalidInput, NotFound
from memoryadmin.json import stored_loads
from memoryadmin.jsoncheck import SHOWN_DEPTH_MAX
from memoryadmin.params import parse_choice

from .models import RESERVED_THREAD_IDS, THREAD_ID_RE, Block, Thread

ArchivedFilter = Literal["false", "true", "all"]
LISTED_ROLES = ("user", "assistant")


def thread_id_validate(thread_id: Any) -> str:
    """The whole string is the id (a trailing newline is not); "search", "." and ".." are not ids."""
    if isinstance(thread_id, str) and thread_id in RESERVED_THREAD_IDS:
        message = f"{thread_id!r} is reserved (it names an endpoint or a path step)."
        raise InvalidInput(f"thread_id {message}", fields={"thread_id": [message]})
    if not isinstance(thread_id, str) or not THREAD_ID_RE.fullmatch(thread_id):
        raise InvalidInput(
            'thread_id must be 1 to 64 characters of A-Z a-z 0-9 _ . : @ $ -, and not "search", "." or "..".',
            fields={"thread_id": ['must be 1 to 64 characters of A-Z a-z 0-9 _ . : @ $ -, and not "search", "." or "..".']},
        )
    return thread_id


def _thread_get(thread_id: str, *, lock: bool = False) -> Thread:
    thread_id_validate(thread_id)
    qs = Thread.objects.select_related("owner")
    if lock:
        qs = qs.select_for_update(of=("self",))
    thread = qs.filter(thread_id=thread_id).first()
    if thread is None:
        raise NotFound(f"Thread {thread_id!r} does not exist.")
    return thread


def thread_get_for_read(*, actor, thread_id: str, audit: bool = True) -> Thread:
    """The thread if the policy lets the actor read it (its owner, an operator or an admin); else 403.

    An operator's or admin's read of another user's thread is an audit event
    (one statement, one event per window: memoryadmin.policy.record_read);
    `audit=False` when the caller records a more specific one.
    """
    thread = _thread_get(thread_id)
    target = f"thread:{thread.thread_id}"
    policy.ensure_may_read(actor, owner_id=thread.owner_id, target=target, action="thread.read")
    if audit:
        policy.record_read(actor, owner=thread.owner, target=target)
    return thread


def thread_get_for_write(*, actor, thread_id: str, action: str, lock: bool = False) -> Thread:
    """The thread, if the policy lets the actor do `action` to it (clear, delete, release, prune...); else 403."""
    thread = _thread_get(thread_id, lock=lock)
    policy.ensure_may_write(actor, owner_id=thread.owner_id, target=f"thread:{thread.thread_id}", action=action)
    return thread


def threads_get_for_write(*, actor, thread_pks, action: str) -> list[Thread]:
    """`thread_get_for_write` for many threads at once (a bulk job's batch): locked in primary-key
    order, with their owners, each one allowed by the policy (one refusal refuses them all, 403).
    A thread deleted meanwhile is not in the list."""
    threads = list(
        Thread.objects.select_related("owner").select_for_update(of=("self",)).filter(pk__in=list(thread_pks)).order_by("pk")
    )
    for thread in threads:
        policy.ensure_may_write(actor, owner_id=thread.owner_id, target=f"thread:{thread.thread_id}", action=action)
    return threads


def thread_etag(thread: Thread) -> str:
    """A strong entity tag of the thread's conversation state.

    It changes with every write that changes the state (blocks, extra_state,
    agent_code, metadata), since each of those saves the row and so moves
    updated_at, and never on a no-op save.
    """
    version = f"{thread.pk}:{thread.last_seq}:{thread.rewrite_count}:{thread.updated_at.isoformat()}:{thread.agent_code}"
    return '"' + hashlib.sha256(version.encode()).hexdigest()[:24] + '"'


def etag_matches(if_match: str, etag: str | None) -> bool:
    """RFC 9110 If-Match: `*` matches any current state; otherwise one of the listed strong tags."""
    if etag is None:
        return False
    tags = [tag.strip() for tag in if_match.split(",")]
    return "*" in tags or etag in tags


def thread_list_audit(*, actor, threads, filters: dict) -> None:
    """A page of a thread listing shown: one audit event when it held other users' threads (memoryadmin.policy)."""
    policy.record_bulk_read(
        actor, action="thread.list", kind="threads", rows=threads, filters=filters, name_of=lambda thread: thread.thread_id
    )


AGENT_CODES_MAX = 200

# Every distinct agent code, in order, one index probe each (the agent index's first column):
# each step takes the least code after the last one. A DISTINCT over the table reads every
# thread instead (3 ms at 10 000 threads, growing with them); this grows with the codes only.
_AGENT_CODES = """
WITH RECURSIVE codes(code, n) AS (
    SELECT (SELECT min(agent_code) FROM {thread} WHERE agent_code > ''), 1
    UNION ALL
    SELECT (SELECT min(agent_code) FROM {thread} WHERE agent_code > codes.code), n + 1
      FROM codes WHERE codes.code IS NOT NULL AND n < %s
)
SELECT code FROM codes WHERE code IS NOT NULL
"""


def thread_agent_codes(*, actor) -> list[str]:
    """The agent codes of the threads the actor sees, in order (the first AGENT_CODES_MAX): the
    list's and the dashboard's agent filter. One query, as long as the codes, not the threads."""
    if policy.may_read_all(actor):
        with connection.cursor() as cursor:
            cursor.execute(_AGENT_CODES.format(thread=connection.ops.quote_name(Thread._meta.db_table)), [AGENT_CODES_MAX])
            return [code for (code,) in cursor.fetchall()]
    # A member's own threads, through the owner's index.
    return list(
        Thread.objects.visible_to(actor).exclude(agent_code="").order_by("agent_code")
        .values_list("agent_code", flat=True).distinct()[:AGENT_CODES_MAX]
    )


@dataclass(frozen=True)
class AgentState:
    thread: Thread
    context: list[dict[str, Any]]
    # The chain digest of the last active message ("" for an empty context): what an
    # append-only save continues from.
    head: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "thread_id": self.thread.thread_id,
            "agent_code": self.thread.agent_code,
            "context": self.context,
            "extra_state": self.thread.extra_state,
            "head": self.head,
        }


def _active_messages(thread: Thread) -> tuple[list[dict[str, Any]], str]:
    if connection.vendor == "postgresql":
        # One row holding the whole context as JSON text, decoded in one C call: a
        # 10 000-message thread would otherwise cost 10 000 row fetches and json.loads.
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT coalesce(json_agg(b.message ORDER BY b.seq), '[]'::json)::text,"
                " (SELECT h.chain_hash FROM sessions_app_block h WHERE h.thread_id = %s AND h.agent_code = %s"
                "   AND NOT h.archived ORDER BY h.seq DESC LIMIT 1)"
                " FROM sessions_app_block b WHERE b.thread_id = %s AND b.agent_code = %s AND NOT b.archived",
                [thread.pk, thread.agent_code, thread.pk, thread.agent_code],
            )
            text, head = cursor.fetchone()
            # Exact integers, and each message cut where the model field cuts it (one level down).
            return stored_loads(text, depth_max=SHOWN_DEPTH_MAX + 1), head or ""
    rows = list(
        Block.objects.filter(thread=thread, agent_code=thread.agent_code, archived=False)
        .order_by("seq")
        .values_list("message", "chain_hash")
    )
    return [row[0] for row in rows], rows[-1][1] if rows else ""


def thread_agent_state(*, actor, thread_id: str) -> AgentState:
    """The active blocks of the thread's agent, in seq order, exactly as posted (two queries)."""
    thread = thread_get_for_read(actor=actor, thread_id=thread_id)
    context, head = _active_messages(thread)
    return AgentState(thread=thread, context=context, head=head)


def parse_archived(value: str | None) -> ArchivedFilter:
    """The `archived` query parameter of the messages listing, in any case; "false" when blank."""
    value = value.lower() if isinstance(value, str) else value
    return parse_choice(value or None, "archived", ("false", "true", "all"), "false")  # type: ignore[return-value]


def thread_blocks(*, thread: Thread, archived: ArchivedFilter = "false", listed_roles_only: bool = False) -> QuerySet[Block]:
    """Blocks of a thread already checked for reading, in seq order."""
    qs = Block.objects.filter(thread=thread)
    if archived == "false":
        qs = qs.filter(archived=False)
    elif archived == "true":
        qs = qs.filter(archived=True)
    if listed_roles_only:
        qs = qs.filter(role__in=LISTED_ROLES)
    return qs.order_by("seq")


def thread_messages(*, actor, thread_id: str, archived: ArchivedFilter = "false") -> QuerySet[Block]:
    """User and assistant blocks of a thread, for the messages listing."""
    thread = thread_get_for_read(actor=actor, thread_id=thread_id)
    return thread_blocks(thread=thread, archived=archived, listed_roles_only=True)




@dataclass(frozen=True)
class BlockWindow:
    """A contiguous run of a thread's blocks, as the thread page shows it.

    `blocks` are in display order (`newest` first or `oldest` first); `older` and
    `newer` are the seq cursors of the runs on either side, None at either end.
    """

    blocks: list[Block]
    order: Literal["newest", "oldest"]
    older: int | None
    newer: int | None


def thread_block_window(
    *,
    thread: Thread,
    archived: ArchivedFilter = "false",
    order: Literal["newest", "oldest"] = "newest",
    before: int | None = None,
    after: int | None = None,
    around: int | None = None,
    size: int = 200,
) -> BlockWindow:
    """One page of a long thread by keyset on seq, in at most three queries whatever its length.

    Without a cursor: the newest `size` blocks (or the oldest, for `order="oldest"`).
    `before=S`: the `size` blocks just older than seq S; `after=S`: the `size` just newer;
    `around=S`: a window with S in its middle (a link to `#seq-S` lands here). Each side
    is read with one row more than shown, so whether more exists costs no COUNT.
    """
    qs = thread_blocks(thread=thread, archived=archived)
    if around is not None:
        half = size // 2
        lower = list(qs.filter(seq__lte=around).order_by("-seq")[: half + 1])
        upper = list(qs.filter(seq__gt=around).order_by("seq")[: size - half + 1])
        older_more, newer_more = len(lower) > half, len(upper) > size - half
        ascending = lower[:half][::-1] + upper[: size - half]
    elif after is not None or (before is None and order == "oldest"):
        rows = list(qs.filter(seq__gt=after if after is not None else -1).order_by("seq")[: size + 1])
        newer_more = len(rows) > size
        ascending = rows[:size]
        older_more = after is not None and bool(ascending) and qs.filter(seq__lt=ascending[0].seq).exists()
    else:
        filtered = qs if before is None else qs.filter(seq__lt=before)
        rows = list(filtered.order_by("-seq")[: size + 1])
        older_more = len(rows) > size
        ascending = rows[:size][::-1]
        newer_more = before is not None and bool(ascending) and qs.filter(seq__gt=ascending[-1].seq).exists()
    return BlockWindow(
        blocks=ascending if order == "oldest" else ascending[::-1],
        order=order,
        older=ascending[0].seq if older_more and ascending else None,
        newer=ascending[-1].seq if newer_more and ascending else None,
    )


def thread_seq_at(*, thread: Thread, archived: ArchivedFilter = "false", at) -> int | None:
    """The seq of the first block written at or after `at` (a jump to a time), else the last one."""
    qs = thread_blocks(thread=thread, archived=archived)
    seq = qs.filter(created_at__gte=at).order_by("seq").values_list("seq", flat=True).first()
    if seq is None:
        seq = qs.order_by("-seq").values_list("seq", flat=True).first()
    return seq
