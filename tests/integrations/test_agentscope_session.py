"""A real AgentScope ReActAgent kept in memoryadmin through MemoryAdminSession, over HTTP to a live server.

The model is a class of this test (AgentScope's ChatModelBase returning scripted
ChatResponses, one of them a tool call to a registered tool function); the
formatter, memory, toolkit, plan notebook and agent are AgentScope's own.
"""

from __future__ import annotations

import json

import httpx
import pytest
from agentscope.agent import ReActAgent
from agentscope.formatter import OpenAIChatFormatter
from agentscope.message import Msg, TextBlock, ToolUseBlock
from agentscope.model import ChatModelBase, ChatResponse
from agentscope.plan import PlanNotebook, SubTask
from agentscope.tool import Toolkit, ToolResponse
from django.test import Client

from memoryadmin.apikeys import apikey_create
from memoryadmin_client import MemoryAdminForbidden, MemoryAdminPreconditionFailed
from memoryadmin_client.agentscope import MemoryAdminSession, thread_id_for
from sessions_app.models import Thread

from .adapters import blocks_of, row_counts, run_async, verify_output

pytestmark = pytest.mark.django_db(transaction=True)


class ScriptedModel(ChatModelBase):
    """A chat model answering each call with the next scripted ChatResponse; it keeps the prompts it got."""

    def __init__(self, replies: list[ChatResponse]) -> None:
        super().__init__("scripted", stream=False)
        self.replies = list(replies)
        self.prompts: list[list[dict]] = []

    async def __call__(self, messages, tools=None, tool_choice=None, **kwargs) -> ChatResponse:
        self.prompts.append(messages)
        return self.replies.pop(0)


def multiply(a: int, b: int) -> ToolResponse:
    """Multiply two integers.

    Args:
        a (int): the first factor
        b (int): the second factor
    """
    return ToolResponse(content=[TextBlock(type="text", text=str(a * b))])


def text(reply: str) -> ChatResponse:
    return ChatResponse(content=[TextBlock(type="text", text=reply)])


def tool_call() -> ChatResponse:
    return ChatResponse(
        content=[
            TextBlock(type="text", text="Let me compute that."),
            ToolUseBlock(type="tool_use", id="call-1", name="multiply", input={"a": 6, "b": 7}),
        ]
    )


def make_agent(replies: list[ChatResponse], *, name: str = "Friday") -> ReActAgent:
    toolkit = Toolkit()
    toolkit.register_tool_function(multiply)
    toolkit.create_tool_group("travel", description="Trip planning tools", active=False)
    agent = ReActAgent(
        name=name,
        sys_prompt=f"You are {name}, a careful assistant.",
        model=ScriptedModel(replies),
        formatter=OpenAIChatFormatter(),
        toolkit=toolkit,
        plan_notebook=PlanNotebook(),
    )
    agent.set_console_output_enabled(False)
    return agent


async def two_turns(agent: ReActAgent) -> None:
    await agent(Msg("user", "What is 6 x 7?", "user"))
    await agent(Msg("user", "And what did I just ask?", "user"))


def conversation(prompt: list[dict]) -> list[dict]:
    """A formatted prompt without the plan notebook's hint (a user message AgentScope adds to each reasoning step)."""
    return [m for m in prompt if "<system-hint>" not in str(m.get("content"))]


async def memory_of(agent: ReActAgent) -> list:
    """The memory as AgentScope's own state holds it: each Msg's dict with its marks."""
    return agent.memory.state_dict()["content"]


@pytest.fixture
def key_for():
    return lambda user: apikey_create(owner=user).plaintext


@pytest.fixture
def session_for(live_server):
    """A MemoryAdminSession factory; `session_for.clients` are their HTTP clients, closed after the test."""
    clients = []

    def make(key: str, **options) -> MemoryAdminSession:
        session = MemoryAdminSession(live_server.url, key, **options)
        clients.append(session.http)
        return session

    make.clients = clients
    yield make
    for client in clients:
        client.close()


def first_agent() -> ReActAgent:
    return make_agent([tool_call(), text("6 x 7 = 42"), text("You asked what 6 x 7 is.")])


