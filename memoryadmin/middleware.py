from __future__ import annotations

import io
import time

from django.conf import settings
from django.core.handlers.wsgi import LimitedStream
from django.db import InterfaceError, OperationalError
from django.http import HttpResponse, JsonResponse
from django.middleware.common import CommonMiddleware as DjangoCommonMiddleware
from django.shortcuts import render

from .audit import audit_denial
from .errors import DomainError, Forbidden
from .jsoncheck import UNSTORABLE_TEXT, text_storable
from .metrics import HTTP_LATENCY, HTTP_REQUESTS


# Every label value comes from a fixed set, whatever a caller sends: each new value is a
# new series kept in every process for good, so made-up methods or paths (no login
# needed) would otherwise grow the metrics without bound.
KNOWN_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
# Under ASGI, the scope key memoryadmin/asgi.py sets on a request whose body went past
# MEMORYADMIN_MAX_BODY_BYTES (the rest of it was not read).
BODY_TOO_LARGE = "memoryadmin.body_too_large"


class CommonMiddleware(DjangoCommonMiddleware):
    """Django's, except that only a GET or HEAD is redirected to the URL with its slash: a
    redirect would lose any other request's body (a client follows it with a GET), so such a
    URL is not found (404), as in production; Django's raises instead under DEBUG (a 500)."""

    def should_redirect_with_slash(self, request) -> bool:
        return request.method in ("GET", "HEAD") and super().should_redirect_with_slash(request)


class RequestMetricsMiddleware:
    """Counts requests and their latency by route pattern (never by raw path) and known method."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        started = time.perf_counter()
        response = self.get_response(request)
        count_request(request, response, started)
        return response


def count_request(request, response, started: float) -> None:
    """One request counted, and its latency since `started` (time.perf_counter), by route and method."""
    match = getattr(request, "resolver_match", None)
    route = match.route if match is not None and match.route else "unmatched"
    method = request.method if request.method in KNOWN_METHODS else "other"
    HTTP_REQUESTS.labels(method, route, str(response.status_code)).inc()
    HTTP_LATENCY.labels(method, route).observe(time.perf_counter() - started)


class RequestLimitsMiddleware:
    """Refuses what no view can handle, before any view runs.

    A body larger than MEMORYADMIN_MAX_BODY_BYTES is a 413, unread. A NUL character
    in the path, the query string or a form field is a 400 (naming the field): PostgreSQL
    text cannot hold one, so a filter or a value carrying it would otherwise fail inside
    the database. JSON bodies are checked field by field by the services.

    A chunked body (Transfer-Encoding, no Content-Length) is decided here, once for
    every view: Django reads a body by its Content-Length, so without one it would
    see none (a create with a random id, a PATCH that changes nothing, no size limit).
    Where the server hands over the de-chunked body and marks it terminated
    (`wsgi.input_terminated`, as gunicorn does), it is read here, at most one byte
    past the limit, and then treated exactly like a body with that Content-Length.
    Where it does not (the development server), it cannot be read: 411. Under ASGI
    the server de-chunks it, memoryadmin/asgi.py keeps at most the limit (and marks a
    request whose body went past it), and the body is read here the same way.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if "\x00" in request.path or _query_has_nul(request):
            return _refuse(request, 400, "invalid", "NUL characters are not allowed in URLs.")
        limit = settings.MEMORYADMIN_MAX_BODY_BYTES
        if getattr(request, "scope", {}).get(BODY_TOO_LARGE):
            return _refuse(request, 413, "too_large", f"Request body exceeds the limit of {limit} bytes.")
        if "HTTP_TRANSFER_ENCODING" in request.META and not request.META.get("CONTENT_LENGTH"):
            refusal = _take_chunked_body(request, limit)
            if refusal is not None:
                return refusal
        raw = request.META.get("CONTENT_LENGTH") or "0"
        try:
            length = int(raw)
        except ValueError:
            return _refuse(request, 400, "invalid", "Content-Length is not a number.")
        if length > limit:
            return _refuse(request, 413, "too_large", f"Request body of {length} bytes exceeds the limit of {limit} bytes.")
        field = _form_field_unstorable(request)
        if field is not None:
            return _refuse(request, 400, "invalid", f"{field} {UNSTORABLE_TEXT}", errors={field: [UNSTORABLE_TEXT]})
        return self.get_response(request)


def _take_chunked_body(request, limit: int):
    """Read a body sent without Content-Length and give it one; the refusal when that cannot be."""
    if hasattr(request, "scope"):
        # ASGI: the whole body (at most the limit) is already in the request's stream.
        request.META["CONTENT_LENGTH"] = str(len(request.body))
        return None
    environ = getattr(request, "environ", {})
    if not environ.get("wsgi.input_terminated") or "wsgi.input" not in environ:
        return _refuse(
            request, 411, "length_required",
            "This server cannot read a body without Content-Length; send one (no chunked transfer encoding).",
        )
    body = environ["wsgi.input"].read(limit + 1)
    if len(body) > limit:
        return _refuse(request, 413, "too_large", f"Request body exceeds the limit of {limit} bytes.")
    # What Django's WSGIRequest makes of a body with a Content-Length: a stream bounded by it.
    request._stream = LimitedStream(io.BytesIO(body), len(body))
    request.META["CONTENT_LENGTH"] = str(len(body))
    return None


def _query_has_nul(request) -> bool:
    return any("\x00" in key or any("\x00" in value for value in values) for key, values in request.GET.lists())


FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


def _form_field_unstorable(request) -> str | None:
    """The name of the first form field (of a POST form) holding NUL or a lone surrogate."""
    if request.method != "POST" or request.content_type not in FORM_TYPES:
        return None
    for name, values in request.POST.lists():
        if not text_storable(name):
            return "a field name"
        if not all(text_storable(value) for value in values):
            return name
    return None


def _refuse(request, status: int, code: str, detail: str, *, errors: dict | None = None):
    if request.path.startswith("/api/"):
        body = {"code": code, "detail": detail, **({"errors": errors} if errors else {})}
        return JsonResponse(body, status=status)
    return HttpResponse(detail, status=status, content_type="text/plain; charset=utf-8")


def database_unavailable(request):
    detail = "The database is not answering; retry shortly."
    if request.path.startswith("/api/"):
        response = JsonResponse({"code": "unavailable", "detail": detail}, status=503)
    else:
        response = HttpResponse(detail, status=503, content_type="text/plain; charset=utf-8")
    response["Retry-After"] = "5"
    return response


class DomainErrorMiddleware:
    """Maps service errors raised inside HTML views to an error page (API views map their own)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exc):
        if isinstance(exc, OperationalError | InterfaceError):
            return database_unavailable(request)
        if not isinstance(exc, DomainError):
            return None
        if isinstance(exc, Forbidden):
            audit_denial(request=request, exc=exc)
        return render(
            request,
            "error.html",
            {"status": exc.status, "message": exc.message},
            status=exc.status,
        )
