"""API keys: made, checked and revoked here only.

A key looks like `ma_<prefix>_<secret>`; the prefix is stored in clear to find
the row and to show in listings, the secret only as a SHA-256 hash (keys are
random and long, so a slow password hash buys nothing).

Each server process keeps the keys it checked lately (`_KeyCache`): the row of the key,
its owner and the owner's roles, found by the SHA-256 of the whole key, so that an agent's
next requests within MEMORYADMIN_APIKEY_CACHE_SECONDS cost no query. The rule that keeps it
safe: whatever ends a key's use (a revoke, a role changed, a user deactivated, deleted or
erased) empties the cache of the process that made the change at once and again when its
transaction commits, and every other process's entries die of age: there a revoked key
works for at most MEMORYADMIN_APIKEY_CACHE_SECONDS more (0 turns the cache off).
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import re
import secrets
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import connection, transaction
from django.utils import timezone

from . import policy, roles
from .errors import NotFound
from .models import ApiKey

KEY_PREFIX = "ma_"
# What a stored prefix can be (token_hex makes them), as the whole string: anything else,
# a NUL or a newline included, is no key and never reaches the database.
PREFIX_RE = re.compile(r"\A[0-9A-Za-z]{1,16}\Z")
# last_used_at is refreshed at most this often, so a busy agent costs no write per call.
LAST_USED_RESOLUTION = timedelta(minutes=1)


@dataclass(frozen=True)
class IssuedKey:
    api_key: ApiKey
    plaintext: str


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


@transaction.atomic
def apikey_create(*, owner, name: str = "", actor=None) -> IssuedKey:
    """A new key for `owner`, shown once. Admins only; `actor=None` is the trusted command line."""
    policy.ensure_admin(actor, target=f"user:{owner.get_username()}", action="apikey.create", system=True)
    prefix = secrets.token_hex(4)
    while ApiKey.objects.filter(prefix=prefix).exists():
        prefix = secrets.token_hex(4)
    secret = secrets.token_urlsafe(32)
    key = ApiKey.objects.create(owner=owner, name=name[:100], prefix=prefix, secret_hash=_hash(secret))
    return IssuedKey(api_key=key, plaintext=f"{KEY_PREFIX}{prefix}_{secret}")


@functools.cache
def _lookup_sql() -> str:
    """The key, its owner and the owner's role groups in one statement, written once.

    Every API call runs it, so it is plain SQL: building the same ORM query on each
    request cost more than the query itself.
    """
    quote = connection.ops.quote_name
    user_model = get_user_model()
    memberships = user_model.groups.through
    user_column = memberships._meta.get_field("user").column
    group_column = memberships._meta.get_field("group").column
    key_columns = ", ".join(f"k.{quote(f.column)}" for f in ApiKey._meta.concrete_fields)
    user_columns = ", ".join(f"u.{quote(f.column)}" for f in user_model._meta.concrete_fields)
    member_of = (
        f"EXISTS (SELECT 1 FROM {quote(memberships._meta.db_table)} m JOIN {quote(Group._meta.db_table)} g"
        f" ON g.{quote(Group._meta.pk.column)} = m.{quote(group_column)}"
        f" WHERE m.{quote(user_column)} = u.{quote(user_model._meta.pk.column)} AND g.{quote('name')} = %s)"
    )
    return (
        f"SELECT {key_columns}, {user_columns}, {member_of}, {member_of}"
        f" FROM {quote(ApiKey._meta.db_table)} k"
        f" JOIN {quote(user_model._meta.db_table)} u"
        f" ON u.{quote(user_model._meta.pk.column)} = k.{quote(ApiKey._meta.get_field('owner').column)}"
        f" WHERE k.{quote('prefix')} = %s AND k.{quote('revoked_at')} IS NULL AND u.{quote('is_active')}"
    )


@functools.cache
def _column_converters() -> list[tuple[int, object, list]]:
    """What the ORM's compiler applies to each column of the lookup's row (SQLite's
    datetimes arrive as text), found once."""
    fields = [*ApiKey._meta.concrete_fields, *get_user_model()._meta.concrete_fields]
    found = []
    for index, field in enumerate(fields):
        column = field.cached_col
        converters = connection.ops.get_db_converters(column) + column.get_db_converters(connection)
        if converters:
            found.append((index, column, converters))
    return found


def _active_key_row(prefix: str) -> list | None:
    """The lookup's row, its columns converted as the ORM would: the key's, the owner's, then
    whether the owner is an admin and an operator."""
    with connection.cursor() as cursor:
        cursor.execute(_lookup_sql(), ["admin", "operator", prefix])
        row = cursor.fetchone()
    if row is None:
        return None
    values = list(row)
    for index, column, converters in _column_converters():
        for convert in converters:
            values[index] = convert(values[index], column, connection)
    return values


def _key_of(values: list) -> ApiKey:
    """New model instances for one request (never shared between requests) from a lookup row."""
    key_fields = ApiKey._meta.concrete_fields
    user_model = get_user_model()
    user_fields = user_model._meta.concrete_fields
    key = ApiKey.from_db(connection.alias, [f.attname for f in key_fields], values[: len(key_fields)])
    owner = user_model.from_db(
        connection.alias, [f.attname for f in user_fields], values[len(key_fields) : len(key_fields) + len(user_fields)]
    )
    key.owner = owner
    admin, operator = values[-2:]
    roles.remember_role(owner, {name for name, member in (("admin", admin), ("operator", operator)) if member})
    return key


class _KeyCache:
    """The keys this process checked lately, by the SHA-256 of the whole key (the module
    docstring gives the rule). Only keys that passed the check are kept; at most `SIZE`."""

    SIZE = 1024

    def __init__(self) -> None:
        self._rows: OrderedDict[bytes, tuple[float, list]] = OrderedDict()
        self._lock = threading.Lock()
        self.generation = 0

    def get(self, digest: bytes) -> list | None:
        with self._lock:
            found = self._rows.get(digest)
            if found is None:
                return None
            if found[0] <= time.monotonic():
                del self._rows[digest]
                return None
            self._rows.move_to_end(digest)
            return found[1]

    def put(self, digest: bytes, values: list, generation: int) -> None:
        seconds = settings.MEMORYADMIN_APIKEY_CACHE_SECONDS
        with self._lock:
            # A forget() since the row was read means it may be stale: it is not kept.
            if seconds <= 0 or generation != self.generation:
                return
            self._rows[digest] = (time.monotonic() + seconds, values)
            self._rows.move_to_end(digest)
            while len(self._rows) > self.SIZE:
                self._rows.popitem(last=False)

    def forget(self) -> None:
        with self._lock:
            self._rows.clear()
            self.generation += 1


_cache = _KeyCache()


def apikey_cache_forget() -> None:
    """Empties this process's cache of checked keys now and when the current transaction
    commits: called by everything that revokes a key or changes who its owner is."""
    _cache.forget()
    if connection.in_atomic_block:
        transaction.on_commit(_cache.forget)


def apikey_authenticate(raw: str) -> ApiKey | None:
    """The active key matching `raw`, or None. Constant-time on the secret.

    A key checked within MEMORYADMIN_APIKEY_CACHE_SECONDS is found in this process's cache,
    by the SHA-256 of the whole key, without a query (the module docstring gives the rule).
    """
    if not raw.startswith(KEY_PREFIX):
        return None
    prefix, sep, secret = raw[len(KEY_PREFIX):].partition("_")
    if not sep or not secret or not PREFIX_RE.fullmatch(prefix):
        return None
    digest = hashlib.sha256(raw.encode()).digest()
    values = _cache.get(digest)
    if values is None:
        generation = _cache.generation
        values = _active_key_row(prefix)
        if values is None:
            return None
        key = _key_of(values)
        if not hmac.compare_digest(key.secret_hash, _hash(secret)):
            return None
        _cache.put(digest, values, generation)
    else:
        key = _key_of(values)
    now = timezone.now()
    if key.last_used_at is None or now - key.last_used_at > LAST_USED_RESOLUTION:
        ApiKey.objects.filter(pk=key.pk).update(last_used_at=now)
        key.last_used_at = now
        # The cached row carries the new time, so the next requests do not write it again.
        values[[f.attname for f in ApiKey._meta.concrete_fields].index("last_used_at")] = now
    return key


@transaction.atomic
def apikey_revoke(*, prefix: str, owner=None, actor=None) -> ApiKey:
    """Revoke the key (of `owner`, when given). Admins only; `actor=None` is the trusted command line."""
    policy.ensure_admin(actor, target=f"apikey:{prefix}", action="apikey.revoke", system=True)
    qs = ApiKey.objects.filter(prefix=prefix)
    if owner is not None:
        qs = qs.filter(owner=owner)
    key = qs.select_for_update().first()
    if key is None:
        raise NotFound(f"no API key with prefix {prefix!r}")
    if key.revoked_at is None:
        key.revoked_at = timezone.now()
        key.save(update_fields=["revoked_at"])
    apikey_cache_forget()
    return key


def connect_signals() -> None:
    """Any change to a key, a user or a user's groups made through the ORM empties the cache
    of checked keys (a change by `QuerySet.update` calls apikey_cache_forget itself)."""
    from django.db.models.signals import m2m_changed, post_delete, post_save

    def forget(sender, **kwargs):
        apikey_cache_forget()

    user_model = get_user_model()
    for model in (ApiKey, user_model):
        post_save.connect(forget, sender=model, weak=False, dispatch_uid=f"memoryadmin.apikey_cache.save.{model._meta.label}")
        post_delete.connect(forget, sender=model, weak=False, dispatch_uid=f"memoryadmin.apikey_cache.delete.{model._meta.label}")
    m2m_changed.connect(forget, sender=user_model.groups.through, weak=False, dispatch_uid="memoryadmin.apikey_cache.groups")
