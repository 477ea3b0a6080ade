"""memoryadmin's Python client: LangGraph checkpointer and store over the HTTP API, and the context builder.

    from memoryadmin_client.langgraph import MemoryAdminSaver, MemoryAdminStore   # the `langgraph` extra
    from memoryadmin_client.context import build_context                        # plain Python

The core (this package without `langgraph`) needs httpx alone: the HTTP layer
(`http`), the errors (`errors`) and the context builder (`context`).
"""

from .errors import (
    MemoryAdminAuthError,
    MemoryAdminConflict,
    MemoryAdminError,
    MemoryAdminForbidden,
    MemoryAdminInvalid,
    MemoryAdminNotFound,
    MemoryAdminPreconditionFailed,
    MemoryAdminStoreError,
    MemoryAdminThrottled,
    MemoryAdminTooLarge,
    MemoryAdminUnavailable,
    StoreForbiddenError,
    StoreInvalidError,
)
from .http import Call, HTTPClient, RetryPolicy

__all__ = [
    "Call",
    "HTTPClient",
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
    "RetryPolicy",
    "StoreForbiddenError",
    "StoreInvalidError",
]
