"""Who may do what: every role and ownership rule of memoryadmin, decided here.

Services, selectors, pages and API views ask this module; none of them compares
roles or owners itself. `RULES` is the table (docs/architecture.md, "Access
rules", prints it): each action names who may do it.

- the **owner** of the object (the user who created the thread, item or graph),
  never an operator when the action writes;
- **admins**, whoever owns the object;
- **readers**: operators and admins, for reads only.

Operators never write: a writing action refuses an operator before anything
else is looked at. An object not made yet (`owner_id=None`) is the actor's to
make when the owner may do the action.

Every `ensure_*` raises `memoryadmin.errors.Forbidden` naming the target and the
action, so the one handler per surface records the refusal in the audit log
(with the object's owner, when the refusal is about ownership).

Reads of other users' content by operators and admins are audit events too,
recorded from here (`record_read`, `record_bulk_read`) by the rules of
docs/operations.md, "Audit log": one event per person, action and target within
`MEMORYADMIN_AUDIT_READ_WINDOW_SECONDS`, and a listing or search is one event
with its count and filter.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db.models import QuerySet

from .errors import Forbidden
from .roles import role_of

READERS = ("operator", "admin")


@dataclass(frozen=True)
class Rule:
    """Who may do one action. `writes`: the action changes data (so never an operator)."""

    owner: bool = False
    admin: bool = False
    readers: bool = False
    writes: bool = True

    def who(self) -> str:
        """The rule in words, as the documentation's table says it."""
        if self.readers and self.owner:
            return "owner, operators, admins"
        if self.readers:
            return "operators, admins"
        if self.owner and self.admin:
            return "owner, admins"
        if self.owner:
            return "owner only"
        return "admins"


_READ = Rule(owner=True, readers=True, writes=False)
_OWNER = Rule(owner=True)
_OWNER_OR_ADMIN = Rule(owner=True, admin=True)
_ADMIN = Rule(admin=True)
_ADMIN_READ = Rule(admin=True, writes=False)
# A user's own preference (a saved view of a listing): not data, so an operator keeps theirs too.
_OWN_PREFERENCE = Rule(owner=True, writes=False)

RULES: dict[str, Rule] = {
    # Seeing an owned object in a listing (threads, blocks, checkpoints, items, graphs).
    "read": _READ,
    # The admin pages: the audit log, retention's controls, erasing a user.
    "admin.console": _ADMIN_READ,
    # Threads and their blocks (sessions_app/threads).
    "thread.read": _READ,
    "thread.export": _READ,
    "thread.write": _OWNER,  # save agent state: only the owner writes content
    "thread.create": _OWNER,
    "thread.update": _OWNER,  # merge metadata
    "thread.delete": _OWNER_OR_ADMIN,
    "thread.clear": _ADMIN,
    # Checkpoints (sessions_app/checkpoints).
    "checkpoint.put": _OWNER,
    "checkpoint.replace": _OWNER,
    "checkpoint.write": _OWNER,  # pending writes
    "checkpoint.copy": _OWNER,  # into a thread of one's own
    "checkpoint.delete_for_runs": _OWNER,
    "checkpoint.delete_thread": _OWNER_OR_ADMIN,
    "checkpoint.prune": _OWNER_OR_ADMIN,
    "checkpoint.release": _ADMIN,
    # Time travel from the dashboard: the owner, or an admin (audited), branches off a checkpoint.
    "checkpoint.fork": _OWNER_OR_ADMIN,
    # Turns (sessions_app/turns).
    "turn.begin": _OWNER,
    "turn.append": _OWNER,
    "turn.finish": _OWNER,
    "turn.discard": _OWNER,
    "turn.restart": _OWNER,
    # The long-term store (store_app).
    "store.read": _READ,
    "store.put": _OWNER,
    "store.delete": _OWNER_OR_ADMIN,  # the API and the dashboard alike
    "store.clear": _ADMIN,  # a subtree, every owner
    # Graph definitions (graphs_app).
    "graph.read": _READ,
    "graph.create": _OWNER,
    "graph.write": _OWNER,  # rename, new spec
    "graph.delete": _OWNER_OR_ADMIN,
    # Operations (memoryadmin/operations).
    "bulk.clear": _ADMIN,
    "bulk.release": _ADMIN,
    "bulk.purge": _ADMIN,
    "bulk.step": _ADMIN,
    "bulk.read": _ADMIN_READ,
    "retention.read": Rule(readers=True, writes=False),
    "retention.preview": _ADMIN_READ,
    "retention.policy_save": _ADMIN,
    "retention.policy_delete": _ADMIN,
    "retention.apply": _ADMIN,
    "user.erase": _ADMIN,
    "export.download": Rule(owner=True, writes=False),  # a queued bulk export: who asked for it
    # API keys and the audit log (memoryadmin).
    "apikey.create": _ADMIN,
    "apikey.revoke": _ADMIN,
    "apikey.list": _ADMIN_READ,
    "user.list": _ADMIN_READ,
    "user.create": _ADMIN,
    "user.role_set": _ADMIN,
    "audit.read": _ADMIN_READ,
    # Saved views of the thread list (sessions_app/checkpoints): each user's own.
    "view.save": _OWN_PREFERENCE,
    "view.delete": _OWN_PREFERENCE,
}

