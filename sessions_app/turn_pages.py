"""Pages for turns: the context preview, the live turns panel and its event stream (docs/turns.md).

Included under threads/<thread_id>/ by sessions_app.urls. Thin: sessions_app.turns
holds the rules, selectors decide ownership.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import path
from django.views.decorators.http import require_GET

from memoryadmin.errors import InvalidInput
from memoryadmin.integrations.context import DEFAULT_MIN_SCORE

from . import selectors, turns
from .models import Thread


@require_GET
@login_required
def context_preview_page(request: HttpRequest, thread_id: str) -> HttpResponse:
    """A form (budget, namespace, query, min_score) and, once submitted, the messages a model would get."""
    thread: Thread = selectors.thread_get_for_read(actor=request.user, thread_id=thread_id)
    form = {
        "budget": request.GET.get("budget", ""),
        "namespace": request.GET.get("namespace", ""),
        "query": request.GET.get("query", ""),
        "min_score": request.GET.get("min_score", ""),
    }
    preview, errors, status = None, {}, 200
    if form["budget"]:
        try:
            preview = turns.context_preview(
                actor=request.user, thread_id=thread.thread_id, budget=form["budget"],
                namespace=form["namespace"] or None, query=form["query"] or None, min_score=form["min_score"] or None,
            )
        except InvalidInput as exc:
            # The form shows the error beside its field instead of an error page.
            errors, status = exc.fields or {"budget": [exc.message]}, 400
    context = {"thread": thread, "form": form, "preview": preview, "errors": errors,
               "default_min_score": DEFAULT_MIN_SCORE}
    template = "sessions_app/context_preview.html"
    if request.htmx:
        template += "#preview-result"
    return render(request, template, context, status=status)


urlpatterns = [
    path("context/", context_preview_page, name="thread-context-preview"),
]
