"""Erasing a user's data, for data-protection requests (docs/operations.md, "Erase a user").

Every thread (with its blocks, checkpoints and pending writes), every store
item and every graph definition the user owns is deleted, in batches of short transactions. What was
deleted is summed up in a receipt: counts, and a SHA-256 over each kind of
record's identity (thread ids; thread, seq and chain hash of each block — the
chain hash commits to the message content without keeping it; thread,
namespace and id of each checkpoint; namespace, key and a hash of the value of
each store item; id, name and a hash of the spec of each graph definition).
The receipt is kept as an audit event (`user.erase`): the audit log then holds
who was erased, when, by whom and how much, never what.

Earlier audit events stay (who read, cleared or deleted something, and when)
but stop naming the erased data: the user's thread ids, namespace labels and
keys, graph names and run ids in their targets and details, and the search
queries in events about the user's data, become "[erased]"
(`AuditEvent.objects.redact`, the one change the log takes). This runs before
anything is deleted, so an interrupted erase has done it already, and once more
at the end for events recorded meanwhile.

The account itself stays (Django's admin deletes accounts). With
`revoke_access`, the account is deactivated and its API keys revoked first, so
its agents cannot write new data while it is erased.

An interrupted erase (a crash between batches) leaves fewer rows, never a
broken thread: each batch keeps the thread's counters exact. Run it again to
finish; the second receipt covers what the second run deleted.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Count, F, Q
from django.utils import timezone

from memoryadmin import policy, queue, roles
from memoryadmin.apikeys import apikey_cache_forget
from memoryadmin.audit import audit_record
from memoryadmin.errors import Forbidden, InvalidInput, NotFound
from memoryadmin.json import canonical
from memoryadmin.jsoncheck import text_input_check
from memoryadmin.models import ApiKey, AuditEvent

from sessions_app.checkpoints.models import Checkpoint, CheckpointValue, CheckpointWrite
from sessions_app.checkpoints.removal import checkpoints_remove, thread_checkpoints_remove
from sessions_app.threads.models import Block, Thread
from sessions_app.threads.notify import thread_notify
from memoryadmin.operations.models import EraseJob
from memoryadmin.operations.sizes import payload_bytes

BATCH = 2000
# Users with more threads than this are erased by the job queue, not in the page's request.
INLINE_THREADS = 100
ERASED = "[erased]"
# Audit actions whose details list threads or filters of anyone: searched for the user's names.
LISTING_ACTIONS = ("thread.search", "checkpoint.prune", "bulk.start", "bulk.finish", "bulk.export", "audit.export", "store.clear")


def _user(username: Any):
    if not isinstance(username, str) or not username.strip():
        raise InvalidInput("username is required.", fields={"username": ["is required."]})
    text_input_check(username, "username")
    user = get_user_model().objects.filter(username=username.strip()).first()
    if user is None:
        raise NotFound(f"No user {username!r}.")
    return user


def _ensure_admin(actor, username: str) -> None:
    """An admin, or the trusted command line (`actor=None`): memoryadmin.policy decides."""
    policy.ensure_admin(
        actor, target=f"user:{username}", action="user.erase", message="Only an admin may erase a user's data.", system=True
    )


def _store_items(user):
    from store_app.models import StoreItem

    return StoreItem.objects.filter(owner=user)


def _graphs(user):
    from graphs_app.models import GraphDefinition

    return GraphDefinition.objects.filter(owner=user)


def user_erase_preview(*, actor, username: Any) -> dict[str, Any]:
    """What erasing the user would delete (seven queries). Reads only."""
    user = _user(username)
    _ensure_admin(actor, user.get_username())
    threads = Thread.objects.filter(owner=user)
    blocks = Block.objects.filter(thread__owner=user).aggregate(n=Count("id"), size=payload_bytes("message", "content"))
    checkpoints = Checkpoint.objects.filter(thread__owner=user).aggregate(n=Count("id"), size=payload_bytes("checkpoint", "metadata"))
    writes = CheckpointWrite.objects.filter(thread__owner=user).aggregate(n=Count("id"), size=payload_bytes("value"))
    values = CheckpointValue.objects.filter(thread__owner=user).aggregate(n=Count("id"), size=payload_bytes("value"))
    items = _store_items(user).aggregate(n=Count("id"), size=payload_bytes("value"))
    graphs = _graphs(user).aggregate(n=Count("id"), size=payload_bytes("spec"))
    return {
        "user": user.get_username(),
        "role": roles.role_of(user),
        "threads": threads.count(),
        "blocks": blocks["n"],
        "checkpoints": checkpoints["n"],
        "pending_writes": writes["n"],
        "checkpoint_values": values["n"],
        "store_items": items["n"],
        "graph_definitions": graphs["n"],
        "bytes": blocks["size"] + checkpoints["size"] + writes["size"] + values["size"] + items["size"] + graphs["size"],
    }


class _Receipt:
    def __init__(self) -> None:
        self.counts: Counter = Counter()
        self.hashes = {name: hashlib.sha256() for name in ("threads", "blocks", "checkpoints", "store_items", "graph_definitions")}

    def line(self, kind: str, *parts: Any) -> None:
        self.hashes[kind].update(("\t".join(str(part) for part in parts) + "\n").encode())


def _erase_blocks(thread: Thread, receipt: _Receipt, batch: int) -> None:
    while True:
        with transaction.atomic():
            locked = Thread.objects.select_for_update().filter(pk=thread.pk).first()
            if locked is None:
                return
            rows = list(Block.objects.filter(thread=thread).order_by("pk").values_list("pk", "seq", "chain_hash", "archived")[:batch])
            if not rows:
                return
            for _, seq, chain_hash, _archived in rows:
                receipt.line("blocks", thread.thread_id, seq, chain_hash)
            archived = sum(1 for row in rows if row[3])
            Block.objects.filter(pk__in=[row[0] for row in rows]).delete()
            Thread.objects.filter(pk=thread.pk).update(
                active_count=F("active_count") - (len(rows) - archived), archived_count=F("archived_count") - archived
            )
        receipt.counts["blocks"] += len(rows)


def _erase_checkpoints(thread: Thread, receipt: _Receipt, batch: int) -> None:
    while True:
        with transaction.atomic():
            # Newest first, as retention does: what remains never points at a deleted parent.
            rows = list(
                Checkpoint.objects.filter(thread=thread).order_by("-pk").values_list("pk", "checkpoint_ns", "checkpoint_id")[:batch]
            )
            if not rows:
                break
            for _, ns, checkpoint_id in rows:
                receipt.line("checkpoints", thread.thread_id, ns, checkpoint_id)
            removed = checkpoints_remove(Checkpoint.objects.filter(thread=thread, pk__in=[row[0] for row in rows]))
        receipt.counts["checkpoints"] += removed.checkpoints
        receipt.counts["pending_writes"] += removed.writes
        receipt.counts["checkpoint_values"] += removed.values
    with transaction.atomic():
        # Writes and values of a thread without checkpoints (the batches above found none to go with).
        removed = thread_checkpoints_remove([thread.pk])
        receipt.counts["pending_writes"] += removed.writes
        receipt.counts["checkpoint_values"] += removed.values


def _erase_items(user, receipt: _Receipt, batch: int) -> None:
    while True:
        with transaction.atomic():
            rows = list(_store_items(user).order_by("pk").values_list("pk", "namespace_path", "key", "value")[:batch])
            if not rows:
                return
            for _, path, key, value in rows:
                value_hash = hashlib.sha256(canonical(value)).hexdigest()
                receipt.line("store_items", path, key, value_hash)
            _store_items(user).filter(pk__in=[row[0] for row in rows]).delete()
        receipt.counts["store_items"] += len(rows)


def _erase_graphs(user, receipt: _Receipt, batch: int) -> None:
    while True:
        with transaction.atomic():
            rows = list(_graphs(user).order_by("pk").values_list("pk", "name", "spec")[:batch])
            if not rows:
                return
            for pk, name, spec in rows:
                spec_hash = hashlib.sha256(canonical(spec)).hexdigest()
                receipt.line("graph_definitions", pk, name, spec_hash)
            _graphs(user).filter(pk__in=[row[0] for row in rows]).delete()
        receipt.counts["graph_definitions"] += len(rows)


# --- the audit log: the events stay, the erased data's names go --------------------------------

# Where a text breaks into words that can each name something: path steps, list items, query
# parameters. Not ":" or "." (thread ids may hold both): _Scrubber._word looks inside a word.
_WORD_BREAKS = re.compile(r"([/,?&=\s]+)")


class _Scrubber:
    """Replaces what names the user's data, wherever it stands in an event's target or detail."""

    def __init__(self, *, user, names: set[str], targets: set[str]):
        self.user = user
        self.username = user.get_username()
        self.names = {name for name in names if name}
        self.targets = targets

    @classmethod
    def of(cls, user) -> _Scrubber:
        """The user's names for their data and the audit targets of it, read before anything
        is deleted: from the data, and from the log for what is already gone (a thread or
        graph deleted earlier, a run whose checkpoints were deleted)."""
        thread_ids = set(Thread.objects.filter(owner=user).values_list("thread_id", flat=True))
        logged = AuditEvent.objects.filter(
            Q(detail__owner=user.get_username()) | Q(actor=user, action="checkpoint.delete_for_runs")
        ).values_list("target", "detail")
        logged_names: set[str] = set()
        for target, detail in logged.iterator(chunk_size=1000):
            kind, _, rest = target.partition(":")
            if kind == "thread" and "," not in rest:
                thread_ids.add(rest)
            detail = detail if isinstance(detail, dict) else {}
            for field in ("name", "key"):
                if isinstance(detail.get(field), str):
                    logged_names.add(detail[field])
            for field in ("namespace", "run_ids"):
                if isinstance(detail.get(field), list):
                    labels = [label for label in detail[field] if isinstance(label, str)]
                    logged_names |= {*labels, ".".join(labels)} if field == "namespace" else set(labels)
        names = thread_ids | logged_names
        names |= set(Checkpoint.objects.filter(thread__owner=user).exclude(run_id="").values_list("run_id", flat=True))
        targets = {f"thread:{thread_id}" for thread_id in thread_ids}
        for path, key in _store_items(user).values_list("namespace_path", "key"):
            names |= {path, key, *path.split(".")}
            targets.add(f"store:{path}/{key}"[:200])
        for pk, name in _graphs(user).values_list("pk", "name"):
            names.add(name)
            targets.add(f"graph:{pk}")
        return cls(user=user, names=names, targets=targets)

    def _word(self, word: str) -> str:
        if word in self.names:
            return ERASED
        kind, colon, rest = word.partition(":")
        if colon and kind.isalpha() and rest:  # a target: "thread:<id>", "store:<path>"
            return f"{kind}:{self._word(rest)}"
        labels = word.split(".")
        if len(labels) > 1 and any(label in self.names for label in labels):
            return ".".join(ERASED if label in self.names else label for label in labels)
        return word

    def text(self, text: str) -> str:
        if text in self.names:
            return ERASED
        parts = _WORD_BREAKS.split(text)
        parts[::2] = [self._word(part) for part in parts[::2]]
        return "".join(parts)

    def value(self, value: Any, *, queries: bool) -> Any:
        """`value` with every name replaced; with `queries`, every search text ("q", "query") too."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list):
            return [self.value(item, queries=queries) for item in value]
        if isinstance(value, dict):
            return {
                key: ERASED if queries and key in ("q", "query") and isinstance(item, str) else self.value(item, queries=queries)
                for key, item in value.items()
            }
        return value

    def _about_the_user(self, event: AuditEvent) -> bool:
        detail = event.detail if isinstance(event.detail, dict) else {}
        query = detail.get("query")
        return (
            event.actor_id == self.user.pk
            or detail.get("owner") == self.username
            or (isinstance(query, dict) and query.get("owner") == self.username)
        )

    def scrubbed(self, event: AuditEvent) -> tuple[str, Any]:
        """The event's target and detail without the user's names and, in an event about the
        user's data (a search that found it, one filtered on the user), its search texts."""
        target = self.text(event.target)
        detail = self.value(event.detail, queries=False)
        if target != event.target or detail != event.detail or self._about_the_user(event):
            detail = self.value(detail, queries=True)
            target = _without_search_texts(target)
        return target, detail

    def candidates(self, since=None, chunk: int = 500):
        """Events that can name the user's data: the user's own, those whose owner or target
        is the user's (by the target index, `chunk` targets a query), and the listing actions
        (whose details list anyone's threads). Each event once."""
        events = AuditEvent.objects.exclude(action="user.erase")
        if since is not None:
            events = events.filter(created_at__gte=since)
        targets = sorted(self.targets)
        filters = [Q(actor=self.user) | Q(detail__owner=self.username) | Q(action__in=LISTING_ACTIONS)]
        filters += [Q(target__in=targets[start : start + chunk]) for start in range(0, len(targets), chunk)]
        seen: set[int] = set()
        for where in filters:
            for event in events.filter(where).order_by("pk").iterator(chunk_size=1000):
                if event.pk not in seen:
                    seen.add(event.pk)
                    yield event


