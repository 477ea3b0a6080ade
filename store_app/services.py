"""Writes to the long-term store. Every rule of the store lives here.

The store's semantics are LangGraph's `BaseStore` (docs/store.md, rules ST1-ST8):
put upserts an item (`store_app.puts` writes it; a batch, `store_app.batch`, runs many at
once), delete removes it, TTLs are in minutes and refreshed on read.
On top of them, memoryadmin's ownership (docs/store.md, rule ST3; decided by
memoryadmin.policy): a key belongs to whoever wrote it first, and stays theirs when the
item expires (until the sweep removes the row); nobody else writes it, not even an admin;
operators write nothing; the owner or an admin deletes an item, from the API and the
dashboard alike; admins clear subtrees; every delete is in the audit log.
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any

from django.db import transaction
from django.db.models import DateTimeField, ExpressionWrapper, F, Value
from django.utils import timezone

from memoryadmin import policy
from memoryadmin.audit import audit_record
from memoryadmin.errors import NotFound

from .models import StoreItem, item_target
from .namespaces import Namespace, key_validate, namespace_to_path, namespace_validate
# The TTL rule lives with the put; TTL_MAX_MINUTES and ttl_validate stay importable from here.
from .puts import TTL_MAX_MINUTES, needs_transaction, put_apply, put_validate, puts_embed, ttl_validate  # noqa: F401
from .vectors import index_paths_validate

SWEEP_BATCH = 5000


def index_validate(index: Any) -> None:
    """LangGraph's `index`: False (not embedded), a list of field paths, or None (the default fields); rule ST10."""
    index_paths_validate(index)


def _ensure_writes_at_all(actor, target: str, action: str) -> None:
    """Before anything is read: whether the actor may do `action` to an item of their own (operators may not)."""
    policy.ensure_may_write(actor, owner_id=None, target=target, action=action)


def _locked(path: str, key: str) -> StoreItem | None:
    return StoreItem.objects.select_for_update().filter(namespace_path=path, key=key).first()


def store_item_put(
    *,
    actor,
    namespace: Any,
    key: Any,
    value: Any,
    ttl: Any = None,
    index: Any = None,
    vectors: Any = None,
    dims: Any = None,
    now=None,
) -> StoreItem:
    """Upsert (namespace, key) -> value with an optional TTL in minutes, and its index (rule ST10).

    LangGraph's namespace rules (non-empty, labels non-empty without "." or NUL,
    root "langgraph" reserved) and a JSON-object value, else 400 with nothing
    written. A new item is owned by the writer; an existing live one may be
    overwritten by its owner only (anyone else, admins included: 403, nothing
    written) and keeps its created_at. An expired item no longer exists for reads, but its key stays its owner's until the
    sweep removes the row: the owner's put starts a new item there, anyone else's is a
    403 (docs/api.md, "Taken ids and keys"). Concurrent puts of one key are one atomic upsert
    each: none fails, the last to commit wins (rule ST4). `vectors` (field path
    -> `dims` numbers) are the caller's embeddings; without them the server's
    embedder, if one is configured, embeds the fields `index` names.
    """
    put = put_validate(actor=actor, namespace=namespace, key=key, value=value, ttl=ttl, index=index, vectors=vectors, dims=dims)
    # Embedding runs before the transaction: no lock is held while a model thinks.
    puts_embed([put])
    # One statement on PostgreSQL unless the put brings vectors (store_app.puts): no BEGIN and COMMIT around it.
    with transaction.atomic() if needs_transaction([put]) else nullcontext():
        return put_apply(actor=actor, put=put, now=now)


@transaction.atomic
def store_item_delete(*, actor, namespace: Any, key: Any, request=None, now=None, missing_ok: bool = True) -> bool:
    """Delete (namespace, key): its owner or an admin; others 403 with nothing deleted.

    One rule for the API and the dashboard (memoryadmin.policy, "store.delete").
    Deleting what does not exist (or has expired) is a no-op, as in LangGraph:
    it answers False; with `missing_ok=False` (the dashboard's delete button)
    it is a 404. Operators write nothing, so they get 403 either way.
    """
    namespace = namespace_validate(list(namespace) if isinstance(namespace, tuple) else namespace)
    key = key_validate(key)
    target = item_target(namespace, key)
    _ensure_writes_at_all(actor, target, "store.delete")
    now = now or timezone.now()
    item = _locked(namespace_to_path(namespace), key) if namespace else None
    if item is None or item.is_expired(now):
        if not missing_ok:
            raise NotFound(f"No live item {key!r} in {namespace_to_path(namespace) or '(root)'}.")
        return False
    policy.ensure_may_write(actor, owner_id=item.owner_id, target=target, action="store.delete")
    _delete_audited(actor=actor, item=item, request=request)
    return True


def _delete_audited(*, actor, item: StoreItem, request) -> None:
    detail = {"owner": item.owner.get_username(), "namespace": list(item.namespace), "key": item.key}
    item.delete()
    audit_record(actor=actor, action="store.delete", target=item.target, detail=detail, request=request)


@transaction.atomic
def store_clear(*, actor, namespace: Namespace = (), request=None) -> int:
    """Admin: delete every item in the namespace and below it (the whole store for ()),
    of every owner, expired ones included. Returns how many rows went; audited."""
    namespace = namespace_validate(list(namespace), field="namespace")
    path = namespace_to_path(namespace)
    target = f"store:{path}" if path else "store:*"
    policy.ensure_admin(actor, target=target, action="store.clear", message="Only an admin may delete store items.")
    deleted, _ = StoreItem.objects.under(namespace).delete()
    audit_record(
        actor=actor,
        action="store.clear",
        target=target,
        detail={"namespace": list(namespace), "deleted": deleted},
        request=request,
    )
    return deleted


def store_ttl_refresh(*, actor, items: list[StoreItem], now=None) -> int:
    """Refresh on read (LangGraph's refresh_ttl, on by default): expires_at = now + ttl.

    Only for items the reader owns: an operator or admin auditing someone
    else's memories must not keep them alive. One UPDATE, none when no item
    has a TTL.
    """
    ids = [item.pk for item in items if item.ttl is not None and policy.owns(actor, item.owner_id)]
    if not ids:
        return 0
    now = now or timezone.now()
    updated = StoreItem.objects.filter(pk__in=ids, ttl__isnull=False).update(
        expires_at=ExpressionWrapper(Value(now, output_field=DateTimeField()) + F("ttl"), output_field=DateTimeField())
    )
    for item in items:
        if item.pk in ids:
            item.expires_at = now + item.ttl
    return updated


def store_item_sweep(*, now=None, batch: int = SWEEP_BATCH) -> int:
    """Delete expired items for good, in batches of short transactions (manage.py store_sweep).

    Reads already hide expired items; the sweep reclaims their rows.
    """
    now = now or timezone.now()
    total = 0
    while True:
        with transaction.atomic():
            ids = list(
                StoreItem.objects.filter(expires_at__lte=now).order_by("expires_at").values_list("id", flat=True)[:batch]
            )
            if not ids:
                return total
            deleted, _ = StoreItem.objects.filter(pk__in=ids, expires_at__lte=now).delete()
            total += deleted
