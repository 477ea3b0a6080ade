"""A batch of store operations in one request and, when it writes, one transaction (docs/store.md, rule ST11).

LangGraph's stores run `batch(ops)` so, and so does this:

- every operation is checked before anything runs;
- the reads (get, search, list_namespaces) are answered from the store as it
  was before the batch's writes, in the batch's order;
- then the writes (put, delete) are applied, one per (namespace, key): of
  several writes of one key the last one is the one applied (in the place of
  the first), as LangGraph's in-memory and PostgreSQL stores dedupe them;
- the server's embedder, if one is configured, runs once for all the puts that
  bring no vectors and once for all the text queries, before the transaction.

`atomic` (the default) is LangGraph's `batch`: any refusal refuses the whole
batch (400 naming `ops[i].field`, 403), and nothing is written. Not atomic is
how a client sends the calls of many independent callers at once: each
operation's refusal is its own answer (naming its own fields), and the others
go on (each write in its own savepoint).
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

from memoryadmin import policy
from memoryadmin.audit import audit_denial
from memoryadmin.errors import DomainError, Forbidden, InvalidInput
from memoryadmin.params import parse_bool

from . import selectors, services
from .models import item_target
from .namespaces import key_validate, namespace_to_path, namespace_validate
from .puts import PutRequest, needs_transaction, put_validate, puts_apply, puts_embed

MAX_BATCH_OPS = 1000
KINDS = ("get", "put", "delete", "search", "list_namespaces")
READS = ("get", "search", "list_namespaces")


@dataclass
class Outcome:
    """One operation's answer: its result, or the error that refused it (not atomic)."""

    result: Any = None
    error: DomainError | None = None


@dataclass
class _Op:
    index: int
    kind: str
    raw: dict[str, Any]
    put: PutRequest | None = None
    search: selectors.SearchRequest | None = None
    namespace: tuple[str, ...] = ()
    key: str = ""
    refresh: bool = True
    merged: list[int] = field(default_factory=list)


def _at(index: int, exc: DomainError) -> DomainError:
    """The error, naming the operation it came from: `ops[3].namespace`."""
    where = f"ops[{index}]"
    if isinstance(exc, Forbidden):
        return Forbidden(f"{where}: {exc.message}", target=exc.target, action=exc.action)
    renamed = type(exc)(f"{where}: {exc.message}", fields={f"{where}.{name}": v for name, v in exc.fields.items()})
    renamed.code = exc.code
    return renamed


def _parse(index: int, raw: Any, actor) -> _Op:
    if not isinstance(raw, dict):
        raise InvalidInput("an operation is a JSON object.", fields={"op": ["must be a JSON object."]})
    kind = raw.get("op")
    if kind not in KINDS:
        raise InvalidInput(f"op must be one of {', '.join(KINDS)}.", fields={"op": [f"must be one of {', '.join(KINDS)}."]})
    op = _Op(index=index, kind=kind, raw=raw)
    if kind in ("get", "search"):
        op.refresh = parse_bool(raw.get("refresh_ttl"), name="refresh_ttl", default=True)
    if kind == "get":
        op.namespace = namespace_validate(raw.get("namespace"))
        op.key = key_validate(raw.get("key"))
    elif kind == "put":
        op.put = put_validate(
            actor=actor,
            namespace=raw.get("namespace"),
            key=raw.get("key"),
            value=raw.get("value"),
            ttl=raw.get("ttl"),
            index=raw.get("index"),
            vectors=raw.get("vectors"),
            dims=raw.get("dims"),
        )
        op.namespace, op.key = op.put.namespace, op.put.key
    elif kind == "delete":
        op.namespace = namespace_validate(raw.get("namespace"))
        op.key = key_validate(raw.get("key"))
        # Operators never write (memoryadmin.policy); the owner-or-admin rule is the delete's own.
        policy.ensure_may_write(actor, owner_id=getattr(actor, "pk", None), target=item_target(op.namespace, op.key), action="store.delete")
    elif kind == "search":
        op.search = selectors.store_search_validate(
            namespace_prefix=raw.get("namespace_prefix", []),
            filter=raw.get("filter"),
            query=raw.get("query"),
            limit=raw.get("limit", 10),
            offset=raw.get("offset", 0),
            query_vector=raw.get("query_vector"),
            dims=raw.get("dims"),
        )
    return op


