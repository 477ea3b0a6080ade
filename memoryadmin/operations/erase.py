"""Erasing a user's data, for data-protection requests (docs/operations.md, "Erase a user").

Every thread (with its blocks, checkpoints and pending writes) and every store
item the user owns is deleted, in batches of short transactions. What was
deleted is summed up in a receipt: counts, and a SHA-256 over each kind of
record's identity (thread ids; thread, seq and chain hash of each block — the
chain hash commits to the message content without keeping it; thread,
namespace and id of each checkpoint; namespace, key and a hash of the value of
each store item). The receipt is kept as an audit event (`user.erase`): the
audit log then holds who was erased, when, by whom and how much, never what.

The account itself stays (Django's admin deletes accounts). With
`revoke_access`, the account is deactivated and its API keys revoked first, so
its agents cannot write new data while it is erased.

An interrupted erase (a crash between batches) leaves fewer rows, never a
broken thread: each batch keeps the thread's counters exact. Run it again to
finish; the second receipt covers what the second run deleted.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Count, F
from django.utils import timezone

from memoryadmin import roles
from memoryadmin.audit import audit_record
from memoryadmin.errors import Forbidden, InvalidInput, NotFound
from memoryadmin.json import canonical
from memoryadmin.models import ApiKey

from sessions_app.checkpoints.models import Checkpoint, CheckpointWrite
from sessions_app.threads.models import Block, Thread
from memoryadmin.operations.retention import payload_bytes

BATCH = 2000


def _user(username: Any):
    if not isinstance(username, str) or not username.strip():
        raise InvalidInput("username is required.", fields={"username": ["is required."]})
    user = get_user_model().objects.filter(username=username.strip()).first()
    if user is None:
        raise NotFound(f"No user {username!r}.")
    return user


def _ensure_admin(actor, username: str) -> None:
    if actor is not None and not roles.is_admin(actor):
        raise Forbidden("Only an admin may erase a user's data.", target=f"user:{username}", action="user.erase")


def _store_items(user):
    from store_app.models import StoreItem

    return StoreItem.objects.filter(owner=user)


def user_erase_preview(*, actor, username: Any) -> dict[str, Any]:
    """What erasing the user would delete (five queries). Reads only."""
    user = _user(username)
    _ensure_admin(actor, user.get_username())
    threads = Thread.objects.filter(owner=user)
    blocks = Block.objects.filter(thread__owner=user).aggregate(n=Count("id"), size=payload_bytes("message", "content"))
    checkpoints = Checkpoint.objects.filter(thread__owner=user).aggregate(n=Count("id"), size=payload_bytes("checkpoint", "metadata"))
    writes = CheckpointWrite.objects.filter(thread__owner=user).aggregate(n=Count("id"), size=payload_bytes("value"))
    items = _store_items(user).aggregate(n=Count("id"), size=payload_bytes("value"))
    return {
        "user": user.get_username(),
        "role": roles.role_of(user),
        "threads": threads.count(),
        "blocks": blocks["n"],
        "checkpoints": checkpoints["n"],
        "pending_writes": writes["n"],
        "store_items": items["n"],
        "bytes": blocks["size"] + checkpoints["size"] + writes["size"] + items["size"],
    }


class _Receipt:
    def __init__(self) -> None:
        self.counts: Counter = Counter()
        self.hashes = {name: hashlib.sha256() for name in ("threads", "blocks", "checkpoints", "store_items")}

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
            Checkpoint.objects.filter(pk__in=[row[0] for row in rows]).delete()
        receipt.counts["checkpoints"] += len(rows)
    with transaction.atomic():
        writes, _ = CheckpointWrite.objects.filter(thread=thread).delete()
    receipt.counts["pending_writes"] += writes


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


def user_erase(*, actor, username: Any, revoke_access: bool = False, batch: int = BATCH, request=None) -> dict[str, Any]:
    """Delete every thread, block, checkpoint and store item of one user; return the receipt.

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
    receipt = _Receipt()
    for pk, thread_id in Thread.objects.filter(owner=user).order_by("pk").values_list("pk", "thread_id"):
        thread = Thread(pk=pk, thread_id=thread_id)
        _erase_blocks(thread, receipt, batch)
        _erase_checkpoints(thread, receipt, batch)
        with transaction.atomic():
            Thread.objects.filter(pk=pk).delete()
        receipt.line("threads", thread_id)
        receipt.counts["threads"] += 1
    _erase_items(user, receipt, batch)
    body = {
        "user": username,
        "erased_at": timezone.now().isoformat(),
        "erased_by": actor.get_username() if actor is not None else "system",
        "access_revoked": revoke_access,
        "counts": {name: receipt.counts[name] for name in ("threads", "blocks", "checkpoints", "pending_writes", "store_items")},
        "sha256": {name: digest.hexdigest() for name, digest in receipt.hashes.items()},
    }
    audit_record(actor=actor, action="user.erase", target=f"user:{username}", detail=body, request=request)
    return body
