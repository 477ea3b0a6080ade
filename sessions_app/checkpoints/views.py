"""Dashboard pages for checkpoints: a thread's timeline, one checkpoint, fork (time travel), release.

Included under `threads/<thread_id>/checkpoints/` by `sessions_app.urls`; the
routes are kept here, next to the views, so that the include is one line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRedirect

from memoryadmin import policy
from memoryadmin.errors import InvalidInput

from sessions_app.checkpoints import selectors as cs
from sessions_app.checkpoints.branches import checkpoint_branches_in
from sessions_app.threads.selectors import thread_get_for_read
from sessions_app.checkpoints import lifecycle, state_update
from sessions_app.checkpoints.langgraph import is_langgraph_checkpoint
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


def _fork_flags(user, thread, detail) -> dict:
    """Whether the page offers "Fork from here" (the owner and admins, on a LangGraph checkpoint)."""
    may_fork = policy.may_write(user, owner_id=thread.owner_id, action="checkpoint.fork")
    return {"can_fork": may_fork, "forkable": bool(detail) and is_langgraph_checkpoint(detail.checkpoint.checkpoint)}



@dataclass(frozen=True)
class ForkForm:
    """What the fork form shows: empty, or a refused submission with its errors. (Not a dict: a
    template's `fork.values` on a dict without the key is the dict's `values` method, shown.)"""

    values: str = ""
    as_node: str = ""
    open: bool = False
    value_errors: list[str] = field(default_factory=list)
    other_errors: list[str] = field(default_factory=list)

def _page(
    request: HttpRequest, thread_id: str, *, selected: str | None, selected_ns: str, fork: ForkForm | None = None, status: int = 200
) -> HttpResponse:
    """The timeline page; `fork` holds a refused fork's form (values, as_node, errors) to show again."""
    checkpoint_ns = _namespace(request)
    compare = request.GET.getlist("compare")
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
        "fork": fork or ForkForm(),
        **_fork_flags(request.user, timeline.thread, detail),
        **comparison,
    }
    return render(request, TEMPLATE, context, status=status)


@require_GET
@login_required
def checkpoint_timeline(request: HttpRequest, thread_id: str) -> HttpResponse:
    """The timeline, newest first; the selected checkpoint (else the newest) shown beside it."""
    selected = request.GET.get("checkpoint") or None
    selected_ns = cs.checkpoint_ns_validate(request.GET.get("cns", ""), "cns")
    if request.htmx and request.htmx.target == "checkpoint-detail" and selected:
        thread = thread_get_for_read(actor=request.user, thread_id=thread_id)
        detail = tl.checkpoint_detail_in(thread=thread, checkpoint_id=selected, checkpoint_ns=selected_ns)
        context = {"thread": thread, "detail": detail, "fork": ForkForm(), **_fork_flags(request.user, thread, detail)}
        return render(request, f"{TEMPLATE}#checkpoint-detail", context)
    compare = request.GET.getlist("compare")
    if request.htmx and request.htmx.target == "checkpoint-detail" and len(compare) == 2:
        thread = thread_get_for_read(actor=request.user, thread_id=thread_id)
        return render(request, f"{TEMPLATE}#checkpoint-detail", {"thread": thread, **_comparison(thread, compare, selected_ns)})
    return _page(request, thread_id, selected=selected, selected_ns=selected_ns)


@require_POST
@login_required
def checkpoint_fork(request: HttpRequest, thread_id: str) -> HttpResponse:
    """"Fork from here": the owner's or an admin's new checkpoint after the chosen one (update_state's service).

    Refused input is the page again with the form as sent and the error under its
    field (400); a refusal of the person is the 403 page.
    """
    checkpoint_id = request.POST.get("checkpoint", "")
    checkpoint_ns = cs.checkpoint_ns_validate(request.POST.get("cns", ""), "cns")
    values, as_node = request.POST.get("values", ""), request.POST.get("as_node", "")
    try:
        result = state_update.checkpoint_fork(
            actor=request.user,
            thread_id=thread_id,
            checkpoint_id=checkpoint_id,
            checkpoint_ns=checkpoint_ns,
            values=values,
            as_node=as_node,
            request=request,
        )
    except InvalidInput as exc:
        fields = exc.fields or {"values": [exc.message]}
        fork = ForkForm(
            values=values,
            as_node=as_node,
            open=True,
            # Errors about the values (the object, or one of its keys) go under the editor.
            value_errors=[f"{name}: {msg}" for name, msgs in fields.items() if name.startswith("values") for msg in msgs],
            other_errors=[f"{name}: {msg}" for name, msgs in fields.items() if not name.startswith("values") for msg in msgs],
        )
        selected = checkpoint_id if cs.CHECKPOINT_ID_RE.fullmatch(checkpoint_id or "") else None
        return _page(request, thread_id, selected=selected, selected_ns=checkpoint_ns, fork=fork, status=400)
    new_id = result["checkpoint"]["checkpoint_id"]
    messages.success(request, f"Forked: new checkpoint {new_id} after {checkpoint_id}.")
    url = reverse("thread-checkpoints", args=[thread_id]) + "?" + urlencode({"checkpoint": new_id, "cns": checkpoint_ns})
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


@require_POST
@login_required
def checkpoint_release(request: HttpRequest, thread_id: str) -> HttpResponse:
    """Admin: the API's release, from the dashboard (same service, same audit record)."""
    result = lifecycle.checkpoint_release(actor=request.user, thread_id=thread_id, request=request)
    messages.success(request, f"Released {len(result['checkpoints'])} checkpoints of {thread_id}.")
    url = reverse("thread-checkpoints", args=[thread_id])
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


@require_GET
@login_required
def checkpoint_branches(request: HttpRequest, thread_id: str) -> HttpResponse:
    """The thread page's line on its checkpoints: how many, how many branches, the newest forks."""
    thread = thread_get_for_read(actor=request.user, thread_id=thread_id)
    return render(request, "checkpoints/_branches.html", {"thread": thread, "branches": checkpoint_branches_in(thread=thread)})
