from __future__ import annotations

import time

from django.conf import settings
from django.http import HttpResponse, JsonResponse
from django.shortcuts import render

from .audit import audit_denial
from .errors import DomainError, Forbidden
from .metrics import HTTP_LATENCY, HTTP_REQUESTS


class RequestMetricsMiddleware:
    """Counts requests and their latency by route pattern (never by raw path)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        started = time.perf_counter()
        response = self.get_response(request)
        match = getattr(request, "resolver_match", None)
        route = match.route if match is not None and match.route else "unmatched"
        HTTP_REQUESTS.labels(request.method, route, str(response.status_code)).inc()
        HTTP_LATENCY.labels(request.method, route).observe(time.perf_counter() - started)
        return response


class BodySizeLimitMiddleware:
    """Refuses a body larger than MEMORYADMIN_MAX_BODY_BYTES with 413, before reading it."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        limit = settings.MEMORYADMIN_MAX_BODY_BYTES
        raw = request.META.get("CONTENT_LENGTH") or "0"
        try:
            length = int(raw)
        except ValueError:
            return JsonResponse({"code": "invalid", "detail": "Content-Length is not a number."}, status=400)
        if length > limit:
            detail = f"Request body of {length} bytes exceeds the limit of {limit} bytes."
            if request.path.startswith("/api/"):
                return JsonResponse({"code": "too_large", "detail": detail}, status=413)
            return HttpResponse(detail, status=413, content_type="text/plain")
        return self.get_response(request)


class DomainErrorMiddleware:
    """Maps service errors raised inside HTML views to an error page (API views map their own)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exc):
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
