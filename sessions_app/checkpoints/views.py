"""Dashboard pages for checkpoints: a thread's timeline, one checkpoint, and release.

Included under `threads/<thread_id>/checkpoints/` by `sessions_app.urls`; the
routes are kept here, next to the views, so that the include is one line.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRedirect

from memoryadmin import policy

from sessions_app.checkpoints import selectors as cs
from sessions_app.threads.selectors import thread_get_for_read
from sessions_app.checkpoints import lifecycle
from sessions_app.checkpoints import timeline as tl

ALL_NAMESPACES = "*"
TEMPLATE = "checkpoints/checkpoint_timeline.html"


def _namespace(request: HttpRequest) -> str | None:
    """The `ns` filter: absent or "*" for every namespace, else that one ("" is the root)."""
    value = request.GET.get("ns", ALL_NAMESPACES)
    return None if value == ALL_NAMESPACES else cs.checkpoint_ns_validate(value, "ns")


@require_GET
@login_required
def checkpoint_timeline(request: HttpRequest, thread_id: str) -> HttpResponse:
    """The timeline, newest first; the selected checkpoint (else the newest) shown beside it."""
    selected = request.GET.get("checkpoint") or None
    selected_ns = cs.checkpoint_ns_validate(request.GET.get("cns", ""), "cns")
    if request.htmx and request.htmx.target == "checkpoint-detail" and selected:
        thread = thread_get_for_read(actor=request.user, thread_id=thread_id)
        detail = tl.checkpoint_detail_in(thread=thread, checkpoint_id=selected, checkpoint_ns=selected_ns)
        return render(request, f"{TEMPLATE}#checkpoint-detail", {"thread": thread, "detail": detail})
    checkpoint_ns = _namespace(request)
    timeline = tl.checkpoint_timeline(
        actor=request.user,
        thread_id=thread_id,
        checkpoint_ns=checkpoint_ns,
        before=request.GET.get("before") or None,
    )
    detail = None
    if selected:
        detail = tl.checkpoint_detail_in(thread=timeline.thread, checkpoint_id=selected, checkpoint_ns=selected_ns)
    elif timeline.rows:
        newest = timeline.rows[0].checkpoint
        detail = tl.checkpoint_detail_in(
            thread=timeline.thread, checkpoint_id=newest.checkpoint_id, checkpoint_ns=newest.checkpoint_ns
        )
    context = {
        "thread": timeline.thread,
        "timeline": timeline,
        "detail": detail,
        "ns": ALL_NAMESPACES if checkpoint_ns is None else checkpoint_ns,
        "all_namespaces": ALL_NAMESPACES,
        "can_release": policy.may_write(request.user, owner_id=timeline.thread.owner_id, action="checkpoint.release"),
    }
    return render(request, TEMPLATE, context)


@require_POST
@login_required
def checkpoint_release(request: HttpRequest, thread_id: str) -> HttpResponse:
    """Admin: the API's release, from the dashboard (same service, same audit record)."""
    result = lifecycle.checkpoint_release(actor=request.user, thread_id=thread_id, request=request)
    messages.success(request, f"Released {len(result['checkpoints'])} checkpoints of {thread_id}.")
    url = reverse("thread-checkpoints", args=[thread_id])
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


