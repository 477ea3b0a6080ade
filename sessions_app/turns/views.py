"""Pages for turns: the context preview, the live turns panel and its event stream (docs/turns.md).

Included under threads/<thread_id>/ by sessions_app.urls. Thin: sessions_app.turns
holds the rules, selectors decide ownership.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.db import connection
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import render
from django.utils.html import escape
from django.views.decorators.http import require_GET

from memoryadmin import params
from memoryadmin.errors import InvalidInput
from memoryadmin_client.context import DEFAULT_MIN_SCORE

from sessions_app.threads import selectors
from sessions_app.turns import services as turns
from sessions_app.turns import streams
from sessions_app.threads.models import Thread
from sessions_app.turns.models import Turn


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


# What ends a line of an event stream: CRLF, a lone CR and a lone LF alike.
_SSE_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def _sse(event: str, data: str, event_id: int | None = None) -> str:
    """One server-sent event whose payload can never forge a field of the stream.

    A browser ends a line at CR, LF or CRLF, so the payload is split on all three and
    each piece is a `data:` line of its own (the client joins them back with LF): a
    chunk holding "\revent: x" stays data. The event name and id are ours, never
    content; one that could end a line is a bug, refused rather than sent.
    """
    event_id_text = "" if event_id is None else str(event_id)
    if _SSE_LINE_BREAK.search(event) or _SSE_LINE_BREAK.search(event_id_text) or "\x00" in event_id_text:
        raise ValueError(f"an event name or id cannot hold a line break: {event!r}, {event_id_text!r}")
    lines = [f"event: {event}"]
    if event_id is not None:
        lines.append(f"id: {event_id_text}")
    lines.extend(f"data: {line}" for line in _SSE_LINE_BREAK.split(data))
    return "\n".join(lines) + "\n\n"


def turn_events(
    *,
    thread_pk: int,
    poll: float,
    heartbeat: float,
    max_seconds: float,
    renew: Callable[[], bool] | None = None,
    resume: tuple[int, int] | None = None,
) -> Iterator[str]:
    """Server-sent events for a thread's pending turn: its new chunks, heartbeats, then the end.

    Polls the database (every server process sees the same turns), so it needs no
    message broker. Chunks go out HTML-escaped: htmx swaps them into the page as
    HTML, and agent text is untrusted. The stream ends when the turn it followed
    is finished or discarded (`event: finished`), or after `max_seconds`
    (`event: timeout`; the browser reconnects). A heartbeat comment goes out every
    `heartbeat` seconds even while chunks flow: a write is how a departed client is
    noticed (it fails, and the server closes the generator: GeneratorExit; the
    finally block gives the database connection back). Each heartbeat also calls
    `renew` (the stream's lease); when it answers False the stream ends as on timeout.
    `resume=(turn_id, index)`: the page already shows that turn's chunks up to `index`,
    so the stream starts after it (when that turn is still the pending one).
    """
    start = last_beat = time.monotonic()
    followed: int | None = None
    after = -1
    try:
        yield "retry: 2000\n\n"
        while True:
            pending = (
                Turn.objects.filter(thread_id=thread_pk, status=Turn.Status.PENDING).values_list("pk", flat=True).first()
            )
            if pending is None and followed is not None:
                yield _sse("finished", "")
                return
            if pending is not None:
                if pending != followed:
                    followed, after = pending, resume[1] if resume and resume[0] == pending else -1
                for index, text in turns.pending_chunks_after(turn_id=pending, after=after):
                    after = index
                    yield _sse("chunk", escape(text), index)
            now = time.monotonic()
            if now - start >= max_seconds:
                yield _sse("timeout", "")
                return
            if now - last_beat >= heartbeat:
                last_beat = now
                if renew is not None and not renew():
                    yield _sse("timeout", "")
                    return
                yield ": heartbeat\n\n"
            time.sleep(poll)
    finally:
        # Inside a transaction (tests) the connection belongs to the caller; else release it now,
        # not at the next request: a stream can outlive many polls.
        if not connection.in_atomic_block:
            connection.close()


def _resume(request: HttpRequest) -> tuple[int, int] | None:
    """`?turn=<id>&after=<index>` from the panel: where the page's copy of the answer ends."""
    turn, after = request.GET.get("turn"), request.GET.get("after")
    if turn is None or after is None:
        return None
    return (
        params.parse_int(turn, name="turn", minimum=1, maximum=params.CURSOR_MAX),
        params.parse_int(after, name="after", minimum=-1, maximum=params.CURSOR_MAX),
    )


@require_GET
@login_required
def turns_stream(request: HttpRequest, thread_id: str) -> HttpResponseBase:
    """The event stream of the thread's pending turn; ownership is checked before the first byte.

    Past the open-stream limits (sessions_app.turns.streams) the answer is 429 with
    Retry-After; the page's htmx reconnects with a growing delay and its poll of the
    panel goes on meanwhile.
    """
    thread = selectors.thread_get_for_read(actor=request.user, thread_id=thread_id)
    try:
        lease = streams.stream_open(actor=request.user, thread=thread)
    except streams.StreamLimitReached as exc:
        refused = HttpResponse(exc.message, status=exc.status, content_type="text/plain; charset=utf-8")
        refused["Retry-After"] = str(exc.retry_after)
        return refused
    events = turn_events(
        thread_pk=thread.pk,
        poll=settings.MEMORYADMIN_TURN_SSE_POLL_SECONDS,
        heartbeat=settings.MEMORYADMIN_TURN_SSE_HEARTBEAT_SECONDS,
        max_seconds=settings.MEMORYADMIN_TURN_SSE_MAX_SECONDS,
        renew=lambda: streams.stream_renew(lease),
        resume=_resume(request),
    )
    response = StreamingHttpResponse(streams.LeasedStream(events, lease), content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    # nginx would otherwise buffer the stream and deliver it at the end.
    response["X-Accel-Buffering"] = "no"
    return response
