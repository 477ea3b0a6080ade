"""LangChain's chat history kept in memoryadmin (MemoryAdminChatMessageHistory), over HTTP to a live server.

Runnables are LangChain's own (a prompt, `FakeMessagesListChatModel` with
scripted replies, `RunnableWithMessageHistory`); every request reaches the
live server.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from django.db import connection
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import RunnableLambda
from langchain_core.runnables.history import RunnableWithMessageHistory

from memoryadmin.apikeys import apikey_create
from memoryadmin_client import HTTPClient, MemoryAdminForbidden
from memoryadmin_client.langchain import MemoryAdminChatMessageHistory
from sessions_app.models import Thread

from ..conftest import IS_POSTGRES, make_user
from .adapters import blocks_of, row_counts, run_async, verify_output

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.filterwarnings("ignore:RunnableWithMessageHistory is deprecated"),
]


@pytest.fixture
def key_for():
    return lambda user: apikey_create(owner=user).plaintext


@pytest.fixture
def history_for(live_server):
    """A history factory; each history's connections are closed after the test."""
    made = []

    def make(key: str, thread_id: str, **options) -> MemoryAdminChatMessageHistory:
        made.append(MemoryAdminChatMessageHistory(live_server.url, key, thread_id, **options))
        return made[-1]

    # The async tests close each event loop's connections at its end (run_async's `closing`).
    make.made = made
    yield make
    for history in made:
        history.close()


def conversation() -> list:
    return [
        SystemMessage("You are a travel agent."),
        HumanMessage("What is 6 x 7?", id="h-1"),
        AIMessage(
            "",
            id="ai-1",
            tool_calls=[{"name": "multiply", "args": {"a": 6, "b": 7}, "id": "call-1"}],
            usage_metadata={"input_tokens": 12, "output_tokens": 3, "total_tokens": 15},
            response_metadata={"model_name": "scripted"},
        ),
        ToolMessage("42", tool_call_id="call-1", name="multiply", artifact={"raw": 42}),
        AIMessage([{"type": "text", "text": "6 x 7 = 42"}], id="ai-2"),
    ]


def test_messages_round_trip_and_are_stored_readable(history_for, key_for, alice):
    key = key_for(alice)
    history_for(key, "lc-round-trip").add_messages(conversation())
    assert history_for(key, "lc-round-trip").messages == conversation()
    blocks = blocks_of("lc-round-trip")
    assert [(b.role, b.block_type, b.content) for b in blocks] == [
        ("system", "message", "You are a travel agent."),
        ("user", "message", "What is 6 x 7?"),
        ("assistant", "tool_call", ""),
        ("tool", "tool_result", "42"),
        ("assistant", "message", "6 x 7 = 42"),
    ]
    assert blocks[2].message["tool_calls"] == [{"name": "multiply", "args": {"a": 6, "b": 7}, "id": "call-1", "type": "tool_call"}]
    assert blocks[3].message["tool_call_id"] == "call-1"
    assert Thread.objects.get(thread_id="lc-round-trip").agent_code == "langchain"


def test_the_async_methods_round_trip(history_for, key_for, alice):
    history = history_for(key_for(alice), "lc-async")

    async def run():
        await history.aadd_messages(conversation()[:2])
        await history.aadd_messages(conversation()[2:])
        read = await history.aget_messages()
        await history.aclear()
        return read, await history.aget_messages()

    read, after_clear = run_async(run, closing=LiveHistories(history_for))
    assert read == conversation() and after_clear == []
    assert len(blocks_of("lc-async", archived=True)) == 5


def chat_chain(history_for, key: str, replies: list[str]):
    """A prompt with the history in it, a scripted chat model, kept by RunnableWithMessageHistory in memoryadmin."""
    seen: list[list] = []

    def record(prompt_value):
        seen.append(prompt_value.to_messages())
        return prompt_value

    prompt = ChatPromptTemplate.from_messages(
        [("system", "You answer briefly."), MessagesPlaceholder("history"), ("human", "{question}")]
    )
    model = FakeMessagesListChatModel(responses=[AIMessage(reply) for reply in replies])
    chain = RunnableWithMessageHistory(
        prompt | RunnableLambda(record) | model,
        lambda session_id: history_for(key, session_id),
        input_messages_key="question",
        history_messages_key="history",
    )
    return chain, seen


