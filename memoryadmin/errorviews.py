"""Error pages: JSON under /api/, HTML elsewhere."""

import sys

from django.db import InterfaceError, OperationalError
from django.http import JsonResponse
from django.shortcuts import render


def _answer(request, status: int, message: str):
    if request.path.startswith("/api/"):
        code = {403: "forbidden", 404: "not_found", 500: "server_error"}[status]
        return JsonResponse({"code": code, "detail": message}, status=status)
    return render(request, "error.html", {"status": status, "message": message}, status=status)


def forbidden(request, exception=None):
    return _answer(request, 403, "You may not see this page.")


def not_found(request, exception=None):
    return _answer(request, 404, "Nothing here.")


def server_error(request):
    # An outage met outside a view (in a middleware) lands here: still a 503, not a 500.
    if isinstance(sys.exc_info()[1], OperationalError | InterfaceError):
        from .middleware import database_unavailable

        return database_unavailable(request)
    return _answer(request, 500, "Something went wrong on our side; it has been logged.")
