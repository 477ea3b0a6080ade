"""memoryadmin's Python client: framework adapters over the HTTP API, and the context builder.

    from memoryadmin_client.langgraph import MemoryAdminSaver, MemoryAdminStore   # the `langgraph` extra
    from memoryadmin_client.agentscope import MemoryAdminSession                # the `agentscope` extra
    from memoryadmin_client.langchain import MemoryAdminChatMessageHistory      # the `langchain` extra
    from memoryadmin_client.context import build_context                        # plain Python

The core (this package without its adapters) needs httpx alone: the HTTP layer
(`http`), the errors (`errors`), a thread's conversation state (`agent_state`)
and the context builder (`context`).
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
