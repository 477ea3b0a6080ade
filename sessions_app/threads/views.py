"""Dashboard pages for threads. One function view per page; htmx gets the named partial."""

from __future__ import annotations

import json
from itertools import groupby

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.http import urlencode
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect

from memoryadmin import roles
from memoryadmin.errors import Forbidden, InvalidInput

from . import bulk, dashboard, erase, export, retention, search, selectors, services

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
    template = "sessions_app/thread_list.html"
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
            json.dumps(thread.extra_state, indent=2, ensure_ascii=False, sort_keys=True)
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
    template = "sessions_app/thread_detail.html"
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


@require_GET
@login_required
def home(request: HttpRequest) -> HttpResponse:
    """The dashboard: the viewer's counts, recent threads, two weeks of activity, recent audit events."""
    return render(request, "sessions_app/home.html", {"dash": dashboard.dashboard_for(actor=request.user)})


@require_GET
@login_required
def message_search(request: HttpRequest) -> HttpResponse:
    query = search.MessageQuery.from_params(request.GET)
    page = search.message_search(
        actor=request.user, query=query, before=search.parse_before(request.GET.get("before")), request=request
    )
    params = query.as_params()
    context = {
        "query": query,
        "page": page,
        "roles": search.ROLES,
        "agent_codes": selectors.thread_agent_codes(actor=request.user),
        "older_url": f"?{urlencode({**params, 'before': page.older})}" if page.older else "",
        "backend": search.search_backend(),
    }
    template = "sessions_app/search.html"
    if request.htmx and request.htmx.target == "search-results":
        template += "#search-results"
    return render(request, template, context)


@require_GET
@login_required
def thread_export(request: HttpRequest, thread_id: str) -> StreamingHttpResponse:
    thread, chunks = export.thread_export(actor=request.user, thread_id=thread_id, request=request)
    response = StreamingHttpResponse(chunks, content_type="application/zip")
    response["Content-Disposition"] = f'attachment; filename="{export.bundle_filename(thread.thread_id)}"'
    return response


def _selection_fields(selection: bulk.Selection) -> list[tuple[str, str]]:
    """The selection as hidden form fields, so a confirmation posts exactly what was previewed."""
    if selection.ids:
        return [("ids", thread_id) for thread_id in selection.ids]
    return [("all", "1"), *selection.filter.items()]


@require_POST
@login_required
def bulk_preview(request: HttpRequest) -> HttpResponse:
    """The impact of a bulk action on the selection, with the button that confirms it. Writes nothing."""
    action = request.POST.get("action", "")
    selection = bulk.Selection.from_data(request.POST)
    impact = bulk.bulk_preview(actor=request.user, action=action, selection=selection)
    context = {
        "action": action,
        "selection": selection,
        "fields": _selection_fields(selection),
        "impact": impact,
        "sample": list(bulk.selection_threads(actor=request.user, selection=selection).select_related("owner")[:10]),
    }
    return render(request, "sessions_app/bulk_preview.html", context)


@require_POST
@login_required
def bulk_start(request: HttpRequest) -> HttpResponse:
    job = bulk.bulk_start(
        actor=request.user, action=request.POST.get("action"), selection=bulk.Selection.from_data(request.POST), request=request
    )
    url = reverse("bulk-job", args=[job.pk])
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


@require_GET
@login_required
def bulk_job(request: HttpRequest, job_id: int) -> HttpResponse:
    job = bulk.bulk_job_get(actor=request.user, job_id=job_id)
    template = "sessions_app/bulk_job.html"
    if request.htmx:
        template += "#job-progress"
    return render(request, template, {"job": job})


@require_POST
@login_required
def bulk_step(request: HttpRequest, job_id: int) -> HttpResponse:
    """Process the next batch and answer the progress fragment (which asks for the next step)."""
    job = bulk.bulk_step(actor=request.user, job_id=job_id, request=request)
    if request.htmx:
        return render(request, "sessions_app/bulk_job.html#job-progress", {"job": job})
    return redirect(reverse("bulk-job", args=[job.pk]))


