"""API keys: made, checked and revoked here only.

A key looks like `ma_<prefix>_<secret>`; the prefix is stored in clear to find
the row and to show in listings, the secret only as a SHA-256 hash (keys are
random and long, so a slow password hash buys nothing).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from . import roles
from .errors import NotFound
from .models import ApiKey

KEY_PREFIX = "ma_"
# last_used_at is refreshed at most this often, so a busy agent costs no write per call.
LAST_USED_RESOLUTION = timedelta(minutes=1)


@dataclass(frozen=True)
class IssuedKey:
    api_key: ApiKey
    plaintext: str


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


@transaction.atomic
def apikey_create(*, owner, name: str = "") -> IssuedKey:
    prefix = secrets.token_hex(4)
    while ApiKey.objects.filter(prefix=prefix).exists():
        prefix = secrets.token_hex(4)
    secret = secrets.token_urlsafe(32)
    key = ApiKey.objects.create(owner=owner, name=name[:100], prefix=prefix, secret_hash=_hash(secret))
    return IssuedKey(api_key=key, plaintext=f"{KEY_PREFIX}{prefix}_{secret}")


def apikey_authenticate(raw: str) -> ApiKey | None:
    """The active key matching `raw`, or None. Constant-time on the secret."""
    if not raw.startswith(KEY_PREFIX):
        return None
    prefix, sep, secret = raw[len(KEY_PREFIX):].partition("_")
    if not sep or not prefix or not secret or len(prefix) > 16:
        return None
    key = (
        roles.with_owner_role(ApiKey.objects.select_related("owner"))
        .filter(prefix=prefix, revoked_at__isnull=True, owner__is_active=True)
        .first()
    )
    if key is None or not hmac.compare_digest(key.secret_hash, _hash(secret)):
        return None
    roles.remember_owner_role(key)
    now = timezone.now()
    if key.last_used_at is None or now - key.last_used_at > LAST_USED_RESOLUTION:
        ApiKey.objects.filter(pk=key.pk).update(last_used_at=now)
        key.last_used_at = now
    return key


@transaction.atomic
def apikey_revoke(*, prefix: str, owner=None) -> ApiKey:
    qs = ApiKey.objects.filter(prefix=prefix)
    if owner is not None:
        qs = qs.filter(owner=owner)
    key = qs.select_for_update().first()
    if key is None:
        raise NotFound(f"no API key with prefix {prefix!r}")
    if key.revoked_at is None:
        key.revoked_at = timezone.now()
        key.save(update_fields=["revoked_at"])
    return key
