"""People and their keys: the admin's use cases, for the dashboard and `manage.py apikey` alike.

Every function takes the acting user (`actor`; None is the command line, which runs with the
server's own authority) and records an audit event. Only admins manage users, roles and keys:
an operator or a member is refused with a 403 (recorded as every refusal is).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Count, Max, Q, QuerySet

from . import policy, roles
from .apikeys import IssuedKey, apikey_create, apikey_revoke
from .audit import audit_record
from .errors import Conflict, InvalidInput, NotFound
from .models import ApiKey

USERNAME_RE = re.compile(r"[\w.@+-]{1,150}")
KEY_NAME_MAX = 100


def _ensure_admin(actor, *, action: str, target: str) -> None:
    """Admins only (memoryadmin.policy); `actor=None` is the command line."""
    policy.ensure_admin(actor, target=target, action=action, system=True, message="Only an admin manages users, roles and API keys.")


def _via(actor) -> str:
    return "cli" if actor is None else "dashboard"


def _role(value) -> roles.Role:
    if value not in roles.ROLES:
        message = f"must be one of {', '.join(roles.ROLES)}."
        raise InvalidInput(f"role {message}", fields={"role": [message]})
    return value


def _username(value) -> str:
    if not isinstance(value, str) or not USERNAME_RE.fullmatch(value):
        message = "must be 1 to 150 letters, digits and @ . + - _"
        raise InvalidInput(f"username {message}", fields={"username": [message]})
    return value


def _user(username: str):
    user = get_user_model().objects.filter(username=username).first()
    if user is None:
        raise NotFound(f"No user {username!r}.")
    return user


@dataclass(frozen=True)
class UserRow:
    user: object
    role: str
    active_keys: int
    last_key_use: object


def account_users(*, actor) -> list[UserRow]:
    """Every user with their role, active key count and the last use of any of their keys (one query)."""
    _ensure_admin(actor, action="user.list", target="users")
    users = (
        get_user_model()
        .objects.prefetch_related("groups")
        .annotate(active_keys=Count("api_keys", filter=Q(api_keys__revoked_at__isnull=True)), last_key_use=Max("api_keys__last_used_at"))
        .order_by("username")
    )
    rows = []
    for user in users:
        roles.remember_role(user, {group.name for group in user.groups.all()})
        rows.append(UserRow(user=user, role=roles.role_of(user), active_keys=user.active_keys, last_key_use=user.last_key_use))
    return rows


@transaction.atomic
def account_user_create(*, actor, username, role, password: str | None = None):
    """A new user in one role. With a password they can sign in to the dashboard; without one
    they are an agent's identity only (keys, no sign-in). The password meets Django's validators."""
    username = _username(username)
    role = _role(role)
    _ensure_admin(actor, action="user.create", target=f"user:{username}")
    User = get_user_model()
    user = User(username=username)
    if password:
        try:
            validate_password(password, user)
        except ValidationError as exc:
            raise InvalidInput("The password is too weak.", fields={"password": list(exc.messages)}) from None
        user.set_password(password)
    else:
        user.set_unusable_password()
    try:
        with transaction.atomic():
            user.save()
    except IntegrityError:
        raise Conflict(f"A user named {username!r} exists already.", fields={"username": ["is taken."]}) from None
    roles.role_set(user, role)
    audit_record(actor=actor, action="user.create", target=f"user:{username}", detail={"role": role, "via": _via(actor)})
    return user


@transaction.atomic
def account_role_set(*, actor, username, role):
    """Put a user in exactly one role. An admin cannot take the admin role from themselves, so
    the dashboard always keeps someone who can give it back."""
    username = _username(username)
    role = _role(role)
    _ensure_admin(actor, action="user.role_set", target=f"user:{username}")
    user = _user(username)
    if actor is not None and user.pk == actor.pk and role != "admin":
        raise Conflict("You cannot take the admin role from yourself; ask another admin.", fields={"role": ["would lock you out."]})
    roles.role_set(user, role)
    audit_record(actor=actor, action="user.role_set", target=f"user:{username}", detail={"role": role, "via": _via(actor)})
    return user


def account_keys(*, actor, username: str | None = None) -> QuerySet[ApiKey]:
    """Keys with their owners, newest first (prefixes only: a secret is never stored)."""
    _ensure_admin(actor, action="apikey.list", target="apikeys")
    keys = ApiKey.objects.select_related("owner").order_by("-created_at")
    return keys.filter(owner__username=username) if username else keys


@transaction.atomic
def account_key_issue(*, actor, username, name: str = "", create_user: bool = False, role=None) -> IssuedKey:
    """A new key for a user, shown once. `create_user` makes the user (without a password) when
    missing; `role` puts them in that role first."""
    username = _username(username)
    if not isinstance(name, str) or len(name) > KEY_NAME_MAX:
        raise InvalidInput(f"name must be at most {KEY_NAME_MAX} characters.", fields={"name": [f"at most {KEY_NAME_MAX} characters."]})
    _ensure_admin(actor, action="apikey.create", target=f"user:{username}")
    user = get_user_model().objects.filter(username=username).first()
    if user is None:
        if not create_user:
            raise NotFound(f"No user {username!r}; create the user first.")
        user = account_user_create(actor=actor, username=username, role=role or "member")
    elif role:
        account_role_set(actor=actor, username=username, role=role)
    elif roles.role_of(user) == "member" and not user.groups.exists():
        roles.role_set(user, "member")
    issued = apikey_create(owner=user, name=name, actor=actor)
    audit_record(
        actor=actor, action="apikey.create", target=f"apikey:{issued.api_key.prefix}",
        detail={"owner": username, "name": name, "via": _via(actor)},
    )
    return issued


@transaction.atomic
def account_key_revoke(*, actor, prefix) -> ApiKey:
    """Revoke a key by its prefix; revoking a revoked key changes nothing and says so."""
    if not isinstance(prefix, str) or not re.fullmatch(r"[0-9a-f]{1,16}", prefix):
        raise InvalidInput("prefix must be a key prefix (hex digits).", fields={"prefix": ["must be hex digits."]})
    _ensure_admin(actor, action="apikey.revoke", target=f"apikey:{prefix}")
    was_active = ApiKey.objects.filter(prefix=prefix, revoked_at__isnull=True).exists()
    key = apikey_revoke(prefix=prefix, actor=actor)
    if was_active:
        audit_record(actor=actor, action="apikey.revoke", target=f"apikey:{key.prefix}", detail={"owner": key.owner.get_username(), "via": _via(actor)})
    return key