def test_a_react_agent_survives_a_restart(live_server, session_for, key_for, alice):
    session, restart = session_for(key_for(alice)), session_for(key_for(alice))
    agent = first_agent()

    async def run():
        await two_turns(agent)
        agent.toolkit.update_tool_groups(["travel"], active=True)
        await agent.plan_notebook.create_plan(
            name="Kyoto", description="Three days in Kyoto", expected_outcome="An itinerary",
            subtasks=[SubTask(name="Day 1", description="Temples", expected_outcome="A route")],
        )
        await session.save_session_state("kyoto-trip", agent=agent)
        saved = await memory_of(agent)

        # A restart: a new agent, with nothing in memory and other defaults, loads the session.
        restored = make_agent([text("Still 42.")], name="Blank")
        await restart.load_session_state("kyoto-trip", agent=restored)
        return agent, saved, restored

    agent, saved, restored = run_async(run, closing=session_for.clients)

    async def check_and_go_on():
        assert await memory_of(restored) == saved
        assert restored.name == "Friday" and restored._sys_prompt == "You are Friday, a careful assistant."
        assert restored.toolkit.state_dict() == {"active_groups": ["travel"]}
        assert restored.plan_notebook.current_plan == agent.plan_notebook.current_plan
        # The restored agent goes on: its model sees the whole conversation, the tool call and result included.
        await restored(Msg("user", "Is it still 42?", "user"))
        prompt = conversation(restored.model.prompts[-1])
        assert [m["role"] for m in prompt] == ["system", "user", "assistant", "tool", "assistant", "user", "assistant", "user"]
        assert prompt[2]["tool_calls"][0]["function"]["name"] == "multiply" and prompt[3]["content"] == "42"
        await session.save_session_state("kyoto-trip", agent=restored)

    run_async(check_and_go_on, closing=session_for.clients)
    blocks = blocks_of("kyoto-trip")
    assert [(b.role, b.block_type, b.content) for b in blocks] == [
        ("user", "message", "What is 6 x 7?"),
        ("assistant", "tool_call", "Let me compute that."),
        ("tool", "tool_result", "42"),
        ("assistant", "message", "6 x 7 = 42"),
        ("user", "message", "And what did I just ask?"),
        ("assistant", "message", "You asked what 6 x 7 is."),
        ("user", "message", "Is it still 42?"),
        ("assistant", "message", "Still 42."),
    ]
    # The second save appended the new turn: nothing was archived, no seq skipped.
    assert not any(b.archived for b in blocks) and [b.seq for b in blocks] == list(range(1, 9))
    assert blocks[1].message["tool_calls"] == [{"id": "call-1", "name": "multiply", "args": {"a": 6, "b": 7}, "type": "tool_call"}]
    assert blocks[2].message["tool_call_id"] == "call-1"
    thread = Thread.objects.get(thread_id="kyoto-trip")
    assert thread.agent_code == "agentscope" and thread.title == "What is 6 x 7?"
    extra = thread.extra_state["agentscope"]
    assert extra["context_module"] == "agent.memory" and "content" not in extra["modules"]["agent"]["memory"]
    assert extra["modules"]["agent"]["toolkit"] == {"active_groups": ["travel"]}
    assert extra["modules"]["agent"]["plan_notebook"]["current_plan"]["name"] == "Kyoto"


def test_the_conversation_is_browsable(live_server, session_for, key_for, alice):
    key = key_for(alice)
    session = session_for(key)
    agent = first_agent()

    async def run():
        await two_turns(agent)
        await session.save_session_state("browse-me", agent=agent)

    run_async(run, closing=session_for.clients)
    listed = httpx.get(f"{live_server.url}/api/v1/threads/browse-me/messages", headers={"Authorization": f"Bearer {key}"})
    assert listed.status_code == 200
    assert [(m["role"], m["content"]) for m in listed.json()["results"]] == [
        ("user", "What is 6 x 7?"),
        ("assistant", "Let me compute that."),
        ("assistant", "6 x 7 = 42"),
        ("user", "And what did I just ask?"),
        ("assistant", "You asked what 6 x 7 is."),
    ]
    browser = Client()
    browser.force_login(alice)
    page = browser.get("/threads/browse-me/")
    html = page.content.decode()
    assert page.status_code == 200
    for shown in ("What is 6 x 7?", "Let me compute that.", "→ multiply", "result of", "6 x 7 = 42", "Friday"):
        assert shown in html, shown


