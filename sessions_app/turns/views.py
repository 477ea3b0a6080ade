"""Pages for turns: the context preview, the live turns panel and its event stream (docs/turns.md).

Included under threads/<thread_id>/ by sessions_app.urls. Thin: sessions_app.turns
holds the rules, selectors decide ownership.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.db import connection
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import render
from django.utils.html import escape
from django.views.decorators.http import require_GET

from memoryadmin.errors import InvalidInput
from memoryadmin.integrations.context import DEFAULT_MIN_SCORE

from sessions_app.threads import selectors
from sessions_app.turns import services as turns
from sessions_app.threads.models import Thread
from sessions_app.turns.models import Turn


def _form_number(text: str) -> Any:
    """A number typed into a form field; anything else stays text, for the service to refuse by name."""
    text = text.strip()
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


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
                actor=request.user, thread_id=thread.thread_id, budget=_form_number(form["budget"]),
                namespace=form["namespace"].strip() or None,
                query=form["query"] or None, min_score=_form_number(form["min_score"]) if form["min_score"] else None,
            )
        except InvalidInput as exc:
            # The form shows the error beside its field instead of an error page.
            errors, status = exc.fields or {"budget": [exc.message]}, 400
    context = {"thread": thread, "form": form, "preview": preview, "errors": errors,
               "default_min_score": DEFAULT_MIN_SCORE}
    template = "turns/context_preview.html"
    if request.htmx:
        template += "#preview-result"
    return render(request, template, context, status=status)


def _seconds(name: str, default: float) -> float:
    value = getattr(settings, name, default)
    return float(value) if isinstance(value, (int, float)) and value >= 0 else default


@require_GET
@login_required
def turns_panel(request: HttpRequest, thread_id: str) -> HttpResponse:
    """The pending turn and the finished turns: the fragment the thread page polls every 2 s."""
    context = turns.turn_context(actor=request.user, thread_id=thread_id)
    return render(request, "turns/_turns_panel.html", {"turn_context": context, "thread": context.thread})


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


def turn_events(*, thread_pk: int, poll: float, heartbeat: float, max_seconds: float) -> Iterator[str]:
    """Server-sent events for a thread's pending turn: its new chunks, heartbeats, then the end.

    Polls the database (every server process sees the same turns), so it needs no
    message broker. Chunks go out HTML-escaped: htmx swaps them into the page as
    HTML, and agent text is untrusted. The stream ends when the turn it followed
    is finished or discarded (`event: finished`), or after `max_seconds`
    (`event: timeout`; the browser reconnects). When the client goes away the
    server closes the generator (GeneratorExit) and the finally block gives the
    database connection back.
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
                    followed, after = pending, -1
                for index, text in turns.pending_chunks_after(turn_id=pending, after=after):
                    after = index
                    yield _sse("chunk", escape(text), index)
            now = time.monotonic()
            if now - start >= max_seconds:
                yield _sse("timeout", "")
                return
            if now - last_beat >= heartbeat:
                last_beat = now
                yield ": heartbeat\n\n"
            time.sleep(poll)
    finally:
        # Inside a transaction (tests) the connection belongs to the caller; else release it now,
        # not at the next request: a stream can outlive many polls.
        if not connection.in_atomic_block:
            connection.close()


@require_GET
@login_required
def turns_stream(request: HttpRequest, thread_id: str) -> StreamingHttpResponse:
    """The event stream of the thread's pending turn; ownership is checked before the first byte."""
    thread = selectors.thread_get_for_read(actor=request.user, thread_id=thread_id)
    events = turn_events(
        thread_pk=thread.pk,
        poll=_seconds("MEMORYADMIN_TURN_SSE_POLL_SECONDS", 0.5),
        heartbeat=_seconds("MEMORYADMIN_TURN_SSE_HEARTBEAT_SECONDS", 15.0),
        max_seconds=_seconds("MEMORYADMIN_TURN_SSE_MAX_SECONDS", 300.0),
    )
    response = StreamingHttpResponse(events, content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    # nginx would otherwise buffer the stream and deliver it at the end.
    response["X-Accel-Buffering"] = "no"
    return response


