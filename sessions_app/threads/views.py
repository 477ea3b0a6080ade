"""Dashboard pages for threads. One function view per page; htmx gets the named partial."""

from __future__ import annotations

from itertools import groupby

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRedirect

from memoryadmin import roles
from memoryadmin.json import pretty

from sessions_app.threads import selectors, services

PAGE_SIZE = 50
BLOCK_PAGE_SIZE = 200
TABS = ("active", "archived", "state")
# An apply from the browser stops between batches after this long; cron finishes big backlogs.
WEB_RETENTION_SECONDS = 20


def _int_param(request: HttpRequest, name: str, default: int = 0) -> int:
    try:
        return max(0, int(request.GET.get(name, default)))
    except (TypeError, ValueError):
        return default


@require_GET
@login_required
def thread_list(request: HttpRequest) -> HttpResponse:
    q = request.GET.get("q", "").strip()[:200]
    agent_code = request.GET.get("agent", "").strip()[:64]
    owner = request.GET.get("owner", "").strip()[:150]
    page = _int_param(request, "page", 1) or 1
    threads = selectors.thread_list(actor=request.user, q=q, agent_code=agent_code, owner=owner)
    # Fetch one row more than shown to know whether a next page exists, without a COUNT.
    offset = (page - 1) * PAGE_SIZE
    rows = list(threads[offset : offset + PAGE_SIZE + 1])
    context = {
        "threads": rows[:PAGE_SIZE],
        "has_next": len(rows) > PAGE_SIZE,
        "page": page,
        "q": q,
        "agent": agent_code,
        "owner": owner,
        "agent_codes": selectors.thread_agent_codes(actor=request.user),
    }
    template = "threads/thread_list.html"
    if request.htmx and request.htmx.target == "thread-table":
        template += "#thread-table"
    return render(request, template, context)


def _blocks_page(thread, *, archived: str, after_seq: int):
    blocks = list(
        selectors.thread_blocks(thread=thread, archived=archived).filter(seq__gt=after_seq)[: BLOCK_PAGE_SIZE + 1]
    )
    more = len(blocks) > BLOCK_PAGE_SIZE
    blocks = blocks[:BLOCK_PAGE_SIZE]
    return blocks, (blocks[-1].seq if more and blocks else None)


@require_GET
@login_required
def thread_detail(request: HttpRequest, thread_id: str) -> HttpResponse:
    thread = selectors.thread_get_for_read(actor=request.user, thread_id=thread_id)
    tab = request.GET.get("tab", "active")
    if tab not in TABS:
        tab = "active"
    after = _int_param(request, "after")
    context = {
        "thread": thread,
        "tab": tab,
        "tabs": TABS,
        "can_delete": selectors.thread_may_delete(actor=request.user, thread=thread),
        "can_clear": roles.is_admin(request.user),
    }
    if tab == "state":
        context["extra_state_json"] = (
            pretty(thread.extra_state)
            if thread.extra_state is not None
            else None
        )
    else:
        blocks, next_after = _blocks_page(thread, archived="true" if tab == "archived" else "false", after_seq=after)
        context.update(blocks=blocks, next_after=next_after)
        if tab == "archived":
            # Archived blocks are grouped by the rewrite (compaction or clear) that archived them.
            context["groups"] = [
                {"rewrite": rewrite, "blocks": list(items)}
                for rewrite, items in groupby(blocks, key=lambda block: block.archived_by)
            ]
    template = "threads/thread_detail.html"
    if request.htmx:
        template += "#block-page" if after else "#tab-panel"
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


# --- operations: home, search, export, bulk actions, retention, erase ------------------------------


