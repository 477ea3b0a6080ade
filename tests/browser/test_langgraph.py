"""A LangGraph agent's thread in a real browser: the prebuilt ReAct agent, paused before its
tools, checkpointed through `MemoryAdminSaver`; an operator finds it by its status, reads its
conversation and opens the checkpoint it waits at; resumed, it reads idle."""

from __future__ import annotations

import re
import warnings

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from playwright.sync_api import expect

from memoryadmin.apikeys import apikey_create
from memoryadmin_client.langgraph import MemoryAdminSaver

from ..conftest import make_user
from .conftest import shot, sign_in

pytestmark = pytest.mark.django_db(transaction=True)

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from langgraph.prebuilt import create_react_agent

HOSTILE = '<img src=x onerror="document.body.dataset.owned=1">'


class ToolCallingFake(GenericFakeChatModel):
    """langchain_core's fake chat model answering from a script; tools are accepted and ignored."""

    def bind_tools(self, tools, **kwargs):
        return self


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"Sunny in {city}, 24 degrees. {HOSTILE}"


@pytest.fixture
def paused_agent(live_server):
    """A ReAct agent's thread, paused before its tools; resumes it when called."""
    alice = make_user("alice", password="memoryadmin")
    make_user("operator", "operator", password="memoryadmin")
    script = iter([
        AIMessage("", id="ai-1", tool_calls=[{"name": "weather", "args": {"city": "Lisbon"}, "id": "call-1"}]),
        AIMessage("Lisbon is sunny, 24 degrees.", id="ai-2"),
    ])
    saver = MemoryAdminSaver(live_server.url, apikey_create(owner=alice).plaintext)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph = create_react_agent(ToolCallingFake(messages=script), [weather], checkpointer=saver, interrupt_before=["tools"])
    config = {"configurable": {"thread_id": "lisbon-weather"}}
    graph.invoke({"messages": [("user", "What is the weather in Lisbon?")]}, config)
    assert graph.get_state(config).next == ("tools",)
    yield lambda: graph.invoke(None, config)
    saver.close()


def test_an_operator_finds_a_paused_agent_and_reads_its_conversation(page, live_server, paused_agent):
    sign_in(page, live_server, "operator")
    page.select_option("select[name=status]", "interrupted")
    page.wait_for_url(re.compile(r"status=interrupted"))
    expect(page.locator("[data-total]")).to_have_text("1 thread match this filter")
    row = page.locator("#thread-table tbody tr")
    expect(row).to_contain_text("What is the weather in Lisbon?")  # the title, from the first human message
    expect(row).to_contain_text("langgraph")

    page.click("text=lisbon-weather")
    page.wait_for_selector("h1:has-text('lisbon-weather')")
    expect(page.locator("[data-thread-status]")).to_have_text("interrupted")
    expect(page.locator(".block")).to_have_count(2)  # the question, the call to the tool
    expect(page.locator(".tool-call .tool-name")).to_contain_text("→ weather")
    expect(page.locator(".tool-call [data-waiting]")).to_have_text("no result yet")  # paused before the tool ran
    expect(page.locator("#checkpoint-branches")).to_contain_text("checkpoints")
    shot(page, "thread-langgraph-paused")

    page.click("[data-thread-status]")
    page.wait_for_url(re.compile(r"/threads/lisbon-weather/checkpoints/"))
    # The latest checkpoint waits at the tools node.
    expect(page.locator(".cp-nodes").first).to_have_text("agent → tools")

    paused_agent()  # an operator's "continue": the tool runs, the model answers
    page.goto(f"{live_server.url}/threads/lisbon-weather/")
    expect(page.locator("[data-thread-status]")).to_have_text("idle")
    expect(page.locator(".block")).to_have_count(4)
    expect(page.locator(".tool-call a[data-link=result]")).to_have_text("result ↓")
    expect(page.locator("[data-waiting]")).to_have_count(0)
    tool_result = page.locator(".block", has_text="Sunny in Lisbon")
    expect(tool_result).to_contain_text(HOSTILE)  # the tool's output is text on the page
    assert page.locator(".block img").count() == 0
    assert page.evaluate("document.body.dataset.owned") is None
    assert page.errors == []
