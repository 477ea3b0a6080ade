"""Operations pages: the home dashboard, message search, export, bulk actions, retention, erase."""

from __future__ import annotations

from types import SimpleNamespace

import json

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import FileResponse, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.http import urlencode
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect

from memoryadmin import params, policy
from memoryadmin.errors import InvalidInput

from memoryadmin.operations import bulk, dashboard, erase, export, retention, retention_draft, search
from memoryadmin.operations.models import EraseJob, ExportJob
from sessions_app.threads import selectors


@require_GET
@login_required
def home(request: HttpRequest) -> HttpResponse:
    """The dashboard: the viewer's counts, recent threads, two weeks of activity, recent audit events."""
    return render(request, "operations/home.html", {"dash": dashboard.dashboard_for(actor=request.user)})

@require_GET
@login_required
def message_search(request: HttpRequest) -> HttpResponse:
    """The search page. A parameter the search refuses keeps the page and its form, with the
    error beside it (a 400), instead of an error page that loses what was typed."""
    context = {
        "roles": search.ROLES,
        "agent_codes": selectors.thread_agent_codes(actor=request.user),
        "backend": search.search_backend(),
    }
    status = 200
    try:
        query = search.MessageQuery.from_params(request.GET)
        before = params.parse_cursor(request.GET.get("before"), name="before")
    except InvalidInput as exc:
        status = 400
        field = next(iter(exc.fields), "")
        echo = {name: request.GET.get(name, "")[:200] for name in ("q", "owner", "agent", "role", "archived")}
        context.update(query=SimpleNamespace(**echo, since=None, until=None), page=None, error=exc.message, error_field=field)
    else:
        page = search.message_search(actor=request.user, query=query, before=before, request=request)
        context.update(
            query=query,
            page=page,
            older_url=f"?{urlencode({**query.as_params(), 'before': page.older})}" if page.older else "",
        )
    template = "operations/search.html"
    if request.htmx and request.htmx.target == "search-results":
        template += "#search-results"
    return render(request, template, context, status=status)

@require_GET
@login_required
def thread_export(request: HttpRequest, thread_id: str) -> StreamingHttpResponse:
    thread, chunks = export.thread_export(actor=request.user, thread_id=thread_id, request=request)
    response = StreamingHttpResponse(chunks, content_type="application/zip")
    response["Content-Disposition"] = f'attachment; filename="{export.bundle_filename(thread.thread_id)}"'
    return response

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
        "fields": bulk.selection_fields(selection),
        "impact": impact,
        "sample": list(bulk.selection_threads(actor=request.user, selection=selection).select_related("owner")[:10]),
    }
    return render(request, "operations/bulk_preview.html", context)

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
    """A job's progress, read from its row (the queue's worker runs it); htmx refreshes the fragment."""
    job = bulk.bulk_job_get(actor=request.user, job_id=job_id)
    template = "operations/bulk_job.html"
    if request.htmx:
        template += "#job-progress"
    return render(request, template, {"job": job})

@require_POST
@login_required
def bulk_export(request: HttpRequest) -> HttpResponse:
    """The zip, streamed; or, for a large selection, the page of the export job that writes it."""
    selection = bulk.Selection.from_data(request.POST)
    bulk.bulk_preview(actor=request.user, action="export", selection=selection)
    outcome = export.bulk_export_start(actor=request.user, selection=selection, request=request)
    if isinstance(outcome, ExportJob):
        url = reverse("export-job", args=[outcome.pk])
        return HttpResponseClientRedirect(url) if request.htmx else redirect(url)
    response = StreamingHttpResponse(outcome, content_type="application/zip")
    response["Content-Disposition"] = f'attachment; filename="threads-{timezone.now():%Y%m%d-%H%M%S}.zip"'
    return response

@require_GET
@login_required
def export_job(request: HttpRequest, job_id: int) -> HttpResponse:
    """A queued export's status, read from its row; the download link when it is written."""
    job = export.export_job_get(actor=request.user, job_id=job_id)
    template = "operations/export_job.html"
    if request.htmx:
        template += "#export-progress"
    return render(request, template, {"job": job})

@require_GET
@login_required
def export_job_download(request: HttpRequest, job_id: int) -> FileResponse:
    job = export.export_job_get(actor=request.user, job_id=job_id)
    if job.status != ExportJob.Status.DONE:
        raise InvalidInput("This export is not written yet.", fields={"job": ["not done."]})
    return FileResponse(
        export.export_job_path(job).open("rb"), as_attachment=True, filename=f"threads-{job.created_at:%Y%m%d-%H%M%S}.zip"
    )