@require_POST
@login_required
def bulk_export(request: HttpRequest) -> StreamingHttpResponse:
    selection = bulk.Selection.from_data(request.POST)
    bulk.bulk_preview(actor=request.user, action="export", selection=selection)
    threads = bulk.selection_threads(actor=request.user, selection=selection)
    chunks = export.threads_export(actor=request.user, threads=threads, selection=selection.as_dict(), request=request)
    response = StreamingHttpResponse(chunks, content_type="application/zip")
    response["Content-Disposition"] = f'attachment; filename="threads-{timezone.now():%Y%m%d-%H%M%S}.zip"'
    return response


def _retention_context(request: HttpRequest, **extra) -> dict:
    return {
        "policies": retention.retention_policies(actor=request.user),
        "runs": retention.retention_runs(actor=request.user, limit=20),
        "can_edit": roles.is_admin(request.user),
        "edit": None,
        "errors": {},
        **extra,
    }


@require_GET
@login_required
def retention_page(request: HttpRequest) -> HttpResponse:
    """Policies and the history of runs (operators read; admins edit, preview and apply)."""
    extra = {}
    if request.GET.get("dry_run") == "1":
        extra["report"] = retention.retention_preview(actor=request.user)
    edit = request.GET.get("edit")
    context = _retention_context(request, **extra)
    if edit is not None:
        context["edit"] = next((p for p in context["policies"] if p.agent_code == edit), None) or {"agent_code": edit}
    return render(request, "sessions_app/retention.html", context)


@require_POST
@login_required
def retention_policy_save(request: HttpRequest) -> HttpResponse:
    data = request.POST
    try:
        policy = retention.retention_policy_save(
            actor=request.user,
            agent_code=data.get("agent_code", ""),
            keep_checkpoints=data.get("keep_checkpoints"),
            release_idle_days=data.get("release_idle_days"),
            purge_archived_days=data.get("purge_archived_days"),
            store_ttl_days=data.get("store_ttl_days"),
            request=request,
        )
    except InvalidInput as exc:
        context = _retention_context(request, edit={key: data.get(key, "") for key in ("agent_code", *retention.RULES)}, errors=exc.fields)
        return render(request, "sessions_app/retention.html", context, status=400)
    messages.success(request, f"Policy {policy} saved.")
    return redirect("retention")


@require_POST
@login_required
def retention_policy_delete(request: HttpRequest) -> HttpResponse:
    retention.retention_policy_delete(actor=request.user, agent_code=request.POST.get("agent_code", ""), request=request)
    messages.success(request, "Policy deleted.")
    return redirect("retention")


@require_POST
@login_required
def retention_apply(request: HttpRequest) -> HttpResponse:
    run = retention.retention_apply(actor=request.user, via="web", max_seconds=WEB_RETENTION_SECONDS, request=request)
    if run.status == "partial":
        messages.warning(request, f"Run {run.pk} stopped after {WEB_RETENTION_SECONDS} seconds; apply again to continue (or use manage.py retention apply).")
    else:
        messages.success(request, f"Run {run.pk} done: {run.counts.get('checkpoints', 0)} checkpoints, {run.counts.get('blocks', 0)} blocks, {run.counts.get('items', 0)} store items removed.")
    return redirect("retention")


@require_http_methods(["GET", "POST"])
@login_required
def user_erase(request: HttpRequest) -> HttpResponse:
    """Admin: preview a user's data, then erase it after the username is typed again."""
    if not roles.is_admin(request.user):
        raise Forbidden("Only an admin may erase a user's data.", target="erase", action="user.erase")
    username = (request.POST.get("username") or request.GET.get("username") or "").strip()
    context: dict = {"username": username}
    if request.method == "POST":
        if request.POST.get("confirm", "").strip() != username:
            context["preview"] = erase.user_erase_preview(actor=request.user, username=username)
            context["error"] = "Type the username again to confirm."
            return render(request, "sessions_app/erase.html", context, status=400)
        context["receipt"] = erase.user_erase(
            actor=request.user, username=username, revoke_access=request.POST.get("revoke_access") == "1", request=request
        )
        context["receipt_json"] = json.dumps(context["receipt"], indent=2)
        return render(request, "sessions_app/erase.html", context)
    if username:
        context["preview"] = erase.user_erase_preview(actor=request.user, username=username)
    return render(request, "sessions_app/erase.html", context)
