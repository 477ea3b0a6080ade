"""Domain errors: services raise these; one handler per surface maps them to HTTP.

The API maps them in `memoryadmin.api.exception_handler`, the HTML pages in
`memoryadmin.middleware.DomainErrorMiddleware`.
"""

from __future__ import annotations

from typing import Any


class DomainError(Exception):
    status = 400
    code = "invalid"

    def __init__(self, message: str, *, fields: dict[str, Any] | None = None, code: str | None = None):
        super().__init__(message)
        self.message = message
        self.fields = fields or {}
        if code:
            self.code = code

    def as_dict(self) -> dict[str, Any]:
        body: dict[str, Any] = {"code": self.code, "detail": self.message}
        if self.fields:
            body["errors"] = self.fields
        return body


class InvalidInput(DomainError):
    status = 400
    code = "invalid"


class NotFound(DomainError):
    status = 404
    code = "not_found"


class Conflict(DomainError):
    status = 409
    code = "conflict"


class PreconditionFailed(DomainError):
    status = 412
    code = "precondition_failed"


class Forbidden(DomainError):
    """The actor may not do this to this object (ownership or role).

    `target` names the object ("thread:abc") so that the handler can record the
    refusal in the audit log after the service's transaction has rolled back.
    `owner_id` is the object's owner when the refusal is about ownership: the
    event then names who owns what was asked for (never in the answer itself).
    """

    status = 403
    code = "forbidden"

    def __init__(
        self, message: str, *, target: str = "", action: str = "", code: str | None = None, owner_id: int | None = None
    ):
        super().__init__(message, code=code)
        self.target = target
        self.action = action
        self.owner_id = owner_id
