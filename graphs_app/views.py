"""Dashboard pages for graphs. One function view per page; htmx gets the named partial.

Mermaid draws the diagrams in the browser and sets inline styles on the SVG it makes
(and a <style> element inside it), which the site-wide policy ``style-src 'self'``
blocks. The pages that draw a diagram relax that one directive with
``'unsafe-inline'``; scripts stay ``'self'`` only
(docs/graphs.md, "Mermaid and the content security policy").
"""

from __future__ import annotations

from typing import Any

from csp.decorators import csp_update
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect

from memoryadmin import params
from memoryadmin.errors import Conflict, InvalidInput
from sessions_app.threads.selectors import thread_get_for_read

from . import selectors, services
from .compiler import SpecError, from_langgraph_json
from .diagrams import preview_build
from .forms import GraphForm, LangGraphForm, RenameForm, SpecForm, form_add_domain_error
from .specs import spec_compile, spec_limits, spec_parse_text, spec_pretty

PAGE_SIZE = 50
# Mermaid lays out in the browser; past this the preview shows the tables only.
DIAGRAM_MAX_NODES = 250
DIAGRAM_MAX_TEXT = 50_000  # Mermaid's own default maxTextSize

MERMAID_CSP = {"style-src": ["'unsafe-inline'"]}

STARTER_SPEC: dict[str, Any] = {
    "nodes": [{"id": "plan"}, {"id": "search"}, {"id": "read"}, {"id": "write"}],
    "edges": [
        {"source": "__start__", "target": "plan"},
        {"source": "plan", "target": "search"},
        {"source": "plan", "target": "read"},
        {"source": "search", "target": "write"},
        {"source": "read", "target": "write"},
        {"source": "write", "condition": "done", "targets": {"yes": "__end__", "no": "plan"}},
    ],
    "interrupt_before": ["write"],
}


def _preview_context(text: str) -> dict[str, Any]:
    """The preview of what is in the textarea: the compile result, or why it is not a graph."""
    try:
        result = spec_compile(spec_parse_text(text))
    except InvalidInput as exc:
        return {"problem": exc.message}
    preview = preview_build(result)
    drawable = preview.node_count <= DIAGRAM_MAX_NODES and max(
        len(preview.mermaid_source), len(preview.mermaid_compiled)
    ) <= DIAGRAM_MAX_TEXT
    return {"preview": preview, "drawable": drawable, "diagram_max_nodes": DIAGRAM_MAX_NODES}


# ------------------------------------------------------------------------------ list


@require_GET
@login_required
def graph_list(request: HttpRequest) -> HttpResponse:
    q = request.GET.get("q", "").strip()[:100]
    owner = request.GET.get("owner", "").strip()[:150]
    page = params.parse_page(request.GET.get("page"), page_size=PAGE_SIZE)
    graphs = selectors.graph_list(actor=request.user, q=q, owner=owner)
    # One row more than shown tells whether a next page exists, without a COUNT.
    offset = (page - 1) * PAGE_SIZE
    rows = list(graphs[offset : offset + PAGE_SIZE + 1])
    context = {
        "graphs": rows[:PAGE_SIZE],
        "has_next": len(rows) > PAGE_SIZE,
        "page": page,
        "q": q,
        "owner": owner,
        "can_create": selectors.graph_may_create(actor=request.user),
    }
    template = "graphs_app/graph_list.html"
    if request.htmx and request.htmx.target == "graph-table":
        template += "#graph-table"
    return render(request, template, context)


# ---------------------------------------------------------------------------- editor


def _editor(
    request: HttpRequest, *, graph=None, form=None, spec_text: str, status: int = 200, converted: bool = False,
    convert_error: str | None = None,
) -> HttpResponse:
    may_create = selectors.graph_may_create(actor=request.user)
    if graph is None:
        editable, can_save = True, may_create  # operators may try graphs out, not save them
        can_edit = can_delete = False
    else:
        can_edit = selectors.graph_may_edit(actor=request.user, graph=graph)
        can_delete = selectors.graph_may_delete(actor=request.user, graph=graph)
        editable = can_save = can_edit
    context = {
        "graph": graph,
        "form": form,
        "spec_text": spec_text,
        "editable": editable,
        "can_save": can_save,
        "can_edit": can_edit,
        "can_delete": can_delete,
        "converted": converted,
        "convert_error": convert_error,
        "rename_form": RenameForm(initial={"name": graph.name}) if graph is not None else None,
        **_preview_context(spec_text),
    }
    return render(request, "graphs_app/graph_editor.html", context, status=status)


@csp_update(MERMAID_CSP)
@require_http_methods(["GET", "POST"])
@login_required
def graph_new(request: HttpRequest) -> HttpResponse:
    """An empty editor; POST saves (or, with action=preview, only checks, for pages without JavaScript)."""
    if request.method == "GET":
        return _editor(request, form=GraphForm(), spec_text=spec_pretty(STARTER_SPEC))
    form = GraphForm(request.POST)
    spec_text = request.POST.get("spec", "")
    if request.POST.get("action") == "preview":
        form.is_valid()
        return _editor(request, form=form, spec_text=spec_text)
    selectors.graph_ensure_may_create(actor=request.user)  # an operator's save is a 403 whatever is posted
    if not form.is_valid():
        return _editor(request, form=form, spec_text=spec_text, status=400)
    try:
        saved = services.graph_create(
            actor=request.user, name=form.cleaned_data["name"], spec=spec_parse_text(form.cleaned_data["spec"])
        )
    except (InvalidInput, Conflict) as exc:
        form_add_domain_error(form, exc)
        return _editor(request, form=form, spec_text=spec_text, status=exc.status)
    messages.success(request, f"Saved {saved.graph.name}" + ("." if saved.result.valid else ", with errors to fix."))
    return redirect("graph-detail", graph_id=saved.graph.pk)