def _without_search_texts(target: str) -> str:
    """A listing's target (`search?limit=50&q=kyoto`) with its search texts erased."""
    kind, mark, query = target.partition("?")
    if not mark:
        return target
    parts = []
    for part in query.split("&"):
        name, equals, _ = part.partition("=")
        parts.append(f"{name}={ERASED}" if equals and name in ("q", "query") else part)
    return f"{kind}?{'&'.join(parts)}"


def _redact_audit(scrubber: _Scrubber, batch: int, since=None) -> int:
    """Redact every candidate event that names the user's data; how many were."""
    changes = []
    for event in scrubber.candidates(since):
        target, detail = scrubber.scrubbed(event)
        if target != event.target or detail != event.detail:
            changes.append((event.pk, target, detail))
    for start in range(0, len(changes), batch):
        with transaction.atomic():
            for pk, target, detail in changes[start : start + batch]:
                AuditEvent.objects.redact(pk, target=target[:200], detail=detail)
    return len(changes)


def user_erase(*, actor, username: Any, revoke_access: bool = False, batch: int = BATCH, request=None) -> dict[str, Any]:
    """Delete every thread, block, checkpoint, store item and graph definition of one user
    and redact their names out of the audit log; return the receipt.

    Admin (or the trusted command line, `actor=None`). Batches of at most
    `batch` rows per transaction. The receipt is recorded as a `user.erase`
    audit event.
    """
    user = _user(username)
    username = user.get_username()
    _ensure_admin(actor, username)
    if revoke_access:
        with transaction.atomic():
            type(user).objects.filter(pk=user.pk).update(is_active=False)
            ApiKey.objects.filter(owner=user, revoked_at__isnull=True).update(revoked_at=timezone.now())
            apikey_cache_forget()
    scrubber = _Scrubber.of(user)
    started = timezone.now()
    redacted = _redact_audit(scrubber, batch)
    receipt = _Receipt()
    for pk, thread_id in Thread.objects.filter(owner=user).order_by("pk").values_list("pk", "thread_id"):
        thread = Thread(pk=pk, thread_id=thread_id)
        _erase_blocks(thread, receipt, batch)
        _erase_checkpoints(thread, receipt, batch)
        with transaction.atomic():
            # Its open live streams end, saying why, when this commits.
            thread_notify(pk, "erased")
            Thread.objects.filter(pk=pk).delete()
        receipt.line("threads", thread_id)
        receipt.counts["threads"] += 1
    _erase_items(user, receipt, batch)
    _erase_graphs(user, receipt, batch)
    redacted += _redact_audit(scrubber, batch, since=started)
    body = {
        "user": username,
        "erased_at": timezone.now().isoformat(),
        "erased_by": actor.get_username() if actor is not None else "system",
        "access_revoked": revoke_access,
        "counts": {
            name: receipt.counts[name]
            for name in ("threads", "blocks", "checkpoints", "pending_writes", "checkpoint_values", "store_items", "graph_definitions")
        },
        "sha256": {name: digest.hexdigest() for name, digest in receipt.hashes.items()},
        "audit_events_redacted": redacted,
    }
    audit_record(actor=actor, action="user.erase", target=f"user:{username}", detail=body, request=request)
    return body