def test_a_compaction_is_archived_and_nothing_is_lost(live_server, session_for, key_for, alice):
    session = session_for(key_for(alice))
    agent = first_agent()

    async def run():
        await two_turns(agent)
        await session.save_session_state("compact-me", agent=agent)
        # Keep the last two messages only, as an agent compacting its context does.
        kept = (await agent.memory.get_memory())[-2:]
        await agent.memory.delete([m.id for m in (await agent.memory.get_memory())[:-2]])
        await session.save_session_state("compact-me", agent=agent)
        shortened = await memory_of(agent)
        restored = make_agent([])
        await session.load_session_state("compact-me", agent=restored)
        assert await memory_of(restored) == shortened and len(kept) == 2
        await agent.memory.clear()
        await session.save_session_state("compact-me", agent=agent)
        emptied = make_agent([])
        await session.load_session_state("compact-me", agent=emptied)
        assert await memory_of(emptied) == []
        assert emptied.name == "Friday"

    run_async(run, closing=session_for.clients)
    archived = blocks_of("compact-me", archived=True)
    # The first rewrite archived the 6 messages, the clear the 2 kept: 8 blocks, all there.
    assert len(archived) == 8 and blocks_of("compact-me", archived=False) == []
    assert [b.content for b in archived[:6]] == [
        "What is 6 x 7?", "Let me compute that.", "42", "6 x 7 = 42", "And what did I just ask?", "You asked what 6 x 7 is."
    ]
    assert [b.content for b in archived[6:]] == ["And what did I just ask?", "You asked what 6 x 7 is."]
    assert sorted({b.archived_by for b in archived}) == [1, 2]
    thread = Thread.objects.get(thread_id="compact-me")
    assert (thread.active_count, thread.archived_count, thread.rewrite_count) == (0, 8, 2)
    assert "0 problem(s)" in verify_output()


