"""The page middleware, left out of API requests that carry an API key.

An agent's call (`/api/…` with `Authorization: Bearer <key>` or `X-Api-Key`) has no
session, no flash messages, no htmx headers and no sign-in form, and its JSON answer is no
page a content security policy applies to. Each class here is one of Django's or a library's page
middleware that steps aside for such a request (the request goes straight to the next one)
and runs as before for everything else: pages, the browser's own API calls (session and
CSRF), requests without a key. What every request keeps is in settings.MIDDLEWARE around
them: metrics, request limits, the security and frame headers, CSRF (Django's deploy check
wants it by name; DRF's views are exempt from it, and its session authentication checks
CSRF itself), the replica router and the error pages.
"""

from __future__ import annotations

from axes.middleware import AxesMiddleware
from csp.middleware import CSPMiddleware
from django.contrib.auth.middleware import AuthenticationMiddleware
from django.contrib.messages.middleware import MessageMiddleware
from django.contrib.sessions.middleware import SessionMiddleware
from django_htmx.middleware import HtmxMiddleware

# A middleware's hooks Django calls itself (by their presence, once), and what a skipped one
# gives back: no answer of its own (None), or the response it was handed.
HOOKS = {"process_view": False, "process_exception": False, "process_template_response": True}


def is_api_key_request(request) -> bool:
    """An API call carrying an API key: what ApiKeyAuthentication decides (memoryadmin/auth.py)."""
    if not request.path.startswith("/api/"):
        return False
    meta = request.META
    if meta.get("HTTP_X_API_KEY", "").strip():
        return True
    return meta.get("HTTP_AUTHORIZATION", "")[:7].lower() == "bearer "


def _pages_only(base: type) -> type:
    """A subclass of `base` (so Django's and the libraries' checks still find it) that
    hands an API call with a key straight to the next middleware, in sync and async mode alike."""

    def __call__(self, request):
        if is_api_key_request(request):
            return self.get_response(request)
        return base.__call__(self, request)

    def hook(name: str, gives_response: bool):
        method = getattr(base, name)

        def run(self, request, *args):
            if is_api_key_request(request):
                return args[0] if gives_response else None
            return method(self, request, *args)

        run.__name__ = name
        return run

    namespace = {"__call__": __call__, "__doc__": f"{base.__name__}, for every request but an API call with a key."}
    for name, gives_response in HOOKS.items():
        if hasattr(base, name):
            namespace[name] = hook(name, gives_response)
    return type(base.__name__, (base,), namespace)


Sessions = _pages_only(SessionMiddleware)
Authentication = _pages_only(AuthenticationMiddleware)
Messages = _pages_only(MessageMiddleware)
ContentSecurityPolicy = _pages_only(CSPMiddleware)
Htmx = _pages_only(HtmxMiddleware)
Axes = _pages_only(AxesMiddleware)