def test_runnable_with_message_history_keeps_a_session_in_memoryadmin(history_for, key_for, alice):
    key = key_for(alice)
    chain, seen = chat_chain(history_for, key, ["Kyoto has many temples.", "You asked about Kyoto."])
    config = {"configurable": {"session_id": "lc-session-1"}}
    assert chain.invoke({"question": "Tell me about Kyoto."}, config).content == "Kyoto has many temples."
    assert chain.invoke({"question": "What did I ask?"}, config).content == "You asked about Kyoto."
    # The second call's prompt held the first exchange, read back from the server.
    assert [m.content for m in seen[1]] == [
        "You answer briefly.", "Tell me about Kyoto.", "Kyoto has many temples.", "What did I ask?"
    ]
    assert [(m.type, m.content) for m in history_for(key, "lc-session-1").messages] == [
        ("human", "Tell me about Kyoto."),
        ("ai", "Kyoto has many temples."),
        ("human", "What did I ask?"),
        ("ai", "You asked about Kyoto."),
    ]
    # Each exchange was appended: nothing archived, seq numbers in order.
    assert [b.seq for b in blocks_of("lc-session-1", archived=False)] == [1, 2, 3, 4]


def test_runnable_with_message_history_async(history_for, key_for, alice):
    key = key_for(alice)
    chain, seen = chat_chain(history_for, key, ["Osaka is lively.", "Osaka."])
    config = {"configurable": {"session_id": "lc-session-async"}}

    async def run():
        await chain.ainvoke({"question": "And Osaka?"}, config)
        return (await chain.ainvoke({"question": "Which city?"}, config)).content

    assert run_async(run, closing=LiveHistories(history_for)) == "Osaka."
    assert [m.content for m in seen[1]][1:3] == ["And Osaka?", "Osaka is lively."]
    assert [b.content for b in blocks_of("lc-session-async")] == ["And Osaka?", "Osaka is lively.", "Which city?", "Osaka."]


def test_clear_archives_and_deletes_nothing(history_for, key_for, alice):
    history = history_for(key_for(alice), "lc-clear")
    history.add_messages(conversation())
    history.clear()
    assert history.messages == []
    assert len(blocks_of("lc-clear", archived=True)) == 5 and blocks_of("lc-clear", archived=False) == []
    history.add_messages([HumanMessage("Starting over")])
    assert [m.content for m in history.messages] == ["Starting over"]
    thread = Thread.objects.get(thread_id="lc-clear")
    assert (thread.active_count, thread.archived_count) == (1, 5)
    # Clearing a history whose thread does not exist creates nothing.
    counts = row_counts()
    history_for(key_for(alice), "lc-never-written").clear()
    assert row_counts() == counts
    assert "0 problem(s)" in verify_output()


def test_an_admin_clears_another_users_history(history_for, key_for, alice):
    history_for(key_for(alice), "lc-admin-clear").add_messages(conversation())
    admin = make_user("root", "admin")
    history_for(key_for(admin), "lc-admin-clear").clear()
    assert len(blocks_of("lc-admin-clear", archived=True)) == 5
    assert history_for(key_for(alice), "lc-admin-clear").messages == []


def test_another_members_key_is_refused_and_nothing_is_written(history_for, key_for, alice, bob):
    history_for(key_for(alice), "lc-alices").add_messages(conversation())
    counts = row_counts()
    intruder = history_for(key_for(bob), "lc-alices")
    with pytest.raises(MemoryAdminForbidden):
        intruder.messages
    with pytest.raises(MemoryAdminForbidden):
        intruder.add_messages([HumanMessage("let me in")])
    with pytest.raises(MemoryAdminForbidden):
        intruder.clear()
    assert row_counts() == counts
    assert len(blocks_of("lc-alices", archived=False)) == 5


class LiveHistories:
    """The HTTP clients of the histories a factory made, read when the loop ends (a chain makes them as it runs)."""

    def __init__(self, factory) -> None:
        self.factory = factory

    def __iter__(self):
        return iter([history.http for history in self.factory.made])


