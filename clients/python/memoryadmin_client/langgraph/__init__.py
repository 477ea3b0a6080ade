"""LangGraph adapters over memoryadmin's HTTP API (install with the `langgraph` extra).

    from memoryadmin_client.langgraph import MemoryAdminSaver, MemoryAdminStore

    graph = builder.compile(
        checkpointer=MemoryAdminSaver("http://127.0.0.1:8000", api_key),
        store=MemoryAdminStore("http://127.0.0.1:8000", api_key),
    )
"""

import importlib

try:
    for _needed in ("langchain_core", "langgraph.checkpoint.base", "langgraph.store.base"):
        importlib.import_module(_needed)
except ImportError as missing:  # the core installs without LangGraph: say which extra brings it
    raise ImportError(
        "memoryadmin_client.langgraph needs LangGraph: pip install 'memoryadmin-client[langgraph]'"
    ) from missing

from ..errors import (
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
from .codec import BLOB_KEY, ValueCodec
from .saver import MemoryAdminSaver
from .store import MemoryAdminStore

__all__ = [
    "BLOB_KEY",
    "MemoryAdminAuthError",
    "MemoryAdminConflict",
    "MemoryAdminError",
    "MemoryAdminForbidden",
    "MemoryAdminInvalid",
    "MemoryAdminNotFound",
    "MemoryAdminPreconditionFailed",
    "MemoryAdminSaver",
    "MemoryAdminStore",
    "MemoryAdminStoreError",
    "MemoryAdminThrottled",
    "MemoryAdminTooLarge",
    "MemoryAdminUnavailable",
    "StoreForbiddenError",
    "StoreInvalidError",
    "ValueCodec",
]
