"""The client's one error hierarchy: every refusal or failure memoryadmin answers is a `MemoryAdminError`.

A subclass names the status, and where Python has a matching built-in error it
is one too, so callers may catch either:

    400  MemoryAdminInvalid             also ValueError; `.errors` names the fields
    401  MemoryAdminAuthError           also PermissionError
    403  MemoryAdminForbidden           also PermissionError
    404  MemoryAdminNotFound            also LookupError
    409  MemoryAdminConflict
    412  MemoryAdminPreconditionFailed  an If-Match that no longer holds
    413  MemoryAdminTooLarge            a MemoryAdminInvalid (the body as it stands is refused)
    429  MemoryAdminThrottled           `.retry_after` in seconds, when the server said
    503  MemoryAdminUnavailable         the database busy or away, still so after the retries

Any other status of 400 or more is a plain `MemoryAdminError`. The store's
names (`MemoryAdminStoreError`, `StoreForbiddenError`, `StoreInvalidError`) are
the same classes under their earlier names.
"""

from __future__ import annotations

from typing import Any


class MemoryAdminError(RuntimeError):
    """memoryadmin refused or failed a request; the answer's JSON is kept as `body`, `code`, `detail`, `errors`."""

    def __init__(
        self,
        status_code: int,
        body: Any,
        method: str = "",
        url: str = "",
        *,
        retry_after: float | None = None,
        message: str | None = None,
    ) -> None:
        self.status_code = status_code
        self.body = body
        self.code = body.get("code") if isinstance(body, dict) else None
        self.detail = body.get("detail") if isinstance(body, dict) else body
        self.errors = body.get("errors") if isinstance(body, dict) else None
        self.method = method
        self.url = url
        self.retry_after = retry_after
        where = f" to {method} {url}" if method else ""
        # `message`: the client refused the request itself, so memoryadmin answered nothing.
        super().__init__(message or f"memoryadmin answered {status_code}{where}: {self.detail}")


class MemoryAdminInvalid(MemoryAdminError, ValueError):
    """400: the request was refused as it stands (by the server, or by the client before sending it); `errors` names the fields."""


class MemoryAdminAuthError(MemoryAdminError, PermissionError):
    """401: no key, or a wrong or revoked one."""


class MemoryAdminForbidden(MemoryAdminError, PermissionError):
    """403: the thread or item belongs to another user, or the key's role may not do this."""


class MemoryAdminNotFound(MemoryAdminError, LookupError):
    """404: the thread or checkpoint does not exist."""


class MemoryAdminConflict(MemoryAdminError):
    """409: e.g. copying into a thread that already has checkpoints."""


class MemoryAdminPreconditionFailed(MemoryAdminError):
    """412: an If-Match that no longer holds (someone saved since); nothing was written."""


class MemoryAdminTooLarge(MemoryAdminInvalid):
    """413: the body is over the server's limit."""


class MemoryAdminThrottled(MemoryAdminError):
    """429: too many requests for this key; `retry_after` is the wait the server asked for, if it said."""


class MemoryAdminUnavailable(MemoryAdminError):
    """503: the server's database is busy or away."""


def refused_here(*, field: str, message: str) -> MemoryAdminInvalid:
    """What the client refuses before sending, shaped as the server's 400 for it (`errors` names the field)."""
    error = MemoryAdminInvalid(400, {"code": "invalid", "detail": f"{field}: {message}", "errors": {field: [message]}})
    error.args = (f"refused before sending: {field}: {message}",)
    return error


# The store adapter's earlier names, kept: they are the classes above.
MemoryAdminStoreError = MemoryAdminError
StoreForbiddenError = MemoryAdminForbidden
StoreInvalidError = MemoryAdminInvalid

ERRORS_BY_STATUS: dict[int, type[MemoryAdminError]] = {
    400: MemoryAdminInvalid,
    401: MemoryAdminAuthError,
    403: MemoryAdminForbidden,
    404: MemoryAdminNotFound,
    409: MemoryAdminConflict,
    412: MemoryAdminPreconditionFailed,
    413: MemoryAdminTooLarge,
    429: MemoryAdminThrottled,
    503: MemoryAdminUnavailable,
}


def error_class(*, status_code: int) -> type[MemoryAdminError]:
    """The class an answer of `status_code` is raised as: its own, else the base."""
    return ERRORS_BY_STATUS.get(status_code, MemoryAdminError)


__all__ = [
    "ERRORS_BY_STATUS",
    "MemoryAdminAuthError",
    "MemoryAdminConflict",
    "MemoryAdminError",
    "MemoryAdminForbidden",
    "MemoryAdminInvalid",
    "MemoryAdminNotFound",
    "MemoryAdminPreconditionFailed",
    "MemoryAdminStoreError",
    "MemoryAdminThrottled",
    "MemoryAdminTooLarge",
    "MemoryAdminUnavailable",
    "StoreForbiddenError",
    "StoreInvalidError",
    "error_class",
    "refused_here",
]
