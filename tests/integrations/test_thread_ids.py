"""Thread ids a LangGraph saver may be given: memoryadmin keeps its own (1 to 64 of
`A-Z a-z 0-9 _ . : @ $ -`, not `search`), sends them safely in URLs, and refuses the
others at once, naming thread_id: never an empty state, never a 404 later on.
"""

from __future__ import annotations

import asyncio

import httpx
import pytest
from langchain_core.messages import HumanMessage
from langgraph.types import Command
from langgraph_sdk import get_sync_client
from langgraph_sdk.errors import BadRequestError
from memoryadmin_client.langgraph import MemoryAdminInvalid, MemoryAdminSaver

from memoryadmin.apikeys import apikey_create
from sessions_app.models import Checkpoint, Thread

from ..sessions_app.test_langgraph_threads import graph_with

pytestmark = pytest.mark.django_db(transaction=True)

# What LangGraph's own savers take but memoryadmin cannot keep. "x\n" is not "x":
# taken, it would be a second thread that looks like the first.
# "." and ".." are path steps that browsers and HTTP clients resolve: refused, as "search" is.
REFUSED = ["user/42", "a b", "ü", "x\n", "a" * 65, ".", ".."]
KEPT = ["a" * 64, "agent:v1@host$1-2_3.4", "..a", ".b."]


class RecordingTransport(httpx.HTTPTransport):
    """httpx's own transport, keeping a note of every request it sends."""

    def __init__(self):
        super().__init__()
        self.sent: list[httpx.Request] = []

    def handle_request(self, request):
        self.sent.append(request)
        return super().handle_request(request)


@pytest.fixture
def key(alice):
    return apikey_create(owner=alice).plaintext


def saver_calls(saver, graph, thread_id: str) -> list:
    """Every way a graph or its owner reaches the saver with this thread id."""
    config = {"configurable": {"thread_id": thread_id}}
    checkpoint_config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": "", "checkpoint_id": "c-1"}}
    checkpoint = {"id": "c-1", "v": 4, "ts": "", "channel_values": {}, "channel_versions": {}, "versions_seen": {}}
    return [
        lambda: saver.get_tuple(config),
        lambda: list(saver.list(config)),
        lambda: saver.put(config, checkpoint, {}, {}),
        lambda: saver.put_writes(checkpoint_config, [("note", 1)], "task-1"),
        lambda: saver.delete_thread(thread_id),
        lambda: saver.copy_thread(thread_id, "fine"),
        lambda: saver.copy_thread("fine", thread_id),
        lambda: saver.prune([thread_id]),
        lambda: graph.invoke({"messages": [HumanMessage("hi")]}, config),
        lambda: graph.get_state(config),
        lambda: asyncio.run(saver.aget_tuple(config)),
    ]


def test_the_saver_refuses_ids_memoryadmin_cannot_keep_before_any_request(live_server, key):
    transport = RecordingTransport()
    saver = MemoryAdminSaver(live_server.url, key, transport=transport)
    graph = graph_with(saver)
    for thread_id in [*REFUSED, "search"]:
        for call in saver_calls(saver, graph, thread_id):
            with pytest.raises(MemoryAdminInvalid) as refused:
                call()
            assert "thread_id" in refused.value.errors, thread_id
            assert "before any request" in str(refused.value)
    assert transport.sent == []
    assert Thread.objects.count() == 0
    saver.close()


def test_ids_with_dots_and_the_longest_id_work_through_the_saver_and_the_sdk(live_server, key):
    saver = MemoryAdminSaver(live_server.url, key)
    client = get_sync_client(url=f"{live_server.url}/api/v1", api_key=key)
    graph = graph_with(saver)
    for thread_id in KEPT:
        config = {"configurable": {"thread_id": thread_id}}
        graph.invoke({"messages": [HumanMessage("Can I get a refund?", id="h-1")]}, config)
        assert graph.get_state(config).next == ("review",)
        assert [t.metadata["step"] for t in saver.list(config)] == [1, 0, -1]
        assert Checkpoint.objects.filter(thread__thread_id=thread_id).count() == 3

        state = client.threads.get_state(thread_id)
        assert state["checkpoint"]["thread_id"] == thread_id and state["next"] == ["review"]
        assert client.threads.get(thread_id)["status"] == "interrupted"
        assert len(client.threads.get_history(thread_id)) == 3
        graph.invoke(Command(resume="yes"), config)
        assert client.threads.get_state(thread_id)["next"] == []
    assert set(Thread.objects.values_list("thread_id", flat=True)) == set(KEPT)
    saver.copy_thread("..a", "copy-of-dots")
    assert Checkpoint.objects.filter(thread__thread_id="copy-of-dots").count() == 4
    saver.delete_thread(".b.")
    assert not Checkpoint.objects.filter(thread__thread_id=".b.").exists()
    client.http.client.close()
    saver.close()


def sdk_calls(client, thread_id: str) -> list:
    """The SDK's thread calls that name a thread."""
    return [
        lambda: client.threads.create(thread_id=thread_id),
        lambda: client.threads.get(thread_id),
        lambda: client.threads.get_state(thread_id),
        lambda: client.threads.get_state(thread_id, checkpoint_id="c-1"),
        lambda: client.threads.get_history(thread_id),
        lambda: client.threads.update_state(thread_id, {"note": "x"}),
        lambda: client.threads.update(thread_id, metadata={"x": 1}),
        lambda: client.threads.copy(thread_id),
        lambda: client.threads.delete(thread_id),
    ]


def test_the_sdk_gets_a_400_naming_thread_id_for_ids_memoryadmin_cannot_keep(live_server, key):
    client = get_sync_client(url=f"{live_server.url}/api/v1", api_key=key)
    for thread_id in REFUSED:
        for call in sdk_calls(client, thread_id):
            with pytest.raises(BadRequestError) as refused:
                call()
            assert "thread_id" in refused.value.body["errors"], thread_id
    assert Thread.objects.count() == 0
    client.http.client.close()
    # The answer is for callers with a key only.
    assert httpx.get(f"{live_server.url}/api/v1/threads/user%2F42/state").status_code == 401


def test_the_client_and_the_server_keep_the_same_ids_and_no_trailing_newline(alice_api):
    from memoryadmin_client import ids

    from sessions_app.threads.models import THREAD_ID_RE

    for candidate in [*REFUSED, *KEPT, "search", "search\n", "searching", "x\r", "\nx", "t-1"]:
        assert bool(THREAD_ID_RE.match(candidate)) == bool(ids.THREAD_ID_RE.match(candidate)), candidate
    refused = alice_api.post("/api/v1/threads", {"thread_id": "x\n"}, format="json")
    assert refused.status_code == 400 and "thread_id" in refused.json()["errors"]
    refused = alice_api.post("/api/v1/threads/t-1/checkpoints", {"checkpoint_id": "c\n", "checkpoint": {}}, format="json")
    assert refused.status_code == 400 and "checkpoint_id" in refused.json()["errors"]
    assert Thread.objects.count() == 0
