"""Request throttling per API key (or per signed-in user)."""

from __future__ import annotations

from rest_framework.settings import api_settings
from rest_framework.throttling import SimpleRateThrottle

from .models import ApiKey


class ClientRateThrottle(SimpleRateThrottle):
    """One budget per API key: an agent with a runaway loop slows itself, not its owner's other agents.

    Browser sessions are counted per user. Unauthenticated requests are refused
    with 401 before throttling matters, so they are not counted here.
    """

    scope = "client"

    def get_rate(self):
        # Read at request time, so a changed setting applies without a restart of the class.
        return api_settings.DEFAULT_THROTTLE_RATES[self.scope]

    def get_cache_key(self, request, view):
        if isinstance(request.auth, ApiKey):
            ident = f"key:{request.auth.prefix}"
        elif request.user and request.user.is_authenticated:
            ident = f"user:{request.user.pk}"
        else:
            return None
        return self.cache_format % {"scope": self.scope, "ident": ident}
