"""The ASGI application the production server runs (gunicorn.conf.py: gunicorn with uvicorn workers).

Django's ASGI handler reads a request's whole body before any middleware sees it.
`BodyLimit` stops reading at MEMORYADMIN_MAX_BODY_BYTES, so a body too large is
never stored, whether it comes with a Content-Length or chunked; the request then
reaches Django marked, and RequestLimitsMiddleware answers 413 as it does for every
body over the limit (memoryadmin/middleware.py).

`DirectCalls` serves the API's hottest methods without Django's handler, its middleware chain
or DRF's dispatch, through the same pieces (memoryadmin/direct.py); every other request goes on.

`RequestThreads` gives each request the thread its synchronous work runs on, and lets
it go when a long-lived response (a live-turn stream) starts (memoryadmin/requestthread.py).

`Handler` is Django's ASGI handler with its middleware chain loaded in synchronous mode and
run whole on that thread, in one call: every middleware here is synchronous (or, like
django-axes and django-htmx, both), and in Django's asynchronous chain each change of mode
is a round trip between the event loop and the request's thread — four per request — where
here there is one. The request's parsing, its body and its answer stay on the event loop, as
Django does them.
"""

import logging
import os

import django
from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.handlers import base
from django.core.handlers.asgi import ASGIHandler
from django.http import FileResponse
from django.urls import get_resolver

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryadmin.settings")
django.setup(set_prefix=False)


class Handler(ASGIHandler):
    """Django's ASGI handler, its middleware chain and view run synchronously on the request's thread.

    An asynchronous view still works (Django's synchronous handler runs it on the event loop and
    waits); a streaming answer is still sent by the event loop, as Django sends it."""

    def __init__(self):
        base.BaseHandler.__init__(self)
        self.load_middleware(is_async=False)

    async def run_get_response(self, request):
        response = await sync_to_async(self.get_response, thread_sensitive=True)(request)
        response._handler_class = self.__class__
        if isinstance(response, FileResponse):
            response.block_size = self.chunk_size
        return response


django_application = Handler()

from memoryadmin.direct import DirectCalls  # noqa: E402 (after Django is set up)
from memoryadmin.middleware import BODY_TOO_LARGE  # noqa: E402
from memoryadmin.requestthread import RequestThreads  # noqa: E402


class BodyLimit:
    """An ASGI wrapper that keeps at most `limit` bytes of a request body.

    Past the limit (or when the declared Content-Length is over it) Django is told the
    body ended, and whatever the client still sends is dropped unread into nothing
    until the response is complete (the server then reports the end of the request).
    """

    def __init__(self, app, limit: int):
        self.app = app
        self.limit = limit

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = next((value for name, value in scope.get("headers", ()) if name == b"content-length"), None)
        # Refused by its declared size: nothing of it is kept.
        scope = {**scope, BODY_TOO_LARGE: declared is not None and declared.isdigit() and int(declared) > self.limit}
        received = 0
        ended = False

        async def limited_receive():
            nonlocal received, ended
            if ended:
                # After the body: what Django waits for now is the client leaving.
                while True:
                    message = await receive()
                    if message["type"] != "http.request":
                        return message
            if scope[BODY_TOO_LARGE]:
                ended = True
                return {"type": "http.request", "body": b"", "more_body": False}
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    scope[BODY_TOO_LARGE] = ended = True
                    return {"type": "http.request", "body": b"", "more_body": False}
                ended = not message.get("more_body", False)
            return message

        return await self.app(scope, limited_receive, send)


# The URLconf and every view module it imports, loaded now: with gunicorn's preload_app this is
# before the workers fork, so a worker (a recycled one's successor too) answers its first
# request without importing them.
get_resolver().url_patterns

# RequestThreads outside: BodyLimit marks the very scope it hands to Django (a body found too
# large while it is read), so nothing may copy the scope between the two. DirectCalls outside
# both: what it serves needs neither (memoryadmin/direct.py), what it does not is passed on as it came.
application = DirectCalls(RequestThreads(BodyLimit(django_application, settings.MEMORYADMIN_MAX_BODY_BYTES)))

if not settings.DEBUG and not settings.TESTING and not settings.STATIC_COLLECTED:
    logging.getLogger("memoryadmin").warning(
        "Static files are not collected in %s: serving them from the apps' directories, uncompressed. "
        "Run `manage.py collectstatic` for compressed files with cache-busting names.",
        settings.STATIC_ROOT,
    )