# What each kind of object is called in a refusal, by the action's first word.
_NOUNS = {"view": "saved view", "thread": "thread", "checkpoint": "thread", "turn": "thread", "store": "store item", "graph": "graph"}


# `decide`'s owner for "an object of another user" (no user has it as primary key).
ANOTHER_USER: Any = object()


@dataclass(frozen=True)
class Decision:
    allowed: bool
    # Why not: "anonymous", "operator", "admin_only", "readers_only", "owner_or_admin", "owner_only", "not_owner".
    why: str = ""


# Every allowed decision is this one (a Decision is immutable): `decide` runs once per item of a batch.
_ALLOWED = Decision(True)


def rule_for(action: str) -> Rule:
    try:
        return RULES[action]
    except KeyError:
        raise ValueError(f"no access rule for {action!r}; add it to memoryadmin.policy.RULES") from None


def decide(actor, action: str, owner_id: int | None = None) -> Decision:
    """The one decision: may `actor` do `action` to an object owned by `owner_id`?

    `owner_id=None` is an object not made yet (it would be the actor's);
    `ANOTHER_USER` is any object the actor does not own (lists, role checks).
    """
    rule = rule_for(action)
    role = role_of(actor)
    if role is None:
        return Decision(False, "anonymous")
    if rule.writes and role == "operator":
        return Decision(False, "operator")
    if rule.admin and role == "admin":
        return _ALLOWED
    if rule.readers and role in READERS:
        return _ALLOWED
    if rule.owner and (owner_id is None or owner_id == actor.pk):
        return _ALLOWED
    if not rule.owner:
        return Decision(False, "readers_only" if rule.readers else "admin_only")
    if rule.admin:
        return Decision(False, "owner_or_admin")
    return Decision(False, "owner_only" if rule.writes and role == "admin" else "not_owner")


def _object_id(target: str) -> str:
    return target.partition(":")[2]


def _message(decision: Decision, action: str, target: str) -> str:
    kind = action.partition(".")[0]
    noun = _NOUNS.get(kind, "object")
    why = decision.why
    if why == "anonymous":
        return "Sign in first."
    if why == "operator":
        return "Operators have read-only access."
    if why == "admin_only":
        return "Only an admin may do this."
    if why == "readers_only":
        return "Only operators and admins may see this."
    if why == "owner_or_admin":
        return f"Only the {noun}'s owner or an admin may do this."
    if why == "owner_only":
        return f"This {noun} belongs to another user; only its owner writes to it."
    if rule_for(action).writes and noun == "thread":
        # A write to a taken thread id (docs/api.md, "Taken ids and keys"): say so, and how never to collide.
        return (
            f"This thread belongs to another user: the id {_object_id(target)!r} is taken. Let the server make "
            "thread ids (POST /api/v1/threads without a thread_id) so that they never collide."
        )
    if rule_for(action).writes and noun == "store item":
        return (
            "This store item belongs to another user: the key is taken in this namespace, and stays its owner's "
            "after the item expires, until the sweep removes it. Keep your items under a namespace of your own."
        )
    return f"This {noun} belongs to another user."


def _refuse(decision: Decision, *, action: str, target: str, owner_id: int | None, message: str | None) -> Forbidden:
    about_owner = decision.why in ("owner_or_admin", "owner_only", "not_owner")
    if decision.why == "operator":
        message = None  # whatever the action, an operator is told the one rule that applies
    return Forbidden(
        message or _message(decision, action, target),
        target=target,
        action=action,
        owner_id=owner_id if about_owner else None,
    )


# --- single objects ------------------------------------------------------------------------------


def owns(actor, owner_id: int | None) -> bool:
    """The actor is the object's owner (whatever their role)."""
    return actor is not None and getattr(actor, "is_authenticated", False) and owner_id == actor.pk


def may_read(actor, owner_id: int | None, action: str = "thread.read") -> bool:
    """The owner, or an operator or admin (who read everything)."""
    return decide(actor, action, owner_id).allowed


def ensure_may_read(actor, *, owner_id: int | None, target: str, action: str, message: str | None = None) -> None:
    decision = decide(actor, action, owner_id)
    if not decision.allowed:
        raise _refuse(decision, action=action, target=target, owner_id=owner_id, message=message)


def may_write(actor, *, owner_id: int | None, action: str) -> bool:
    """Operators never; members their own objects only; admins what the action's rule gives them."""
    return decide(actor, action, owner_id).allowed


def ensure_may_write(
    actor, *, owner_id: int | None, target: str, action: str, message: str | None = None
) -> None:
    """`may_write`, or a Forbidden naming the target (and the owner, when ownership is why)."""
    decision = decide(actor, action, owner_id)
    if not decision.allowed:
        raise _refuse(decision, action=action, target=target, owner_id=owner_id, message=message)


