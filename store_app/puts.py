"""How a put is written: checked first, embedded outside any transaction, then one atomic upsert.

`store_app.services.store_item_put` and the batch service (`store_app.batch`) both
go through here (docs/store.md, rules ST4 and ST10):

1. `put_validate`: every rule that needs no database, 400 naming the field (or
   403 for an operator) with nothing written;
2. `puts_embed`: the server's embedder, once for all the puts of a request that
   bring no vectors of their own, before a transaction holds a lock;
3. `puts_apply`: one `INSERT … ON CONFLICT (namespace_path, key) DO UPDATE …
   WHERE` the writer owns the live row (or it has expired) for all the puts of
   a request, so concurrent writes of one key never fail: the last one to
   commit wins. A put without its row back met another user's live item: 403. The statement
   is prepared once per connection (memoryadmin/postgres/prepared.py).
   The replaced items' vectors are deleted and the puts' inserted (one INSERT). On
   PostgreSQL the upsert and the delete are one function (`store_items_put`, migration
   0008), so a put that brings no vectors is one statement and needs no transaction of
   its own (`needs_transaction`); SQLite runs the upsert, the DELETE and the INSERT inside one.
"""

from __future__ import annotations

import functools
import secrets
from dataclasses import dataclass, field
from datetime import timedelta, timezone as dt_timezone
from typing import Any

from django.conf import settings
from django.db import connections, router
from django.db.models import Q
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from memoryadmin import policy
from memoryadmin.errors import Forbidden, InvalidInput
from memoryadmin.json import db_text
from memoryadmin.postgres.prepared import prepared_cursor

from . import embedders, vectors as vec
from .matching import value_validate
from .models import StoreItem, StoreVector, item_target
from .namespaces import Namespace, key_validate, namespace_to_path, namespace_validate

# Where a put's vectors version comes from on PostgreSQL (migration 0007): never the same twice,
# a rolled-back transaction's value included.
VERSION_SEQUENCE = "store_item_vectors_version_seq"

# Ten years: a longer TTL is a mistake, not a wish (and would overflow date arithmetic).
TTL_MAX_MINUTES = 10 * 365 * 24 * 60


@dataclass
class PutRequest:
    """A put whose every field has been checked; `texts` are still to be embedded by the server."""

    namespace: Namespace
    key: str
    value: dict[str, Any]
    ttl: timedelta | None
    index: tuple[str, ...] | bool | None
    vectors: dict[str, list[float]] = field(default_factory=dict)
    dims: int | None = None
    texts: list[tuple[str, str]] = field(default_factory=list)

    @property
    def target(self) -> str:
        return item_target(self.namespace, self.key)


def ttl_validate(ttl: Any, *, field: str = "ttl") -> timedelta | None:
    """A TTL in minutes (LangGraph's unit): a positive number, or None for no expiry."""
    if ttl is None:
        return None
    if not isinstance(ttl, (int, float)) or isinstance(ttl, bool):
        raise InvalidInput(f"{field} must be a number of minutes or null.", fields={field: ["must be a number of minutes or null."]})
    if not 0 < ttl <= TTL_MAX_MINUTES:
        message = f"must be more than 0 and at most {TTL_MAX_MINUTES} minutes."
        raise InvalidInput(f"{field} {message}", fields={field: [message]})
    return timedelta(minutes=ttl)


def put_validate(
    *, actor, namespace: Any, key: Any, value: Any, ttl: Any = None, index: Any = None, vectors: Any = None, dims: Any = None
) -> PutRequest:
    """Every rule of a put that needs no database (rules ST1, ST2, ST5, ST10); operators are refused here."""
    namespace = namespace_validate(namespace, for_write=True)
    key = key_validate(key)
    value = value_validate(value)
    ttl_delta = ttl_validate(ttl)
    index = vec.index_paths_validate(index)
    put = PutRequest(namespace=namespace, key=key, value=value, ttl=ttl_delta, index=index)
    # Operators never write (memoryadmin.policy): refused before anything is looked up.
    policy.ensure_may_write(actor, owner_id=getattr(actor, "pk", None), target=put.target, action="store.put")
    if vectors is not None:
        # The caller embedded the value itself (MemoryAdminStore with an index).
        put.vectors = vec.vectors_validate(vectors, dims=dims)
        put.dims = dims
    elif index is not False and embedders.configured() is not None:
        paths = index if isinstance(index, tuple) else tuple(settings.MEMORYADMIN_STORE_EMBED_FIELDS)
        put.texts = vec.indexed_texts(value, paths)
    return put


