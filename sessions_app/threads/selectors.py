"""Reads of threads and blocks. Each takes the acting user: ownership is decided here."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Literal

from django.db import connection
from django.db.models import Q, QuerySet

from memoryadmin import roles
from memoryadmin.audit import audit_foreign_read
from memoryadmin.errors import Forbidden, InvalidInput, NotFound
from memoryadmin.json import stored_loads
from memoryadmin.jsoncheck import SHOWN_DEPTH_MAX

from .models import THREAD_ID_RE, Block, Thread

ArchivedFilter = Literal["false", "true", "all"]
LISTED_ROLES = ("user", "assistant")


def thread_id_validate(thread_id: Any) -> str:
    if not isinstance(thread_id, str) or not THREAD_ID_RE.match(thread_id):
        raise InvalidInput(
            'thread_id must be 1 to 64 characters of A-Z a-z 0-9 _ . : @ $ -, and not "search".',
            fields={"thread_id": ['must be 1 to 64 characters of A-Z a-z 0-9 _ . : @ $ -, and not "search".']},
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


def _deny(thread: Thread, action: str, message: str) -> Forbidden:
    return Forbidden(message, target=f"thread:{thread.thread_id}", action=action)


def thread_get_for_read(*, actor, thread_id: str, audit: bool = True) -> Thread:
    """The thread if the actor owns it or reads everything (operator, admin); else 403.

    An operator's or admin's read of another user's thread is an audit event
    (one INSERT); `audit=False` when the caller records a more specific one.
    """
    thread = _thread_get(thread_id)
    if thread.owner_id != actor.pk:
        if not roles.can_read_all(actor):
            raise _deny(thread, "thread.read", "This thread belongs to another user.")
        if audit:
            audit_foreign_read(actor=actor, owner=thread.owner, target=f"thread:{thread.thread_id}")
    return thread


def thread_get_for_admin(*, actor, thread_id: str, action: str, lock: bool = False) -> Thread:
    """The thread for an admin-only action (clear, release, purge)."""
    thread = _thread_get(thread_id, lock=lock)
    if not roles.is_admin(actor):
        raise _deny(thread, action, "Only an admin may do this.")
    return thread


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


def thread_may_delete(*, actor, thread: Thread) -> bool:
    """The owner (unless an operator, who writes nothing) or an admin."""
    if roles.is_admin(actor):
        return True
    return thread.owner_id == actor.pk and not roles.is_operator(actor)


def thread_get_for_owner_or_admin(*, actor, thread_id: str, action: str, lock: bool = False) -> Thread:
    thread = _thread_get(thread_id, lock=lock)
    if not thread_may_delete(actor=actor, thread=thread):
        raise _deny(thread, action, "Only the thread's owner or an admin may do this.")
    return thread


def thread_list(
    *, actor, q: str = "", agent_code: str = "", owner: str = ""
) -> QuerySet[Thread]:
    """Threads the actor may see, newest activity first, filtered."""
    qs = Thread.objects.visible_to(actor).select_related("owner")
    q = q.strip()
    if q:
        qs = qs.filter(Q(title__icontains=q) | Q(thread_id__icontains=q) | Q(agent_code__icontains=q))
    if agent_code:
        qs = qs.filter(agent_code=agent_code)
    if owner and roles.can_read_all(actor):
        qs = qs.filter(owner__username=owner)
    return qs.order_by("-updated_at", "-id")


def thread_agent_codes(*, actor) -> list[str]:
    return list(
        Thread.objects.visible_to(actor).exclude(agent_code="").order_by("agent_code")
        .values_list("agent_code", flat=True).distinct()[:200]
    )


@dataclass(frozen=True)
class AgentState:
    thread: Thread
    context: list[dict[str, Any]]

    def as_dict(self) -> dict[str, Any]:
        return {
            "thread_id": self.thread.thread_id,
            "agent_code": self.thread.agent_code,
            "context": self.context,
            "extra_state": self.thread.extra_state,
        }


def _active_messages(thread: Thread) -> list[dict[str, Any]]:
    if connection.vendor == "postgresql":
        # One row holding the whole context as JSON text, decoded in one C call: a
        # 10 000-message thread would otherwise cost 10 000 row fetches and json.loads.
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT coalesce(json_agg(message ORDER BY seq), '[]'::json)::text FROM sessions_app_block"
                " WHERE thread_id = %s AND agent_code = %s AND NOT archived",
                [thread.pk, thread.agent_code],
            )
            # Exact integers, and each message cut where the model field cuts it (one level down).
            return stored_loads(cursor.fetchone()[0], depth_max=SHOWN_DEPTH_MAX + 1)
    return list(
        Block.objects.filter(thread=thread, agent_code=thread.agent_code, archived=False)
        .order_by("seq")
        .values_list("message", flat=True)
    )


def thread_agent_state(*, actor, thread_id: str) -> AgentState:
    """The active blocks of the thread's agent, in seq order, exactly as posted (two queries)."""
    thread = thread_get_for_read(actor=actor, thread_id=thread_id)
    return AgentState(thread=thread, context=_active_messages(thread))


def parse_archived(value: str | None) -> ArchivedFilter:
    value = (value or "false").lower()
    if value not in ("false", "true", "all"):
        raise InvalidInput("archived must be false, true or all.", fields={"archived": ["must be false, true or all."]})
    return value  # type: ignore[return-value]


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


