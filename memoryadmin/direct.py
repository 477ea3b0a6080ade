"""Direct calls: the API's hottest methods served without Django's request handler, its
middleware chain or DRF's dispatch (docs/scaling.md, "Direct calls").

An agent's step is two requests (a checkpoint put and its tasks' writes) whose own work is a
few hundred microseconds; Django's ASGI handler (two tasks, its signals sent through thread
hand-offs, the body chunked out), the middleware chain and DRF's dispatch cost several times
that in a worker's CPU. A DRF view lists the methods that may be served directly in its
`direct_methods`; `DirectCalls`, an ASGI wrapper around the application, serves a request for
one of them itself when it carries an API key, and hands everything else to Django unchanged.

Served directly, a request goes through the same pieces, not copies of them:

- the route: Django's URL resolver (`resolve`), so the path and its converters are the ones
  the URLconf declares (a path's resolution kept for its next request: an agent sends its
  thread's same few paths at every step, and resolving took a third of the event loop's work
  of a checkpoint put); the view's class, its content negotiation, authenticators,
  permissions and throttles;
- the request: Django's `ASGIRequest` made from the scope (headers, query string, host and
  scheme exactly as Django reads them), with what DRF's `Request` gives a view (`data` parsed
  by the API's parser, `query_params`, `user`, `auth`);
- the answer: the view's method itself, its `Response` rendered by the API's renderer; errors
  through DRF's `handle_exception` and the API's exception handler (the same JSON, the same
  audit of a 403); anything unexpected through Django's own `response_for_exception`;
- what the middleware adds to an API answer: the security headers (Django's
  `SecurityMiddleware` and `XFrameOptionsMiddleware` run on it), the request's metrics
  (`middleware.count_request`), the request signals (the database connection given back, the
  audit's request context).

A request is handed to Django instead when anything is unusual: no API key header, a host
not allowed, an http request where https is required, a body without a Content-Length or
over the limit, NUL characters in the URL, a body that is not JSON by its Content-Type, or a
route or method not listed. `MEMORYADMIN_DIRECT_CALLS=0` turns the wrapper off.

Listed today: the checkpoint put, its writes and the latest checkpoint (sessions_app/checkpoints/api/views.py),
an agent's state load, save and append (sessions_app/threads/api/views.py), the store's item get
and put, its search and its batch (store_app/api/views.py; the batch is what the Python client's
`MemoryAdminStore` sends every operation through).
"""

from __future__ import annotations

import io
import time
from functools import cache, lru_cache
from typing import Any

from django.conf import settings
from django.core.signals import setting_changed
from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import DisallowedHost
from django.core.handlers.asgi import ASGIRequest
from django.core.handlers.exception import response_for_exception
from django.core.signals import request_finished, request_started
from django.db import connections
from django.middleware.clickjacking import XFrameOptionsMiddleware
from django.middleware.security import SecurityMiddleware
from django.urls import Resolver404, resolve
from django.utils.log import log_response
from rest_framework import exceptions
from rest_framework.response import Response

from .middleware import count_request
from .requestthread import on_a_request_thread

_JSON = "application/json"


class DirectRequest(ASGIRequest):
    """Django's request for the scope, with what DRF's Request gives a view's method."""

    def __init__(self, scope: dict, body: bytes, view_class: type):
        super().__init__(scope, io.BytesIO(body))
        self._body = body
        self._view_class = view_class
        self.user = None
        self.auth = None
        self.authenticators = ()
        self.successful_authenticator = None
        self._request = self

    @property
    def query_params(self):
        return self.GET

    @property
    def data(self) -> Any:
        if not hasattr(self, "_data"):
            # The view's own parser (the API's: strict JSON, depth-bounded, its errors 400).
            parser = self._view_class().get_parsers()[0]
            self._data = parser.parse(io.BytesIO(self._body)) if self._body else {}
        return self._data


def _header(scope: dict, name: bytes) -> bytes | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return value
    return None


def _has_api_key(scope: dict) -> bool:
    """Whether the API-key authentication decides this request (as `auth.ApiKeyAuthentication` reads it)."""
    raw = _header(scope, b"x-api-key")
    if raw is not None and raw.strip():
        return True
    header = _header(scope, b"authorization") or b""
    scheme, _, value = header.partition(b" ")
    return scheme.lower() == b"bearer" and bool(value.strip())


@cache
def _middleware() -> tuple[SecurityMiddleware, XFrameOptionsMiddleware]:
    return SecurityMiddleware(lambda request: None), XFrameOptionsMiddleware(lambda request: None)


def _route(scope: dict):
    """(resolver match, view class) of a request that may be served directly, else None."""
    if scope["method"] not in ("GET", "POST", "PUT", "PATCH", "DELETE"):
        return None
    path = scope["path"]
    if not path.startswith("/api/") or "\x00" in path or b"\x00" in scope.get("query_string", b""):
        return None
    if scope.get("root_path") or not _has_api_key(scope):
        return None
    found = _resolved(path)
    if found is None or scope["method"].lower() not in getattr(found[1], "direct_methods", ()):
        return None
    return found


