"""The client stands alone: it installs and imports without Django, and its core needs httpx only.

This module is meant for the client's own virtual environment (`make test-client`),
where Django is not installed; in the server's environment the first test fails.
"""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys

import pytest


def test_django_is_not_installed_here():
    with pytest.raises(ModuleNotFoundError):
        import django  # noqa: F401


def test_the_langgraph_adapters_import_without_django():
    from langgraph.checkpoint.base import BaseCheckpointSaver
    from langgraph.store.base import BaseStore

    from memoryadmin_client.langgraph import MemoryAdminSaver, MemoryAdminStore

    assert issubclass(MemoryAdminSaver, BaseCheckpointSaver) and issubclass(MemoryAdminStore, BaseStore)
    assert not [name for name in sys.modules if name == "django" or name.startswith("django.")]


def test_the_core_requires_httpx_and_h11_alone_and_langgraph_comes_with_its_extra():
    requires = importlib.metadata.requires("memoryadmin-client") or []

    def names(extra: str | None) -> set[str]:
        marker = f'extra == "{extra}"'
        chosen = [r for r in requires if (marker in r if extra else "extra ==" not in r)]
        return {re.match(r"[A-Za-z0-9_.-]+", r).group().lower() for r in chosen}

    # h11: the HTTP/1.1 protocol of the client's own transport (memoryadmin_client.wire), httpx's own dependency.
    assert names(None) == {"httpx", "h11"}
    # orjson writes and reads the saver's bodies (memoryadmin_client.http.dumps_strict, json_of).
    assert names("langgraph") == {"langgraph", "langgraph-checkpoint", "langchain-core", "orjson"}
    assert names("agentscope") == {"agentscope", "mcp", "tqdm", "greenlet"}
    assert names("langchain") == {"langchain-core"}


def test_the_agentscope_and_langchain_adapters_import_without_django():
    from agentscope.session import SessionBase
    from langchain_core.chat_history import BaseChatMessageHistory

    from memoryadmin_client.agentscope import MemoryAdminSession
    from memoryadmin_client.langchain import MemoryAdminChatMessageHistory

    assert issubclass(MemoryAdminSession, SessionBase)
    assert issubclass(MemoryAdminChatMessageHistory, BaseChatMessageHistory)
    assert not [name for name in sys.modules if name == "django" or name.startswith("django.")]


@pytest.mark.parametrize(
    ("hidden", "module", "message"),
    [
        ("agentscope", "agentscope", "memoryadmin_client.agentscope needs AgentScope 1.x: pip install 'memoryadmin-client[agentscope]'"),
        ("langchain_core", "langchain", "memoryadmin_client.langchain needs langchain-core: pip install 'memoryadmin-client[langchain]'"),
    ],
)
def test_an_adapter_without_its_framework_names_its_extra(hidden, module, message):
    script = f"""
import sys
sys.modules[{hidden!r}] = None
from memoryadmin_client.agent_state import AgentStateAPI
import memoryadmin_client.{module}
"""
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert run.returncode == 1
    assert run.stderr.strip().splitlines()[-1] == f"ImportError: {message}"


def test_the_core_works_without_langgraph_and_the_adapters_name_the_extra():
    # A module set to None in sys.modules cannot be imported: this interpreter has no LangGraph.
    script = """
import sys
for name in ("langgraph", "langchain_core"):
    sys.modules[name] = None
from memoryadmin_client import HTTPClient, MemoryAdminForbidden
from memoryadmin_client.context import build_context
assert build_context(messages=[{"role": "user", "content": "hi"}], budget=100).messages[0].content == "hi"
import memoryadmin_client.langgraph
"""
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert run.returncode == 1
    assert run.stderr.strip().splitlines()[-1] == (
        "ImportError: memoryadmin_client.langgraph needs LangGraph: pip install 'memoryadmin-client[langgraph]'"
    )