@csp_update(MERMAID_CSP)
@require_http_methods(["GET", "POST"])
@login_required
def graph_detail(request: HttpRequest, graph_id: int) -> HttpResponse:
    """A saved graph in the editor: read-only unless the actor owns it; POST saves a new spec."""
    graph = selectors.graph_get_for_read(actor=request.user, graph_id=graph_id)
    if request.method == "GET":
        return _editor(request, graph=graph, form=SpecForm(), spec_text=spec_pretty(graph.spec))
    form = SpecForm(request.POST)
    spec_text = request.POST.get("spec", "")
    if request.POST.get("action") == "preview":
        form.is_valid()
        return _editor(request, graph=graph, form=form, spec_text=spec_text)
    # Someone else's graph is a 403 whatever is posted, junk included.
    selectors.graph_get_for_edit(actor=request.user, graph_id=graph.pk)
    if not form.is_valid():
        return _editor(request, graph=graph, form=form, spec_text=spec_text, status=400)
    try:
        saved = services.graph_update(
            actor=request.user, graph_id=graph.pk, spec=spec_parse_text(form.cleaned_data["spec"])
        )
    except (InvalidInput, Conflict) as exc:
        form_add_domain_error(form, exc)
        return _editor(request, graph=graph, form=form, spec_text=spec_text, status=exc.status)
    messages.success(request, "Saved." if saved.result.valid else "Saved, with errors to fix.")
    return redirect("graph-detail", graph_id=graph.pk)


@require_POST
@login_required
def graph_rename(request: HttpRequest, graph_id: int) -> HttpResponse:
    form = RenameForm(request.POST)
    url = reverse("graph-detail", args=[graph_id])
    try:
        saved = services.graph_update(actor=request.user, graph_id=graph_id, name=request.POST.get("name", ""))
    except (InvalidInput, Conflict) as exc:
        form_add_domain_error(form, exc)
        messages.error(request, "Not renamed: " + "; ".join(str(e) for errors in form.errors.values() for e in errors))
    else:
        messages.success(request, f"Renamed to {saved.graph.name}.")
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


@require_POST
@login_required
def graph_delete(request: HttpRequest, graph_id: int) -> HttpResponse:
    deleted = services.graph_delete(actor=request.user, graph_id=graph_id, request=request)
    messages.success(request, f"Graph {deleted['name']} deleted.")
    url = reverse("graph-list")
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


@require_POST
@login_required
def graph_preview(request: HttpRequest) -> HttpResponse:
    """The live preview: compile the posted textarea, answer the preview fragment.

    Always 200 (htmx swaps only successful answers): junk is shown in the fragment.
    Nothing is stored, so every signed-in user, operators included, may preview.
    """
    return render(request, "graphs_app/_preview.html", _preview_context(request.POST.get("spec", "")))


@csp_update(MERMAID_CSP)
@require_POST
@login_required
def graph_convert(request: HttpRequest) -> HttpResponse:
    """Paste LangGraph JSON: convert ``get_graph().to_json()`` into a definition in the editor."""
    form = LangGraphForm(request.POST)
    graph = None
    graph_id = params.parse_int(request.POST.get("graph_id"), name="graph_id", minimum=1, maximum=params.CURSOR_MAX)
    if graph_id is not None:
        graph = selectors.graph_get_for_read(actor=request.user, graph_id=graph_id)
    spec_text, error = request.POST.get("spec", ""), None
    if not form.is_valid():
        problems = form.errors.get("langgraph") or ["Paste the JSON first."]
        error = "; ".join(str(p) for p in problems)
    else:
        try:
            spec_text = spec_pretty(from_langgraph_json(spec_parse_text(form.cleaned_data["langgraph"]), **spec_limits()))
        except InvalidInput as exc:
            error = exc.message.replace("spec is not JSON", "this is not JSON", 1)
        except SpecError as exc:
            error = f"this is not LangGraph's graph JSON: {exc}"
    if request.htmx:
        context = {"spec_text": spec_text, "editable": True, "converted": error is None, "convert_error": error}
        return render(request, "graphs_app/graph_editor.html#spec-source", context)
    edit_form = GraphForm(initial={"name": request.POST.get("name", "")}) if graph is None else SpecForm()
    # Without htmx the whole editor comes back: the paste's problem beside the definition, as a 400.
    return _editor(
        request, graph=graph, form=edit_form, spec_text=spec_text, converted=error is None,
        convert_error=error, status=200 if error is None else 400,
    )


# --------------------------------------------------------------------- thread on graph


@csp_update(MERMAID_CSP)
@require_GET
@login_required
def thread_graph(request: HttpRequest, thread_id: str) -> HttpResponse:
    """A thread drawn on the graph it names, with the path its checkpoints took."""
    thread = thread_get_for_read(actor=request.user, thread_id=thread_id)
    context = {"thread": thread, "on_graph": selectors.graph_for_thread(actor=request.user, thread=thread)}
    template = "graphs_app/thread_graph.html"
    if request.htmx:
        template += "#thread-graph-panel"
    return render(request, template, context)
