"""Role storage: which role a user has, and setting it.

The roles are member, operator and admin (a Django superuser is an admin), kept
as Django groups. What each role may do is decided in memoryadmin/policy.py,
not here.
"""

from __future__ import annotations

from typing import Literal

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser, Group

Role = Literal["member", "operator", "admin"]
ROLES: tuple[Role, ...] = ("member", "operator", "admin")

_CACHE_ATTR = "_memoryadmin_role"


def _role_from(*, superuser: bool, groups: set[str]) -> Role:
    if superuser or "admin" in groups:
        return "admin"
    return "operator" if "operator" in groups else "member"


def remember_role(user, groups: set[str]) -> None:
    """Give `user` its role from role group names read elsewhere (in the API key lookup),
    so that role_of() needs no query of its own."""
    setattr(user, _CACHE_ATTR, _role_from(superuser=user.is_superuser, groups=groups))


def role_of(user: AbstractBaseUser | AnonymousUser | None) -> Role | None:
    """The user's role, cached on the user object for the request."""
    if user is None or not user.is_authenticated or not user.is_active:
        return None
    cached = getattr(user, _CACHE_ATTR, None)
    if cached is not None:
        return cached
    groups = set() if user.is_superuser else set(user.groups.values_list("name", flat=True))
    role = _role_from(superuser=user.is_superuser, groups=groups)
    setattr(user, _CACHE_ATTR, role)
    return role


def role_set(user, role: Role) -> None:
    """Put the user in exactly one role group."""
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r}; expected one of {', '.join(ROLES)}")
    groups = {name: Group.objects.get_or_create(name=name)[0] for name in ROLES}
    user.groups.remove(*[g for name, g in groups.items() if name != role])
    user.groups.add(groups[role])
    if hasattr(user, _CACHE_ATTR):
        delattr(user, _CACHE_ATTR)


def connect_signals() -> None:
    from django.db.models.signals import post_migrate

    def ensure_groups(sender, **kwargs):
        if sender.name != "memoryadmin":
            return
        for name in ROLES:
            Group.objects.get_or_create(name=name)

    post_migrate.connect(ensure_groups, dispatch_uid="memoryadmin.ensure_role_groups")
