"""memoryadmin's Python client: LangGraph checkpointer and store over the HTTP API, and the context builder.

    from memoryadmin_client.langgraph import MemoryAdminSaver, MemoryAdminStore   # the `langgraph` extra
    from memoryadmin_client.context import build_context                        # plain Python
"""
