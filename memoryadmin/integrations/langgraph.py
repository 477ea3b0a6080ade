"""LangGraph adapters over memoryadmin's HTTP API (install with the `langgraph` extra).

    from memoryadmin.integrations.langgraph import MemoryAdminSaver, MemoryAdminStore

    graph = builder.compile(
        checkpointer=MemoryAdminSaver("http://127.0.0.1:8000", api_key),
        store=MemoryAdminStore("http://127.0.0.1:8000", api_key),
    )
"""

from .langgraph_saver import MemoryAdminSaver
from .langgraph_store import MemoryAdminStore

__all__ = ["MemoryAdminSaver", "MemoryAdminStore"]