class WriteFirst(httpx.HTTPTransport):
    """A real transport that, just before the first save it carries, lets another writer save first."""

    def __init__(self, other_write) -> None:
        super().__init__()
        self.other_write = other_write
        self.answers: list[tuple[str, int]] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.method == "POST" and self.other_write is not None:
            other_write, self.other_write = self.other_write, None
            other_write()
        response = super().handle_request(request)
        self.answers.append((request.method, response.status_code))
        return response


def test_two_writers_never_lose_a_message(history_for, key_for, alice):
    key = key_for(alice)
    history_for(key, "lc-race").add_messages([HumanMessage("first")])
    other = history_for(key, "lc-race")
    transport = WriteFirst(lambda: other.add_messages([AIMessage("from the other writer")]))
    late = history_for(key, "lc-race", transport=transport)
    assert [m.content for m in late.messages] == ["first"]
    # `late` read the thread, then the other writer appended before `late`'s append: the head
    # `late` saw moved, so a 412, a read, and the append after the new head.
    late.add_messages([HumanMessage("from the late writer")])
    assert transport.answers == [("GET", 200), ("POST", 412), ("GET", 200), ("POST", 200)]
    assert [m.content for m in history_for(key, "lc-race").messages] == [
        "first", "from the other writer", "from the late writer"
    ]
    assert blocks_of("lc-race", archived=True) == []


def test_two_first_writers_of_a_new_thread_lose_nothing(history_for, key_for, alice):
    key = key_for(alice)
    other = history_for(key, "lc-new-race")
    transport = WriteFirst(lambda: other.add_messages([HumanMessage("other first")]))
    late = history_for(key, "lc-new-race", transport=transport)
    late.add_messages([HumanMessage("late first")])
    # No thread yet: the first append says If-None-Match: *, the other writer made the thread
    # first, so a 412, a read, and the append after its head.
    assert transport.answers == [("POST", 412), ("GET", 200), ("POST", 200)]
    assert [m.content for m in history_for(key, "lc-new-race").messages] == ["other first", "late first"]
    assert blocks_of("lc-new-race", archived=True) == []


class LoseFirstSaveAnswer(httpx.HTTPTransport):
    """A real transport that carries the first save to the server, then drops its answer, as a broken connection does."""

    def __init__(self) -> None:
        super().__init__()
        self.lost = False
        self.answers: list[tuple[str, int]] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        self.answers.append((request.method, response.status_code))
        if request.method == "POST" and not self.lost:
            self.lost = True
            response.read()
            raise httpx.ReadError("connection dropped before the answer", request=request)
        return response


def test_a_save_whose_answer_was_lost_is_not_written_twice(history_for, key_for, alice):
    key = key_for(alice)
    history_for(key, "lc-lost").add_messages([HumanMessage("hello")])
    transport = LoseFirstSaveAnswer()
    history = history_for(key, "lc-lost", transport=transport)
    assert [m.content for m in history.messages] == ["hello"]
    history.add_messages([AIMessage("written once")])
    # The append landed; its retry found the head moved (412) and the append already there.
    assert transport.answers == [("GET", 200), ("POST", 200), ("POST", 412), ("GET", 200)]
    assert [m.content for m in history_for(key, "lc-lost").messages] == ["hello", "written once"]


@pytest.mark.postgres
@pytest.mark.skipif(not IS_POSTGRES, reason="parallel transactions need PostgreSQL")
def test_parallel_writers_never_lose_a_message(live_server, key_for, alice):
    key = key_for(alice)
    writers, each = 4, 3
    barrier = threading.Barrier(writers)
    client = HTTPClient(live_server.url, key)

    def write(number: int) -> None:
        history = MemoryAdminChatMessageHistory(live_server.url, key, "lc-parallel", client=client, attempts=50)
        barrier.wait()
        for turn in range(each):
            history.add_messages([HumanMessage(f"writer {number} turn {turn}")])
        connection.close()

    with ThreadPoolExecutor(max_workers=writers) as pool:
        for future in [pool.submit(write, n) for n in range(writers)]:
            future.result()
    client.close()
    contents = [b.content for b in blocks_of("lc-parallel", archived=False)]
    assert sorted(contents) == sorted(f"writer {n} turn {t}" for n in range(writers) for t in range(each))
    assert blocks_of("lc-parallel", archived=True) == []
