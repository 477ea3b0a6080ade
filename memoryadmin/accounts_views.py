"""Admin pages for users, roles and API keys. Thin: memoryadmin/accounts.py decides and records."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from . import accounts, roles
from .errors import DomainError


@require_GET
@login_required
def key_list(request: HttpRequest) -> HttpResponse:
    keys = accounts.account_keys(actor=request.user)[:500]
    return render(request, "memoryadmin/keys.html", {"keys": keys, "roles": roles.ROLES})


@require_POST
@login_required
def key_create(request: HttpRequest) -> HttpResponse:
    """A new key, shown on this answer only (it is stored hashed)."""
    form = request.POST
    try:
        issued = accounts.account_key_issue(
            actor=request.user,
            username=form.get("username", "").strip(),
            name=form.get("name", "").strip(),
            create_user=form.get("create_user") == "1",
            role=form.get("role") or None,
        )
    except DomainError as exc:
        if exc.status == 403:
            raise
        keys = accounts.account_keys(actor=request.user)[:500]
        context = {"keys": keys, "roles": roles.ROLES, "error": exc.message, "form": form}
        return render(request, "memoryadmin/keys.html", context, status=exc.status)
    keys = accounts.account_keys(actor=request.user)[:500]
    return render(request, "memoryadmin/keys.html", {"keys": keys, "roles": roles.ROLES, "issued": issued})


@require_POST
@login_required
def key_revoke(request: HttpRequest) -> HttpResponse:
    key = accounts.account_key_revoke(actor=request.user, prefix=request.POST.get("prefix", ""))
    messages.success(request, f"Key {key.prefix} of {key.owner.get_username()} revoked.")
    return redirect("key-list")


@require_GET
@login_required
def user_list(request: HttpRequest) -> HttpResponse:
    return render(request, "memoryadmin/users.html", {"rows": accounts.account_users(actor=request.user), "roles": roles.ROLES})


@require_POST
@login_required
def user_create(request: HttpRequest) -> HttpResponse:
    form = request.POST
    try:
        user = accounts.account_user_create(
            actor=request.user, username=form.get("username", "").strip(), role=form.get("role", ""), password=form.get("password") or None
        )
    except DomainError as exc:
        if exc.status == 403:
            raise
        context = {"rows": accounts.account_users(actor=request.user), "roles": roles.ROLES, "error": exc.message, "fields": exc.fields, "form": form}
        return render(request, "memoryadmin/users.html", context, status=exc.status)
    messages.success(request, f"User {user.get_username()} created as {roles.role_of(user)}.")
    return redirect("user-list")


@require_POST
@login_required
def user_role(request: HttpRequest) -> HttpResponse:
    try:
        user = accounts.account_role_set(actor=request.user, username=request.POST.get("username", ""), role=request.POST.get("role", ""))
    except DomainError as exc:
        if exc.status == 403:
            raise
        messages.error(request, exc.message)
        return redirect("user-list")
    messages.success(request, f"{user.get_username()} is now {roles.role_of(user)}.")
    return redirect("user-list")