def may_administer(actor, action: str = "admin.console") -> bool:
    """May the actor do this action of the admins (by default: use the admin pages)?"""
    return decide(actor, action).allowed


def ensure_admin(actor, *, target: str, action: str, message: str | None = None, system: bool = False) -> None:
    """Only an admin may do `action`; with `system`, `actor=None` is the trusted command line (cron)."""
    rule = rule_for(action)
    if rule.owner or rule.readers:
        raise ValueError(f"{action!r} is not an action of the admins alone")
    if actor is None and system:
        return
    decision = decide(actor, action)
    if not decision.allowed:
        raise _refuse(decision, action=action, target=target, owner_id=None, message=message)


def may_read_all(actor) -> bool:
    """Operators and admins see every user's threads, items and graphs (listings show owners)."""
    return decide(actor, "read", ANOTHER_USER).allowed


def ensure_may_read_all(actor, *, target: str, action: str, message: str | None = None) -> None:
    decision = decide(actor, action)
    if not decision.allowed:
        raise _refuse(decision, action=action, target=target, owner_id=None, message=message)


# --- lists ---------------------------------------------------------------------------------------


def restrict(queryset: QuerySet, actor, action: str = "read", owner_field: str = "owner") -> QuerySet:
    """The rows of `queryset` the actor may do `action` to ("read": see), by `owner_field`.

    Reads: members their own rows, operators and admins every row. A writing
    action: none for operators, every row for admins when the rule gives them
    the action, else the actor's own rows when the owner may do it. Decided by
    `decide`, once for another user's rows and once for the actor's own.
    """
    if decide(actor, action, ANOTHER_USER).allowed:
        return queryset
    if role_of(actor) is not None and decide(actor, action, actor.pk).allowed:
        return queryset.filter(**{owner_field: actor})
    return queryset.none()


def filter_by_owner(queryset: QuerySet, actor, owner: str, owner_field: str = "owner") -> QuerySet:
    """The owner filter of a listing (a username): for those who see every owner only.

    A member's owner filter is ignored, so it never widens (nor empties) what they see.
    """
    if owner and may_read_all(actor):
        return queryset.filter(**{f"{owner_field}__username": owner})
    return queryset


# --- what the dashboard shows ------------------------------------------------------------------


def abilities(user) -> dict[str, Any]:
    """What the signed-in user may see and do, for every template (the context processor)."""
    return {
        "user_role": role_of(user),
        "user_is_admin": may_administer(user),
        "user_reads_all": may_read_all(user),
    }


# --- audit of reads ------------------------------------------------------------------------------


def read_window() -> int:
    """Seconds within which one person's repeated read of one target is one audit event."""
    return settings.MEMORYADMIN_AUDIT_READ_WINDOW_SECONDS


def record_read(actor, *, owner, target: str, action: str = "thread.read", detail: dict[str, Any] | None = None) -> None:
    """An operator's or admin's read of something `owner` owns: one audit event per window.

    The owner's own reads leave no event. Called by the selector that allowed the
    read, so every surface (pages, API, htmx fragments) is covered.
    """
    if owner is None or owns(actor, owner.pk):
        return
    from .audit import audit_foreign_read

    audit_foreign_read(actor=actor, owner=owner, target=target, action=action, detail=detail, window=read_window())


def _filter_text(filters: Mapping[str, Any]) -> str:
    parts = []
    for name in sorted(filters):
        value = filters[name]
        if value in (None, "", [], {}):
            continue
        parts.append(f"{name}={value if isinstance(value, str | int) else repr(value)}")
    return "&".join(parts)


def record_bulk_read(
    actor,
    *,
    action: str,
    kind: str,
    rows: Iterable[Any],
    filters: Mapping[str, Any],
    owner_id_of: Callable[[Any], int | None] = lambda row: row.owner_id,
    name_of: Callable[[Any], str] | None = None,
) -> int:
    """A listing or search that showed other users' content: ONE event with the count and the filter.

    The target is `kind?filter` (the filter as sent, paging included), so the same
    page asked again within the window is one event and another page is another.
    `name_of` names the rows in the event (thread ids; at most 50). Returns how
    many rows were another user's.
    """
    rows = list(rows)
    foreign = [row for row in rows if not owns(actor, owner_id_of(row))]
    if not foreign:
        return 0
    from .audit import audit_record_once, current_path

    query = _filter_text(filters)
    target = f"{kind}?{query}" if query else kind
    if len(target) > 200:
        target = f"{kind}?#{hashlib.sha256(query.encode()).hexdigest()[:32]}"
    detail: dict[str, Any] = {
        "count": len(foreign),
        "results": len(rows),
        "filter": {name: value for name, value in filters.items() if value not in (None, "", [], {})},
        "path": current_path()[:300],
    }
    if name_of is not None:
        detail["threads"] = sorted({name_of(row) for row in foreign})[:50]
    audit_record_once(actor=actor, action=action, target=target, detail=detail, window=read_window())
    return len(foreign)