def _retention_context(request: HttpRequest, **extra) -> dict:
    return {
        "policies": retention.retention_policies(actor=request.user),
        "runs": retention.retention_runs(actor=request.user, limit=20),
        "can_edit": policy.may_administer(request.user, "retention.policy_save"),
        "edit": None,
        "errors": {},
        **extra,
    }

@require_GET
@login_required
def retention_page(request: HttpRequest) -> HttpResponse:
    """Policies and the history of runs (operators read; admins edit, preview and apply)."""
    extra = {}
    if params.parse_bool(request.GET.get("dry_run"), name="dry_run", default=False):
        extra["report"] = retention.retention_preview(actor=request.user)
    edit = request.GET.get("edit")
    context = _retention_context(request, **extra)
    if edit is not None:
        context["edit"] = next((p for p in context["policies"] if p.agent_code == edit), None) or {"agent_code": edit}
    return render(request, "operations/retention.html", context)

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
        return render(request, "operations/retention.html", context, status=400)
    messages.success(request, f"Policy {policy} saved.")
    return redirect("retention")

@require_POST
@login_required
def retention_dry_run(request: HttpRequest) -> HttpResponse:
    """The form's values tried without saving: counts and the first threads touched (the retention service's dry run)."""
    data = request.POST
    values = {key: data.get(key, "") for key in ("agent_code", *retention.RULES)}
    try:
        draft = retention_draft.retention_preview_draft(actor=request.user, **values)
    except InvalidInput as exc:
        context = _retention_context(request, edit=values, errors=exc.fields)
        return render(request, "operations/retention.html", context, status=400)
    return render(request, "operations/retention.html", _retention_context(request, edit=values, draft=draft))

@require_POST
@login_required
def retention_policy_delete(request: HttpRequest) -> HttpResponse:
    retention.retention_policy_delete(actor=request.user, agent_code=request.POST.get("agent_code", ""), request=request)
    messages.success(request, "Policy deleted.")
    return redirect("retention")

@require_POST
@login_required
def retention_apply(request: HttpRequest) -> HttpResponse:
    """Queue an apply at this instant; the history shows it from queued to done."""
    run = retention.retention_enqueue(actor=request.user, request=request)
    run.refresh_from_db()
    if run.status == "queued":
        messages.success(request, f"Run {run.pk} is queued: a worker applies the policies as of now.")
    else:
        messages.success(request, f"Run {run.pk} {run.status}: {run.counts.get('checkpoints', 0)} checkpoints, {run.counts.get('blocks', 0)} blocks, {run.counts.get('items', 0)} store items removed.")
    return redirect("retention")

@require_http_methods(["GET", "POST"])
@login_required
def user_erase(request: HttpRequest) -> HttpResponse:
    """Admin: preview a user's data, then erase it after the username is typed again."""
    policy.ensure_admin(request.user, target="erase", action="user.erase", message="Only an admin may erase a user's data.")
    username = (request.POST.get("username") or request.GET.get("username") or "").strip()
    context: dict = {"username": username}
    if request.method == "POST":
        if request.POST.get("confirm", "").strip() != username:
            context["preview"] = erase.user_erase_preview(actor=request.user, username=username)
            context["error"] = "Type the username again to confirm."
            return render(request, "operations/erase.html", context, status=400)
        outcome = erase.user_erase_start(
            actor=request.user,
            username=username,
            revoke_access=params.parse_bool(request.POST.get("revoke_access"), name="revoke_access", default=False),
            request=request,
        )
        if isinstance(outcome, EraseJob):
            return redirect(reverse("user-erase-job", args=[outcome.pk]))
        context["receipt"] = outcome
        context["receipt_json"] = json.dumps(context["receipt"], indent=2)
        return render(request, "operations/erase.html", context)
    if username:
        context["preview"] = erase.user_erase_preview(actor=request.user, username=username)
    return render(request, "operations/erase.html", context)


@require_GET
@login_required
def user_erase_job(request: HttpRequest, job_id: int) -> HttpResponse:
    """A queued erase: its status read from its row, then its receipt; htmx refreshes the fragment."""
    job = erase.user_erase_job_get(actor=request.user, job_id=job_id)
    template = "operations/erase_job.html"
    if request.htmx:
        template += "#erase-progress"
    return render(request, template, {"job": job, "receipt_json": json.dumps(job.receipt, indent=2)})