def puts_embed(puts: list[PutRequest]) -> None:
    """Embed the texts of every put that needs the server's embedder, in one call (distinct texts once)."""
    wanted = [put for put in puts if put.texts]
    if not wanted:
        return
    distinct = list(dict.fromkeys(text for put in wanted for _, text in put.texts))
    by_text = dict(zip(distinct, embedders.embed(distinct), strict=True))
    for put in wanted:
        put.vectors = {name: by_text[text] for name, text in put.texts}
        put.dims = settings.MEMORYADMIN_STORE_EMBED_DIMS
        put.texts = []


# SQLite's upsert (PostgreSQL's is the function `store_items_put`, migration 0008: the same rule
# there, and the replaced items' vectors deleted in the same round trip).
_UPSERT_SQL = """
INSERT INTO {table} AS item ({owner}, {path}, {depth}, {key}, {value}, {ttl}, {expires}, {created}, {updated}, {version})
VALUES {rows}
ON CONFLICT ({path}, {key}) DO UPDATE SET
    {owner} = excluded.{owner},
    {created} = CASE WHEN {expired} THEN excluded.{created} ELSE item.{created} END,
    {value} = excluded.{value},
    {ttl} = excluded.{ttl},
    {expires} = excluded.{expires},
    {updated} = excluded.{updated},
    {version} = excluded.{version}
WHERE item.{owner} = excluded.{owner}
RETURNING {id}, {path}, {key}, 0, {version}, {created}
"""

# Any number of puts on PostgreSQL: the rows as one JSON parameter, read by json_to_recordset in
# the function, so that the statement's text is the same for any number of puts (psycopg parses a
# statement's text for its placeholders and keeps the result for short texts only) and a row
# costs one JSON object written in C instead of nine parameters adapted one by one. The columns
# are named: the statement is prepared (memoryadmin/postgres/prepared.py).
_PG_PUT_SQL = (
    "SELECT put_id, put_path, put_key, put_inserted, put_version, put_created"
    " FROM store_items_put(%s::bigint, %s::timestamptz, %s::json)"
)


@functools.lru_cache(maxsize=64)
def _sqlite_upsert_sql(rows: int) -> str:
    """SQLite's upsert of `rows` puts, answering for each row written its id, path, key, 0 (SQLite
    cannot tell an inserted row), vectors version and created_at."""

    def quote(name: str) -> str:
        return f'"{name}"'

    names = {
        "table": quote(StoreItem._meta.db_table),
        "id": quote("id"),
        "owner": quote("owner_id"),
        "path": quote("namespace_path"),
        "depth": quote("depth"),
        "key": quote("key"),
        "value": quote("value"),
        "ttl": quote("ttl"),
        "expires": quote("expires_at"),
        "created": quote("created_at"),
        "updated": quote("updated_at"),
        "version": quote("vectors_version"),
    }
    # An existing row that has expired is no longer an item: its owner's put starts a new one
    # there (anyone else's is refused: the key stays its owner's until the sweep, ST3).
    expired = "(item.{expires} IS NOT NULL AND item.{expires} <= excluded.{updated})".format(**names)
    values = ", ".join(["(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"] * rows)
    return _UPSERT_SQL.format(expired=expired, rows=values, **names)


def _random_version() -> int:
    """SQLite's vectors version: SQLite has no sequence outside transactions (a rolled-back
    AUTOINCREMENT is used again), so 63 random bits, from 1: two puts of one item draw the
    same one with a probability of 2**-63."""
    return secrets.randbits(63) or 1


def _prep(name: str, value: Any, connection) -> Any:
    return StoreItem._meta.get_field(name).get_db_prep_save(value, connection)


def _as_datetime(value: Any):
    # SQLite answers a raw RETURNING with the stored UTC time, naive (or as text); PostgreSQL an aware datetime.
    if isinstance(value, str):
        value = parse_datetime(value)
    return value if timezone.is_aware(value) else value.replace(tzinfo=dt_timezone.utc)


def _interval_text(ttl: timedelta) -> str:
    """A TTL as PostgreSQL's interval input, as psycopg writes a timedelta ("1 day 0:00:30")."""
    return str(ttl).replace(",", "")


def _upsert_params(connection, actor, puts: list[PutRequest], paths: list[str], order: list[int], now) -> list[Any]:
    """The upsert's parameters, rows in `order`: on PostgreSQL the owner, the time and one JSON
    array of the rows; on SQLite ten parameters a row (its vectors version the last)."""
    stamp = _prep("updated_at", now, connection)
    if connection.vendor == "postgresql":
        rows = []
        for n, i in enumerate(order):
            put = puts[i]
            row = {"n": n, "p": paths[i], "d": len(put.namespace), "k": put.key, "v": put.value}
            if put.ttl is not None:
                row["t"] = _interval_text(put.ttl)
                row["e"] = (now + put.ttl).isoformat()
            rows.append(row)
        # db_text writes every stored value (doubles kept as doubles); the rows' other fields are
        # strings and integers, which it writes as any JSON encoder does.
        return [actor.pk, stamp, db_text(rows)]
    params: list[Any] = []
    for i in order:
        put = puts[i]
        expires_at = now + put.ttl if put.ttl is not None else None
        params += [
            actor.pk,
            paths[i],
            len(put.namespace),
            put.key,
            _prep("value", put.value, connection),
            _prep("ttl", put.ttl, connection) if put.ttl is not None else None,
            _prep("expires_at", expires_at, connection) if expires_at is not None else None,
            stamp,
            stamp,
            _random_version(),
        ]
    return params