def store_batch(*, actor, ops: Any, atomic: Any = True, request=None, now=None) -> list[Outcome]:
    """Run a batch of store operations as LangGraph's stores do (module docstring; rule ST11).

    `ops` is a list of at most 1000 objects, each with `op` ("get", "put",
    "delete", "search", "list_namespaces") and that operation's fields, as the
    single endpoints take them (namespaces as lists). Answers one Outcome per
    operation, in order.
    """
    atomic = parse_bool(atomic, name="atomic", default=True)
    if not isinstance(ops, list):
        raise InvalidInput("ops must be a list of operations.", fields={"ops": ["must be a list of operations."]})
    if len(ops) > MAX_BATCH_OPS:
        raise InvalidInput(f"ops has {len(ops)} operations; at most {MAX_BATCH_OPS}.", fields={"ops": [f"at most {MAX_BATCH_OPS}."]})
    outcomes = [Outcome() for _ in ops]
    parsed: list[_Op] = []
    for index, raw in enumerate(ops):
        try:
            parsed.append(_parse(index, raw, actor))
        except DomainError as exc:
            if atomic:
                raise _at(index, exc) from None
            outcomes[index].error = exc
    puts_embed([op.put for op in parsed if op.put is not None])
    searches = [op for op in parsed if op.search is not None]
    for op, embedded in zip(searches, selectors.store_search_embed([op.search for op in searches]), strict=True):
        op.search = embedded
    reads = [op for op in parsed if op.kind in READS]
    writes = [op for op in parsed if op.kind not in READS]
    # A batch of reads alone (a client's `get` or `search`) needs no transaction: READ COMMITTED
    # gives a transaction's statements no common snapshot anyway, and the TTL refresh after the
    # reads is one UPDATE of its own. Two round trips (BEGIN, COMMIT) fewer for the commonest batch.
    # So for a batch of one put and nothing else, one statement on PostgreSQL (store_app.puts), a
    # refusal of which writes nothing.
    one_statement = not reads and len(writes) == 1 and writes[0].kind == "put" and not needs_transaction([writes[0].put])
    with transaction.atomic() if writes and not one_statement else nullcontext():
        _run_reads(actor, reads, outcomes, atomic=atomic, now=now)
        _run_writes(actor, writes, outcomes, atomic=atomic, request=request, now=now)
    if request is not None:
        for outcome in outcomes:
            if isinstance(outcome.error, Forbidden):
                audit_denial(request=request, exc=outcome.error)
    return outcomes


def _run_reads(actor, reads: list[_Op], outcomes: list[Outcome], *, atomic: bool, now) -> None:
    """Every read, from the store as it is before the batch's writes; TTLs refreshed in one UPDATE."""
    gets = selectors.store_items_get_many(keys=[(op.namespace, op.key) for op in reads if op.kind == "get"], now=now)
    refreshed = []
    for op in reads:
        try:
            if op.kind == "get":
                item = gets.get((op.namespace, op.key))
                result = selectors.store_item_readable(actor=actor, item=item) if item is not None else None
                found = [result] if result is not None else []
            elif op.kind == "search":
                result = found = selectors.store_item_search(actor=actor, request=op.search, now=now)
            else:
                found = []
                result = selectors.store_namespace_list(
                    actor=actor,
                    prefix=op.raw.get("prefix"),
                    suffix=op.raw.get("suffix"),
                    max_depth=op.raw.get("max_depth"),
                    limit=op.raw.get("limit", 100),
                    offset=op.raw.get("offset", 0),
                    now=now,
                )
        except DomainError as exc:
            if atomic:
                raise _at(op.index, exc) from None
            outcomes[op.index].error = exc
            continue
        outcomes[op.index].result = result
        if op.refresh:
            refreshed += found
    services.store_ttl_refresh(actor=actor, items=refreshed, now=now)


def _run_writes(actor, writes: list[_Op], outcomes: list[Outcome], *, atomic: bool, request, now) -> None:
    """One write per (namespace, key), the last of them: every put in one upsert, then the deletes.

    Puts and deletes left after deduplication are of different keys, so their
    order no longer matters; the deletes go in key order, as the puts do.
    """
    by_key: dict[tuple[str, str], _Op] = {}
    for op in writes:
        slot = (namespace_to_path(op.namespace), op.key)
        first = by_key.setdefault(slot, op)
        if first is not op:
            if not first.merged:
                first.merged.append(first.index)
            first.merged.append(op.index)
            # The first op keeps its place and takes the later one's content.
            first.kind, first.put, first.raw = op.kind, op.put, op.raw

    def refused(op: _Op, exc: DomainError) -> None:
        indexes = op.merged or [op.index]
        if atomic:
            raise _at(indexes[-1], exc)
        for index in indexes:
            outcomes[index].error = exc

    puts = [op for op in by_key.values() if op.kind == "put"]
    for op, outcome in zip(puts, puts_apply(actor=actor, puts=[op.put for op in puts], now=now, items=False), strict=True):
        if isinstance(outcome, DomainError):
            refused(op, outcome)
    deletes = sorted((op for op in by_key.values() if op.kind == "delete"), key=lambda op: (namespace_to_path(op.namespace), op.key))
    for op in deletes:
        try:
            with transaction.atomic():
                services.store_item_delete(actor=actor, namespace=list(op.namespace), key=op.key, request=request, now=now)
        except DomainError as exc:
            refused(op, exc)
