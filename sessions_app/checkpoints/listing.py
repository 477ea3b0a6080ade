"""The dashboard's thread list: triage by status, agent, owner, dates, metadata and text, and saved views.

The filters are the API's thread search (`search.thread_search_queryset`, through
`search.thread_list_queryset`); they live in the query string, so a filtered list is
a link and the back button restores it. A bad filter value is shown next to the form,
which keeps what was typed (docs/operations.md, "The thread list").
"""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from memoryadmin import params
from memoryadmin.errors import InvalidInput

from sessions_app.checkpoints import savedviews, search, selectors
from sessions_app.threads import selectors as thread_selectors

PAGE_SIZE = 50
TEMPLATE = "threads/thread_list.html"
SORT_LABELS = {"updated": "Updated", "created": "Created", "messages": "Messages", "title": "Title"}
STATUS_LABELS = {"idle": "Idle", "busy": "Busy", "interrupted": "Interrupted", "error": "Error"}


def _form(request: HttpRequest) -> dict:
    """What the filter form shows: the request's values as typed (so a bad one can be corrected)."""
    data = request.GET
    form = {name: data.get(name, "")[:200] for name in ("q", "status", "agent", "owner", "sort", "order", *search.DATE_FIELDS)}
    form["meta"] = [pair[:200] for pair in data.getlist("meta") if pair.strip()][: search.META_PAIRS_MAX]
    return form


@require_GET
@login_required
def thread_list(request: HttpRequest) -> HttpResponse:
    """One page of the filtered, sorted list with its total; a page past the end says so and links to the last."""
    context = {
        "form": _form(request),
        "statuses": STATUS_LABELS,
        "sorts": SORT_LABELS,
        "agent_codes": thread_selectors.thread_agent_codes(actor=request.user),
        "saved_views": list(selectors.saved_views(actor=request.user)),
        "threads": [],
        "has_next": False,
        "total": None,
        "error": None,
    }
    try:
        query = search.thread_list_query_parse(request.GET)
        page = params.parse_page(request.GET.get("page"), page_size=PAGE_SIZE)
    except InvalidInput as exc:
        context["error"] = exc
    else:
        context.update(_page(request, query, page))
    template = TEMPLATE
    if request.htmx and request.htmx.target == "thread-table":
        template += "#thread-table"
    # An htmx swap needs a 2xx to happen; a full page with a bad filter says 400, the form kept.
    status = 400 if context["error"] and not request.htmx else 200
    response = render(request, template, context, status=status)
    if request.htmx and not context["error"]:
        # The address bar gets the filter as a shared link would have it: blank fields left out.
        fields = [*context["query"].fields(), *([("page", str(context["page"]))] if context["page"] > 1 else [])]
        response["HX-Push-Url"] = reverse("thread-list") + (f"?{urlencode(fields)}" if fields else "")
    return response


def _page(request: HttpRequest, query: search.ThreadListQuery, page: int) -> dict:
    threads = search.thread_list_queryset(actor=request.user, query=query)
    total = threads.count()
    last_page = max(1, -(-total // PAGE_SIZE))
    offset = (page - 1) * PAGE_SIZE
    rows = list(threads[offset : offset + PAGE_SIZE]) if offset < total else []
    shown = dict(query.fields())
    if query.meta:
        shown["meta"] = list(query.meta)
    thread_selectors.thread_list_audit(actor=request.user, threads=rows, filters={**shown, "page": page})
    return {
        "query": query,
        "sort_headers": _sort_headers(query),
        "querystring": query.querystring(),
        "filter_fields": query.filter_fields(),
        "filtered": not query.filters.is_empty,
        "threads": rows,
        "total": total,
        "page": page,
        "last_page": last_page,
        "past_end": total > 0 and page > last_page,
        "has_next": page < last_page,
    }


def _sort_headers(query: search.ThreadListQuery) -> dict[str, dict[str, str]]:
    """Per sortable column: the link that sorts by it (the filter kept) and its aria-sort state."""
    base = reverse("thread-list")
    headers = {}
    for sort in SORT_LABELS:
        fields = query.sorted_by(sort).fields()
        state = ("ascending" if query.order == "asc" else "descending") if sort == query.sort else "none"
        headers[sort] = {"href": base + (f"?{urlencode(fields)}" if fields else ""), "aria_sort": state}
    return headers


@require_POST
@login_required
def saved_view_save(request: HttpRequest) -> HttpResponse:
    """Save the list's current filter under a name, then show it applied."""
    try:
        view = savedviews.saved_view_save(
            actor=request.user, name=request.POST.get("name"), query=request.POST.get("query", ""), request=request
        )
    except InvalidInput as exc:
        messages.error(request, f"The view was not saved: {exc.message}")
        return redirect(f"{reverse('thread-list')}?{QueryDict(request.POST.get('query', '')[:2000]).urlencode()}")
    messages.success(request, f"Saved the view {view.name!r}.")
    return redirect(f"{reverse('thread-list')}?{view.query}" if view.query else reverse("thread-list"))


@require_POST
@login_required
def saved_view_delete(request: HttpRequest, view_id: int) -> HttpResponse:
    savedviews.saved_view_delete(actor=request.user, view_id=view_id, request=request)
    messages.success(request, "Saved view deleted.")
    return redirect(reverse("thread-list"))