def needs_transaction(puts: list[PutRequest], *, alias: str | None = None) -> bool:
    """Whether applying `puts` takes more than one statement, so must run in a transaction: always
    on SQLite; on PostgreSQL when a put brings vectors (inserted after the function's upsert)."""
    connection = connections[alias or router.db_for_write(StoreItem)]
    return connection.vendor != "postgresql" or any(put.vectors for put in puts)


def put_apply(*, actor, put: PutRequest, now=None) -> StoreItem:
    """One put of `puts_apply`: the item written, or the 403 raised."""
    [outcome] = puts_apply(actor=actor, puts=[put], now=now)
    if isinstance(outcome, Forbidden):
        raise outcome
    return outcome


def puts_apply(*, actor, puts: list[PutRequest], now=None, items: bool = True) -> list[StoreItem | Forbidden | None]:
    """Upsert checked puts of distinct keys and replace their vectors; inside a transaction where
    `needs_transaction` says so.

    An existing item may be overwritten by its owner only (anyone else, admins
    included: its place holds a 403 from memoryadmin.policy naming the owner, and
    that row is left as it was); a live one keeps its created_at, an expired one
    starts anew. A key stays its owner's while its row exists, expired or not. Rows go in (namespace, key) order, so that two batches lock the
    keys they share in the same order. Each put's place holds the item written
    (`items`, the single put's answer) or None (a batch, which answers null for a put).
    """
    if not puts:
        return []
    now = now or timezone.now()
    alias = router.db_for_write(StoreItem)
    connection = connections[alias]
    paths = [namespace_to_path(put.namespace) for put in puts]
    order = sorted(range(len(puts)), key=lambda i: (paths[i], puts[i].key))
    params = _upsert_params(connection, actor, puts, paths, order, now)
    postgresql = connection.vendor == "postgresql"
    with prepared_cursor(connection) as cursor:
        cursor.execute(_PG_PUT_SQL if postgresql else _sqlite_upsert_sql(len(puts)), params)
        written = {(row[1], row[2]): row for row in cursor.fetchall()}
    outcomes: list[StoreItem | Forbidden | None] = []
    replaced, vectors = [], []
    refused = [(path, put) for path, put in zip(paths, puts) if (path, put.key) not in written]
    owners = {}
    if refused:
        # One more query, only when some key is another user's: who owns it, for the refusal.
        wanted = Q()
        for path, put in refused:
            wanted |= Q(namespace_path=path, key=put.key)
        owners = {(path, key): owner for path, key, owner in StoreItem.objects.filter(wanted).values_list("namespace_path", "key", "owner_id")}
    for path, put in zip(paths, puts):
        row = written.get((path, put.key))
        if row is None:
            try:
                policy.ensure_may_write(actor, owner_id=owners.get((path, put.key)), target=put.target, action="store.put")
                refusal = Forbidden("This store item belongs to another user.", target=put.target, action="store.put")
            except Forbidden as exc:
                refusal = exc
            outcomes.append(refusal)
            continue
        item_id, inserted, version = row[0], row[3], row[4]
        if not inserted:
            replaced.append(item_id)
        for name, vector in put.vectors.items():
            stored = vec.float32(vector)
            vectors.append(
                StoreVector(
                    item_id=item_id, namespace_path=path, path=name, dims=len(stored), norm=vec.norm(stored), vector=stored
                )
            )
        if not items:
            outcomes.append(None)
            continue
        outcomes.append(
            StoreItem(
                id=item_id,
                owner=actor,
                namespace_path=path,
                depth=len(put.namespace),
                key=put.key,
                value=put.value,
                ttl=put.ttl,
                expires_at=now + put.ttl if put.ttl is not None else None,
                created_at=_as_datetime(row[5]),
                updated_at=now,
                vectors_version=version,
            )
        )
    if replaced and not postgresql:
        # PostgreSQL's function has deleted them.
        StoreVector.objects.using(alias).filter(item_id__in=replaced).delete()
    if vectors:
        StoreVector.objects.using(alias).bulk_create(vectors)
    return outcomes
