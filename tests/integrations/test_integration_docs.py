"""docs/integrations/{agentscope,langchain,langgraph}.md: every Python example runs, in order, against a live server.

Each page's ```python blocks run one after the other in one namespace, given
what the page says they are given (`url`, `api_key`, and for AgentScope and
LangChain a `model`: a chat model of the test's own with scripted replies). Then
what the page says they did is checked in the database. A page whose examples
stop working fails here.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any

import pytest
from agentscope.formatter import OpenAIChatFormatter
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage

from memoryadmin.apikeys import apikey_create
from sessions_app.models import Checkpoint, Thread
from store_app.models import StoreItem

from .adapters import blocks_of, verify_output
from .test_agentscope_session import ScriptedModel, text, tool_call

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.filterwarnings("ignore:RunnableWithMessageHistory is deprecated"),
]

DOCS = Path(__file__).resolve().parents[2] / "docs" / "integrations"
PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```", re.M | re.S)


def python_examples(page: str) -> list[tuple[int, str]]:
    """The page's Python blocks with the line each starts on."""
    text_ = (DOCS / page).read_text(encoding="utf-8")
    return [(text_.count("\n", 0, m.start()) + 2, m.group(1)) for m in PYTHON_BLOCK.finditer(text_)]


def run_page(page: str, namespace: dict[str, Any]) -> dict[str, Any]:
    """Run the page's examples in order in `namespace`, in a thread of its own (they call asyncio.run)."""
    outcome: dict[str, BaseException] = {}

    def target() -> None:
        try:
            for line, code in python_examples(page):
                # Blank lines up front make a traceback's line numbers the page's own; dont_inherit
                # keeps this module's `from __future__ import annotations` out, as a reader's script has it.
                exec(compile("\n" * (line - 1) + code, str(DOCS / page), "exec", dont_inherit=True), namespace)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test's thread
            outcome["error"] = exc

    thread = threading.Thread(target=target)
    thread.start()
    thread.join(timeout=120)
    assert not thread.is_alive(), f"{page}: the examples did not finish in 120 s"
    if "error" in outcome:
        raise outcome["error"]
    return namespace


@pytest.mark.parametrize(("page", "blocks"), [("agentscope.md", 2), ("langchain.md", 4), ("langgraph.md", 3)])
def test_each_page_has_its_examples(page, blocks):
    assert len(python_examples(page)) == blocks


def test_the_agentscope_page_runs(live_server, alice):
    model = ScriptedModel([tool_call(), text("6 x 7 = 42")])
    run_page(
        "agentscope.md",
        {"url": live_server.url, "api_key": apikey_create(owner=alice).plaintext, "model": model, "formatter": OpenAIChatFormatter()},
    )
    thread = Thread.objects.get(thread_id="kyoto-trip")
    assert (thread.owner, thread.agent_code, thread.title) == (alice, "friday", "What is 6 x 7?")
    # Saved: the question, the tool call, its result, the answer; then compacted to the last two.
    assert [(b.role, b.content) for b in blocks_of("kyoto-trip", archived=True)] == [
        ("user", "What is 6 x 7?"), ("assistant", "Let me compute that."), ("tool", "42"), ("assistant", "6 x 7 = 42")
    ]
    assert [(b.role, b.content) for b in blocks_of("kyoto-trip", archived=False)] == [("tool", "42"), ("assistant", "6 x 7 = 42")]
    assert thread.extra_state["agentscope"]["modules"]["agent"]["name"] == "Friday"
    assert "0 problem(s)" in verify_output()


def test_the_langchain_page_runs(live_server, alice):
    model = FakeMessagesListChatModel(responses=[AIMessage("It ships today."), AIMessage("You are welcome.")])
    run_page("langchain.md", {"url": live_server.url, "api_key": apikey_create(owner=alice).plaintext, "model": model})
    assert [b.content for b in blocks_of("support-42")] == ["My order A-1042 has not arrived.", "Let me look it up."]
    assert [b.content for b in blocks_of("support-43", archived=True)] == [
        "Where is my order?", "It ships today.", "Thank you!", "You are welcome."
    ]
    assert blocks_of("support-43", archived=False) == []
    assert [b.content for b in blocks_of("support-44")] == ["Is the shop open on Sunday?"]
    assert set(Thread.objects.values_list("owner__username", "agent_code").distinct()) == {("alice", "langchain")}


def test_the_langgraph_page_runs(live_server, alice):
    run_page("langgraph.md", {"url": live_server.url, "api_key": apikey_create(owner=alice).plaintext})
    assert Checkpoint.objects.filter(thread__thread_id="day-plan-7").count() == 4
    assert Checkpoint.objects.filter(thread__thread_id="day-plan-8").count() == 4
    # The walking preference stays; the language item was deleted by the last example.
    assert list(StoreItem.objects.values_list("namespace_path", "key", "owner__username")) == [
        ("travel.alice.preferences", "walking", "alice")
    ]
