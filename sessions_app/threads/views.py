"""Dashboard pages for threads. One function view per page; htmx gets the named partial."""

from __future__ import annotations

from datetime import datetime, time
from itertools import groupby

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRedirect

from memoryadmin import params, policy
from memoryadmin.json import pretty

from sessions_app.threads import selectors, services

BLOCK_PAGE_SIZE = 200
TABS = ("active", "archived", "state")


ORDERS = ("newest", "oldest")
def _jump_target(request: HttpRequest, thread, archived: str) -> tuple[int | None, str]:
    """Where "Jump to" lands: `#9000` / `9000` is a seq, anything else a date or time; and an error to show."""
    text = request.GET.get("jump", "").strip()
    if not text:
        return None, ""
    digits = text.lstrip("#")
    if digits.isdigit():
        return min(int(digits), params.CURSOR_MAX), ""
    try:
        moment = parse_datetime(text)
        if moment is None and (day := parse_date(text)) is not None:
            moment = datetime.combine(day, time.min)
    except ValueError:  # well formed but impossible, as 2026-13-01
        moment = None
    if moment is None:
        return None, f"{text!r} is neither a seq (#9000) nor a date or time (2026-12-01 10:00)."
    if timezone.is_naive(moment):
        moment = timezone.make_aware(moment)
    return selectors.thread_seq_at(thread=thread, archived=archived, at=moment), ""


@require_GET
@login_required
def thread_detail(request: HttpRequest, thread_id: str) -> HttpResponse:
    """A thread's page. Long threads are read in windows of blocks by seq, newest first by
    default; `around`/`jump` open the window around one block, `before`/`after` page it."""
    thread = selectors.thread_get_for_read(actor=request.user, thread_id=thread_id)
    tab = params.parse_choice(request.GET.get("tab") or None, "tab", TABS, "active")
    order = params.parse_choice(request.GET.get("order") or None, "order", ORDERS, "newest")
    context = {
        "thread": thread,
        "tab": tab,
        "tabs": TABS,
        "order": order,
        "can_delete": policy.may_write(request.user, owner_id=thread.owner_id, action="thread.delete"),
        "can_clear": policy.may_write(request.user, owner_id=thread.owner_id, action="thread.clear"),
    }
    if tab == "state":
        context["extra_state_json"] = (
            pretty(thread.extra_state)
            if thread.extra_state is not None
            else None
        )
    else:
        archived = "true" if tab == "archived" else "false"
        around, jump_error = _jump_target(request, thread, archived)
        if around is None:
            around = params.parse_cursor(request.GET.get("around") or None, name="around")
        before = params.parse_cursor(request.GET.get("before") or None, name="before")
        after = params.parse_cursor(request.GET.get("after") or None, name="after")
        window = selectors.thread_block_window(
            thread=thread, archived=archived, order=order, before=before, after=after, around=around, size=BLOCK_PAGE_SIZE
        )
        context.update(
            window=window,
            blocks=window.blocks,
            around=around,
            jump=request.GET.get("jump", ""),
            jump_error=jump_error,
            # Which continuation a "load more" fragment carries: the one in the direction it was asked for.
            direction="older" if before is not None else "newer" if after is not None else "",
            newest_first=order == "newest",
        )
        if tab == "archived":
            # Archived blocks are grouped by the rewrite (compaction or clear) that archived them.
            context["groups"] = [
                {"rewrite": rewrite, "blocks": list(items)}
                for rewrite, items in groupby(window.blocks, key=lambda block: block.archived_by)
            ]
    template = "threads/thread_detail.html"
    if request.htmx:
        template += "#block-page" if context.get("direction") and tab == "active" else "#tab-panel"
    return render(request, template, context)


@require_POST
@login_required
def thread_clear(request: HttpRequest, thread_id: str) -> HttpResponse:
    result = services.thread_clear(actor=request.user, thread_id=thread_id, request=request)
    messages.success(request, f"Cleared: {result['archived']} blocks archived, extra state dropped.")
    url = reverse("thread-detail", args=[thread_id])
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


@require_POST
@login_required
def thread_delete(request: HttpRequest, thread_id: str) -> HttpResponse:
    services.thread_delete(actor=request.user, thread_id=thread_id, request=request)
    messages.success(request, f"Thread {thread_id} deleted.")
    url = reverse("thread-list")
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)