def user_erase_start(*, actor, username: Any, revoke_access: bool = False, request=None) -> dict[str, Any] | EraseJob:
    """Admin: erase now (the receipt), or, past `INLINE_THREADS` threads where there is a
    job queue, record an `EraseJob` and queue it in the same transaction (the job).

    A large erase then holds no web request; its page shows the receipt when done.
    """
    preview = user_erase_preview(actor=actor, username=username)
    if preview["threads"] <= INLINE_THREADS or not queue.is_queued():
        return user_erase(actor=actor, username=username, revoke_access=revoke_access, request=request)
    with transaction.atomic():
        job = EraseJob.objects.create(
            actor=actor, actor_name=actor.get_username(), username=preview["user"], revoke_access=revoke_access, preview=preview
        )
        queue.job_enqueue("user_erase_run", job_id=job.pk)
    return job


def user_erase_job_run(*, job_id: int) -> EraseJob:
    """The queue's job: the erase, as the admin who asked for it.

    Taken again after its worker died, it erases what is left (each batch committed
    stays erased); the receipt then counts what that run deleted, and `attempts` says
    it was resumed. A refusal (the admin lost the role) fails the job.
    """
    with transaction.atomic():
        job = EraseJob.objects.select_for_update(of=("self",)).select_related("actor").get(pk=job_id)
        if job.is_finished:
            return job
        job.status, job.attempts = EraseJob.Status.RUNNING, job.attempts + 1
        job.save(update_fields=["status", "attempts"])
    try:
        receipt = user_erase(actor=job.actor, username=job.username, revoke_access=job.revoke_access)
    except (Forbidden, NotFound) as exc:
        EraseJob.objects.filter(pk=job.pk).update(status=EraseJob.Status.FAILED, error=exc.message, finished_at=timezone.now())
    else:
        EraseJob.objects.filter(pk=job.pk).update(status=EraseJob.Status.DONE, receipt=receipt, finished_at=timezone.now())
    job.refresh_from_db()
    return job


def user_erase_job_get(*, actor, job_id: int) -> EraseJob:
    """An erase job, for its page (admins)."""
    job = EraseJob.objects.filter(pk=job_id).first()
    if job is None:
        raise NotFound(f"No erase job {job_id}.")
    _ensure_admin(actor, job.username)
    return job
