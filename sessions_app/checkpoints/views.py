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


def _comparison(thread, compare: list[str], checkpoint_ns: str) -> dict:
    """Two ticked checkpoints give their diff; any other number, a note to tick two."""
    if len(compare) != 2:
        return {"compare_error": f"Tick exactly two checkpoints to compare ({len(compare)} ticked)."}
    for value in compare:
        cs.checkpoint_id_validate(value, "compare")
    first, second = ((value, checkpoint_ns) for value in compare)
    return {"comparison": tl.checkpoint_compare_in(thread=thread, first=first, second=second)}


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
    compare = request.GET.getlist("compare")
    if request.htmx and request.htmx.target == "checkpoint-detail" and len(compare) == 2:
        thread = thread_get_for_read(actor=request.user, thread_id=thread_id)
        return render(request, f"{TEMPLATE}#checkpoint-detail", {"thread": thread, **_comparison(thread, compare, selected_ns)})
    timeline = tl.checkpoint_timeline(
        actor=request.user,
        thread_id=thread_id,
        checkpoint_ns=checkpoint_ns,
        before=request.GET.get("before") or None,
    )
    detail = None
    comparison = _comparison(timeline.thread, compare, selected_ns) if compare else {}
    if comparison.get("comparison"):
        pass  # the comparison takes the detail pane
    elif selected:
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
        "compare": compare,
        **comparison,
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