@lru_cache(maxsize=4096)
def _resolved(path: str):
    """(resolver match, view class) of a path whose view is a DRF view, else None. A match is
    Django's own, shared by the requests of its path: it is read, never changed."""
    try:
        match = resolve(path)
    except Resolver404:
        return None
    view_class = getattr(match.func, "cls", None)
    return None if view_class is None else (match, view_class)


def _routes_changed(*, setting: str, **kwargs) -> None:
    if setting == "ROOT_URLCONF":
        _resolved.cache_clear()


setting_changed.connect(_routes_changed)


def _body_fits(scope: dict) -> bool:
    declared = _header(scope, b"content-length")
    if declared is None:
        return _header(scope, b"transfer-encoding") is None and scope["method"] in ("GET", "DELETE")
    if not declared.isdigit() or int(declared) > settings.MEMORYADMIN_MAX_BODY_BYTES:
        return False
    if int(declared) == 0:
        return True
    content_type = (_header(scope, b"content-type") or b"").split(b";")[0].strip().lower()
    return content_type == _JSON.encode()


class DirectCalls:
    """The ASGI wrapper serving the views' `direct_methods` (see the module)."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or not settings.MEMORYADMIN_DIRECT_CALLS:
            return await self.app(scope, receive, send)
        found = _route(scope)
        if found is None or not _body_fits(scope):
            return await self.app(scope, receive, send)
        match, view_class = found
        request = DirectRequest(scope, b"", view_class)  # its body is set once read, below
        try:
            request.get_host()
            secure_needed = settings.SECURE_SSL_REDIRECT and not request.is_secure()
        except DisallowedHost:
            secure_needed = True
        if secure_needed:  # Django answers these (a 400, a redirect)
            return await self.app(scope, receive, send)

        body = bytearray()
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client left before its body arrived: nothing to answer
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        request._body = bytes(body)
        request._stream = io.BytesIO(request._body)
        request.resolver_match = match
        status, headers, content = await on_a_request_thread(lambda: _serve(request, scope, match, view_class))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": content})


def _serve(request: DirectRequest, scope: dict, match, view_class: type) -> tuple[int, list, bytes]:
    """The answer, on a request thread: the view's method between the request signals."""
    started = time.perf_counter()
    request_started.send(sender=DirectCalls, scope=scope)
    try:
        try:
            response = _respond(request, match, view_class)
        except Exception as exc:  # what the view's exception handling did not answer: Django's answer
            response = response_for_exception(request, exc)
        security, frames = _middleware()
        response = frames.process_response(request, security.process_response(request, response))
        if not response.has_header("Content-Length") and response.status_code != 304:  # a 304 has no body to measure
            response["Content-Length"] = str(len(response.content))
        count_request(request, response, started)
        if response.status_code >= 400:  # logged as Django's handler logs it
            log_response("%s: %s", response.reason_phrase, request.path, response=response, request=request)
        headers = [(name.encode("latin1"), value.encode("latin1")) for name, value in response.items()]
        for cookie in response.cookies.values():
            headers.append((b"set-cookie", cookie.output(header="").strip().encode("latin1")))
        return response.status_code, headers, response.content
    finally:
        request_finished.send(sender=DirectCalls)
        connections.close_all()


def _respond(request: DirectRequest, match, view_class: type):
    """What DRF's `APIView.dispatch` does for the method, with the pieces it uses."""
    view = view_class(**(match.func.view_initkwargs or {}))
    view.setup(request, *match.args, **match.kwargs)
    view.format_kwarg = None
    view.headers = view.default_response_headers
    renderer = view.get_renderers()[0]  # what an error is rendered with when negotiation failed (DRF's force)
    media_type = renderer.media_type
    try:
        # The answer's renderer as DRF negotiates it: an Accept or ?format= it cannot meet is its 406 or 404.
        renderer, media_type = view.perform_content_negotiation(request)
        _authenticate(request, view)
        view.check_permissions(request)
        view.check_throttles(request)
        response = getattr(view, request.method.lower())(request, *match.args, **match.kwargs)
    except Exception as exc:
        response = view.handle_exception(exc)
    for name, value in view.headers.items():
        response[name] = value
    if not isinstance(response, Response):
        return response  # a view's own HttpResponse, as DRF passes it on
    response.accepted_renderer, response.accepted_media_type = renderer, media_type
    response.renderer_context = view.get_renderer_context()
    return response.render()


def _authenticate(request: DirectRequest, view) -> None:
    """DRF's `Request._authenticate`: the first authenticator that answers decides."""
    request.authenticators = view.get_authenticators()
    for authenticator in request.authenticators:
        try:
            found = authenticator.authenticate(request)
        except exceptions.APIException:
            request.user, request.auth = AnonymousUser(), None
            raise
        if found is not None:
            request.successful_authenticator = authenticator
            request.user, request.auth = found
            return
    request.user, request.auth = AnonymousUser(), None
    raise exceptions.NotAuthenticated()
