"""Pages for turns: the context preview, the live turns panel and its event stream (docs/turns.md).

Included under threads/<thread_id>/ by sessions_app.urls. Thin: sessions_app.turns
holds the rules, selectors decide ownership.
"""

from __future__ import annotations

import functools

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.handlers.asgi import ASGIRequest
from django.db import connection
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import render
from django.views.decorators.http import require_GET

from memoryadmin import params
from memoryadmin.requestthread import let_go
from memoryadmin.errors import InvalidInput
from memoryadmin_client.context import DEFAULT_MIN_SCORE

from sessions_app.threads import selectors
from sessions_app.turns import live
from sessions_app.turns import services as turns
from sessions_app.turns import streams
from sessions_app.threads.models import Thread


@require_GET
@login_required
def context_preview_page(request: HttpRequest, thread_id: str) -> HttpResponse:
    """A form (budget, namespace, query, min_score) and, once submitted, the messages a model would get."""
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
                actor=request.user, thread_id=thread_id,
                budget=params.parse_int(form["budget"], name="budget", minimum=1, maximum=turns.PREVIEW_BUDGET_MAX),
                namespace=form["namespace"].strip() or None,
                query=form["query"] or None,
                min_score=params.parse_number(form["min_score"], name="min_score", minimum=0, maximum=1),
            )
        except InvalidInput as exc:
            # The form shows the error beside its field instead of an error page.
            errors, status = exc.fields or {"budget": [exc.message]}, 400
    # One audited read per view: the preview's own read when it ran, else this one.
    thread: Thread = selectors.thread_get_for_read(actor=request.user, thread_id=thread_id, audit=preview is None)
    context = {"thread": thread, "form": form, "preview": preview, "errors": errors,
               "default_min_score": DEFAULT_MIN_SCORE}
    template = "turns/context_preview.html"
    if request.htmx:
        template += "#preview-result"
    return render(request, template, context, status=status)


@require_GET
@login_required
def turns_panel(request: HttpRequest, thread_id: str) -> HttpResponse:
    """The pending turn and the finished turns. For htmx, the panel the thread page swaps in:
    polled every 2 s while no turn is pending, fed by the event stream while one is. Without
    htmx (the page's no-script link), a page of its own."""
    context = turns.turn_context(actor=request.user, thread_id=thread_id)
    template = "turns/_turns_panel.html" if request.htmx else "turns/turns_page.html"
    return render(request, template, {"turn_context": context, "thread": context.thread})


def _resume(request: HttpRequest) -> tuple[int, int] | None:
    """`?turn=<id>&after=<index>` from the panel: where the page's copy of the answer ends."""
    turn, after = request.GET.get("turn"), request.GET.get("after")
    if turn is None or after is None:
        return None
    return (
        params.parse_int(turn, name="turn", minimum=1, maximum=params.CURSOR_MAX),
        params.parse_int(after, name="after", minimum=-1, maximum=params.CURSOR_MAX),
    )


def _give_back_connection() -> None:
    if not connection.in_atomic_block:
        connection.close()


def _stream_open(actor, thread_id: str):
    """The thread (if the actor may read it) and a lease for its stream, or StreamLimitReached."""
    try:
        thread = selectors.thread_get_for_read(actor=actor, thread_id=thread_id)
        return thread, streams.stream_open(actor=actor, thread=thread)
    finally:
        # The stream holds no connection while it waits (given back to the pool, or closed).
        if not connection.in_atomic_block:
            connection.close()


@require_GET
@login_required
async def turns_stream(request: HttpRequest, thread_id: str) -> HttpResponseBase:
    """The event stream of the thread's pending turn; ownership is checked before the first byte.

    An async view: the stream is a coroutine woken by PostgreSQL notifications
    (sessions_app/turns/live.py). Past the open-stream limits (sessions_app.turns.streams)
    the answer is 429 with Retry-After; the page's htmx reconnects with a growing delay
    and its poll of the panel goes on meanwhile.
    """
    resume = _resume(request)
    user = await request.auser()
    # The sign-in check borrowed a connection: give it back before waiting for a slot.
    await sync_to_async(_give_back_connection)()
    try:
        async with live.database_slot():
            thread, lease = await sync_to_async(_stream_open)(user, thread_id)
    except streams.StreamLimitReached as exc:
        refused = HttpResponse(exc.message, status=exc.status, content_type="text/plain; charset=utf-8")
        refused["Retry-After"] = str(exc.retry_after)
        return refused
    release = functools.partial(streams.stream_release, lease)
    events = live.turn_events(
        thread_pk=thread.pk,
        poll=settings.MEMORYADMIN_TURN_SSE_POLL_SECONDS,
        heartbeat=settings.MEMORYADMIN_TURN_SSE_HEARTBEAT_SECONDS,
        max_seconds=settings.MEMORYADMIN_TURN_SSE_MAX_SECONDS,
        lease_id=lease.pk,
        release=release,
        resume=resume,
        ended_at=thread.streams_ended_at,
    )
    if isinstance(request, ASGIRequest):
        content = live.LeasedEvents(events, release)
    else:
        # A WSGI server (the development server) sends what a generator yields, event by event.
        content = live.EventsInThisThread(events, release)
    # The request's own thread ends once the middleware has answered (the stream holds none).
    let_go(request)
    response = StreamingHttpResponse(content, content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    # nginx would otherwise buffer the stream and deliver it at the end.
    response["X-Accel-Buffering"] = "no"
    return response