class Recording(httpx.AsyncHTTPTransport):
    """A real transport that records each request's method, path and JSON body."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[tuple[str, str, object]] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else None
        self.sent.append((request.method, request.url.path.rsplit("/", 1)[-1], body))
        return await super().handle_async_request(request)


def test_later_turns_send_only_their_new_messages(live_server, session_for, key_for, alice):
    transport = Recording()
    session = session_for(key_for(alice), async_transport=transport)
    agent = make_agent([tool_call(), text("6 x 7 = 42"), text("You asked what 6 x 7 is."), text("Still 42.")])

    async def run():
        await agent(Msg("user", "What is 6 x 7?", "user"))
        await session.save_session_state("appends", agent=agent)
        await agent(Msg("user", "And what did I just ask?", "user"))
        await session.save_session_state("appends", agent=agent)
        await agent(Msg("user", "Again?", "user"))
        await session.save_session_state("appends", agent=agent)
        # Compacted: the memory no longer starts with what was saved, so the whole context goes.
        await agent.memory.delete([m.id for m in (await agent.memory.get_memory())[:-2]])
        await session.save_session_state("appends", agent=agent)

    run_async(run, closing=session_for.clients)
    assert [(method, last) for method, last, _ in transport.sent] == [
        ("PUT", "agent-state"), ("POST", "append"), ("POST", "append"), ("PUT", "agent-state")
    ]
    assert [m["content"] for m in transport.sent[1][2]["messages"]] == ["And what did I just ask?", "You asked what 6 x 7 is."]
    assert [m["content"] for m in transport.sent[2][2]["messages"]] == ["Again?", "Still 42."]
    assert "head" in transport.sent[1][2] and "agentscope" in transport.sent[2][2]["extra_state"]
    assert len(blocks_of("appends", archived=True)) == 8 and len(blocks_of("appends", archived=False)) == 2
    assert "0 problem(s)" in verify_output()


def test_another_members_key_is_refused_and_nothing_is_written(live_server, session_for, key_for, alice, bob):
    owner, intruder = session_for(key_for(alice)), session_for(key_for(bob))
    agent = first_agent()

    async def save():
        await two_turns(agent)
        await owner.save_session_state("alices-session", agent=agent)

    run_async(save, closing=session_for.clients)
    before, counts = Thread.objects.get(thread_id="alices-session").extra_state, row_counts()

    async def intrude():
        await agent.memory.clear()
        with pytest.raises(MemoryAdminForbidden):
            await intruder.save_session_state("alices-session", agent=agent)
        with pytest.raises(MemoryAdminForbidden):
            await intruder.load_session_state("alices-session", agent=make_agent([]))

    run_async(intrude, closing=session_for.clients)
    assert row_counts() == counts
    assert Thread.objects.get(thread_id="alices-session").extra_state == before
    assert len(blocks_of("alices-session", archived=False)) == 6


def test_modules_saved_one_by_one_load_one_by_one(live_server, session_for, key_for, alice):
    session = session_for(key_for(alice))
    agent = first_agent()
    restored = make_agent([])

    async def run():
        await two_turns(agent)
        await agent.plan_notebook.create_plan(
            name="Osaka", description="A day in Osaka", expected_outcome="A route",
            subtasks=[SubTask(name="Morning", description="Castle", expected_outcome="Tickets")],
        )
        await session.save_session_state("by-module", memory=agent.memory, plan=agent.plan_notebook)
        await session.load_session_state("by-module", memory=restored.memory, plan=restored.plan_notebook)
        assert await memory_of(restored) == await memory_of(agent)
        assert restored.plan_notebook.current_plan == agent.plan_notebook.current_plan

    run_async(run, closing=session_for.clients)
    extra = Thread.objects.get(thread_id="by-module").extra_state["agentscope"]
    assert extra["context_module"] == "memory" and set(extra["modules"]) == {"memory", "plan"}
    assert extra["modules"]["memory"] == {"_compressed_summary": ""}
    assert len(blocks_of("by-module")) == 6


def test_a_missing_session_loads_nothing_or_is_a_value_error(live_server, session_for, key_for, alice):
    session = session_for(key_for(alice))
    agent = make_agent([])

    async def run():
        await session.load_session_state("never-saved", agent=agent)
        assert await memory_of(agent) == [] and agent.name == "Friday"
        with pytest.raises(ValueError, match="never-saved"):
            await session.load_session_state("never-saved", allow_not_exist=False, agent=agent)

    run_async(run, closing=session_for.clients)
    assert row_counts() == (0, 0)


def test_any_session_id_maps_to_one_valid_thread(live_server, session_for, key_for, alice):
    assert thread_id_for(session_id="trip-42") == "trip-42"
    assert thread_id_for(session_id="trip-42", user_id="alice") == "alice:trip-42"
    odd = thread_id_for(session_id="会话 #1/" + "x" * 80, user_id="user@example.com")
    assert odd.startswith("user@example.com:----1-xxx") and len(odd) <= 64
    # Distinct pairs stay distinct, even when their joined forms read the same.
    assert thread_id_for(session_id="c", user_id="a:b") != thread_id_for(session_id="b:c", user_id="a")
    assert thread_id_for(session_id="search") != "search"
    agent = first_agent()
    session = session_for(key_for(alice))

    async def run():
        await two_turns(agent)
        await session.save_session_state("会话 #1/" + "x" * 80, user_id="user@example.com", agent=agent)
        restored = make_agent([])
        await session.load_session_state("会话 #1/" + "x" * 80, user_id="user@example.com", agent=restored)
        assert await memory_of(restored) == await memory_of(agent)

    run_async(run, closing=session_for.clients)
    assert Thread.objects.get().thread_id == odd


def test_an_optimistic_session_refuses_to_overwrite_a_newer_save(live_server, session_for, key_for, alice):
    key = key_for(alice)
    plain, first, second = session_for(key), session_for(key, optimistic=True), session_for(key, optimistic=True)
    agent = first_agent()
    one, other = make_agent([text("one")]), make_agent([text("other"), text("other, again")])

    async def race():
        await two_turns(agent)
        await plain.save_session_state("replicas", agent=agent)
        await first.load_session_state("replicas", agent=one)
        await second.load_session_state("replicas", agent=other)
        await one(Msg("user", "Replica one speaks", "user"))
        await first.save_session_state("replicas", agent=one)
        await other(Msg("user", "Replica two speaks", "user"))

    run_async(race, closing=session_for.clients)
    counts = row_counts()

    async def stale_save():
        with pytest.raises(MemoryAdminPreconditionFailed):
            await second.save_session_state("replicas", agent=other)

    run_async(stale_save, closing=session_for.clients)
    assert row_counts() == counts

    async def reload_and_save():
        # Loading again brings the newer state; the next save goes through.
        await second.load_session_state("replicas", agent=other)
        await other(Msg("user", "Replica two, again", "user"))
        await second.save_session_state("replicas", agent=other)

    run_async(reload_and_save, closing=session_for.clients)
    assert [b.content for b in blocks_of("replicas", archived=False)][6:] == [
        "Replica one speaks", "one", "Replica two, again", "other, again"
    ]
    assert blocks_of("replicas", archived=True) == []


def test_a_thread_written_by_another_client_loads_into_an_agent(live_server, session_for, key_for, alice):
    key = key_for(alice)
    context = [
        {"role": "user", "content": "What is 6 x 7?"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "multiply", "args": {"a": 6, "b": 7}}]},
        {"role": "tool", "content": "42", "tool_call_id": "c1", "name": "multiply"},
        {"role": "assistant", "content": "It is 42."},
    ]
    saved = httpx.put(
        f"{live_server.url}/api/v1/threads/written-by-curl/agent-state",
        headers={"Authorization": f"Bearer {key}"},
        json={"agent_code": "planner", "context": context, "extra_state": {"plan": {"days": 3}}},
    )
    assert saved.status_code == 200
    agent = make_agent([text("Yes, 42.")])
    session = session_for(key)

    async def run():
        await session.load_session_state("written-by-curl", agent=agent)
        await agent(Msg("user", "Sure?", "user"))

    run_async(run, closing=session_for.clients)
    prompt = conversation(agent.model.prompts[-1])
    assert [m["role"] for m in prompt] == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert prompt[2]["tool_calls"][0]["id"] == "c1" and prompt[3] == {"role": "tool", "tool_call_id": "c1", "content": "42", "name": "multiply"}


class LoseFirstSaveAnswer(httpx.AsyncHTTPTransport):
    """A real transport that carries the first save to the server, then drops its answer, as a broken connection does."""

    def __init__(self) -> None:
        super().__init__()
        self.lost = False
        self.answers: list[tuple[str, int]] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await super().handle_async_request(request)
        self.answers.append((request.method, response.status_code))
        if request.method in ("PUT", "POST") and not self.lost:
            self.lost = True
            await response.aread()
            raise httpx.ReadError("connection dropped before the answer", request=request)
        return response


def test_an_optimistic_save_whose_answer_was_lost_is_done(live_server, session_for, key_for, alice):
    transport = LoseFirstSaveAnswer()
    key = key_for(alice)
    plain, optimistic = session_for(key), session_for(key, optimistic=True, async_transport=transport)
    agent = make_agent([tool_call(), text("6 x 7 = 42"), text("You asked what 6 x 7 is."), text("Once more: 42.")])

    async def run():
        await two_turns(agent)
        await plain.save_session_state("lost-answer", agent=agent)
        await optimistic.load_session_state("lost-answer", agent=agent)
        await agent(Msg("user", "Once more", "user"))
        # Retried after the lost answer, the save meets its own ETag change (412) and finds itself saved.
        await optimistic.save_session_state("lost-answer", agent=agent)
        return await memory_of(agent)

    memory = run_async(run, closing=session_for.clients)
    # The third turn goes as an append of the new messages only.
    assert transport.answers == [("GET", 200), ("POST", 200), ("POST", 412), ("GET", 200)]
    assert len(blocks_of("lost-answer", archived=False)) == len(memory) == 8
    assert blocks_of("lost-answer", archived=True) == []
