"""LangChain adapter over memoryadmin's HTTP API (install with the `langchain` extra).

    from memoryadmin_client.langchain import MemoryAdminChatMessageHistory

    history = MemoryAdminChatMessageHistory("http://127.0.0.1:8000", api_key, "support-42")
    chain = RunnableWithMessageHistory(runnable, lambda session_id: MemoryAdminChatMessageHistory(url, key, session_id))

The rules are in `history` (reads, appends, clears) and `messages` (message ⇄ message).
"""

import importlib

try:
    for _needed in ("langchain_core.chat_history", "langchain_core.messages"):
        importlib.import_module(_needed)
except ImportError as missing:  # the core installs without LangChain: say which extra brings it
    raise ImportError(
        "memoryadmin_client.langchain needs langchain-core: pip install 'memoryadmin-client[langchain]'"
    ) from missing

from ..errors import (
    MemoryAdminError,
    MemoryAdminForbidden,
    MemoryAdminInvalid,
    MemoryAdminPreconditionFailed,
)
from .history import MemoryAdminChatMessageHistory
from .messages import message_from_memoryadmin, message_to_memoryadmin

__all__ = [
    "MemoryAdminChatMessageHistory",
    "MemoryAdminError",
    "MemoryAdminForbidden",
    "MemoryAdminInvalid",
    "MemoryAdminPreconditionFailed",
    "message_from_memoryadmin",
    "message_to_memoryadmin",
]
