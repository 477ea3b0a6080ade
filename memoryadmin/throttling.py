"""Request throttling per API key (or per signed-in user)."""

from __future__ import annotations

from rest_framework.settings import api_settings
from rest_framework.throttling import SimpleRateThrottle

from .models import ApiKey


class ClientRateThrottle(SimpleRateThrottle):
    """One budget per API key: an agent with a runaway loop slows itself, not its owner's other agents.

    Browser sessions are counted per user. Unauthenticated requests are refused
    with 401 before throttling matters, so they are not counted here.

    The budget is counted in fixed windows of the rate's period (a minute for "6000/min"):
    one counter per key and window, one cache increment per request, whatever the rate.
    DRF's own throttle keeps the time of every request of the period and writes the whole
    list back on each one — 6 000 timestamps to the cache per request at the default rate.
    Across a window's boundary a client may send up to twice the budget within one period;
    within a window never more than the budget. Retry-After is the time to the next window.
    """

    scope = "client"

    def get_rate(self):
        # Read at request time, so a changed setting applies without a restart of the class.
        return api_settings.DEFAULT_THROTTLE_RATES[self.scope]

    def allow_request(self, request, view):
        if self.rate is None:
            return True
        self.key = self.get_cache_key(request, view)
        if self.key is None:
            return True
        self.now = self.timer()
        window = int(self.now // self.duration)
        self.window_ends = (window + 1) * self.duration
        counter = f"{self.key}:{window}"
        return self._counted(counter) <= self.num_requests

    def _counted(self, counter: str) -> int:
        """This request counted in its window's counter (made by the window's first request, and
        kept a second past the window's end)."""
        for _ in range(2):
            try:
                return self.cache.incr(counter)
            except ValueError:  # no counter yet
                if self.cache.add(counter, 1, timeout=int(self.duration) + 1):
                    return 1
        return 1  # made and gone again in between: a window just over

    def wait(self):
        return max(self.window_ends - self.now, 0.0)

    def get_cache_key(self, request, view):
        if isinstance(request.auth, ApiKey):
            ident = f"key:{request.auth.prefix}"
        elif request.user and request.user.is_authenticated:
            ident = f"user:{request.user.pk}"
        else:
            return None
        return self.cache_format % {"scope": self.scope, "ident": ident}
