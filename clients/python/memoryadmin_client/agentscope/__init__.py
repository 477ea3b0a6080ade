"""AgentScope adapter over memoryadmin's HTTP API (install with the `agentscope` extra).

    from memoryadmin_client.agentscope import MemoryAdminSession

    session = MemoryAdminSession("http://127.0.0.1:8000", api_key)
    await session.save_session_state("trip-42", agent=agent)        # the memory is the thread's context
    await session.load_session_state("trip-42", agent=new_agent)    # the rest is its extra state

The rules are in `session` (what goes where) and `messages` (Msg ⇄ message).
"""

import importlib

try:
    # SessionBase is AgentScope 1.x's session interface (2.x replaced it).
    importlib.import_module("agentscope.session").SessionBase
    for _needed in ("agentscope.memory", "agentscope.message", "agentscope.module"):
        importlib.import_module(_needed)
except (ImportError, AttributeError) as missing:  # the core installs without AgentScope: say which extra brings it
    raise ImportError(
        "memoryadmin_client.agentscope needs AgentScope 1.x: pip install 'memoryadmin-client[agentscope]'"
    ) from missing

from ..errors import (
    MemoryAdminError,
    MemoryAdminForbidden,
    MemoryAdminInvalid,
    MemoryAdminNotFound,
    MemoryAdminPreconditionFailed,
)
from .messages import message_to_msg, msg_to_message
from .session import MemoryAdminSession, thread_id_for

__all__ = [
    "MemoryAdminError",
    "MemoryAdminForbidden",
    "MemoryAdminInvalid",
    "MemoryAdminNotFound",
    "MemoryAdminPreconditionFailed",
    "MemoryAdminSession",
    "message_to_msg",
    "msg_to_message",
    "thread_id_for",
]
