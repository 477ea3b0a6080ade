"""The conversation-state calls the adapters share: what they send, and what they refuse before sending.

Answers come from `httpx.MockTransport`; the calls against a live memoryadmin
(races, lost answers, ownership) are tested in the server's suite
(tests/integrations/test_langchain_history.py, test_agentscope_session.py).
"""

from __future__ import annotations

import json

import httpx
import pytest

from memoryadmin_client import HTTPClient, MemoryAdminPreconditionFailed
from memoryadmin_client.agent_state import AgentStateAPI, thread_id_validate

STATE = {"thread_id": "t-1", "agent_code": "bot", "context": [{"role": "user", "content": "hi"}], "extra_state": None}


def api_answering(*answers: tuple[int, object, dict]) -> tuple[AgentStateAPI, list[httpx.Request]]:
    seen: list[httpx.Request] = []
    queue = list(answers)

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        code, body, headers = queue.pop(0)
        return httpx.Response(code, json=body, headers=headers)

    http = HTTPClient("http://memoryadmin.test", "ma_key", transport=httpx.MockTransport(answer), retry=None)
    return AgentStateAPI(http=http, attempts=2), seen


@pytest.mark.parametrize("thread_id", ["", "search", "x" * 65, "a/b", "会话", None])
def test_a_thread_id_the_server_would_refuse_is_refused_before_sending(thread_id):
    api, seen = api_answering()
    with pytest.raises(ValueError, match="1 to 64 characters"):
        api.load(thread_id=thread_id)
    assert seen == []


def test_valid_thread_ids_pass():
    assert thread_id_validate(thread_id="a.b:c@d$e-f_9") == "a.b:c@d$e-f_9"


def test_append_sends_only_the_new_messages_after_the_head_it_saw():
    saved = {"thread_id": "t-1", "mode": "append", "appended": 1, "archived": 0, "active": 2, "max_seq": 2, "head": "h2"}
    api, seen = api_answering((200, {**STATE, "head": "h1"}, {"ETag": '"v1"'}), (200, saved, {"ETag": '"v2"'}))
    api.load(thread_id="t-1")
    result = api.append(thread_id="t-1", agent_code="bot", messages=[{"role": "assistant", "content": "hello"}])
    assert (result.mode, result.etag, result.head) == ("append", '"v2"', "h2")
    post = seen[1]
    assert (post.method, post.url.path) == ("POST", "/api/v1/threads/t-1/agent-state/append")
    assert json.loads(post.content) == {"agent_code": "bot", "messages": [{"role": "assistant", "content": "hello"}], "head": "h1"}
    # The next append continues from the head of that answer, with no read.
    api_next, seen_next = api_answering((200, {**saved, "appended": 1, "active": 3, "head": "h3"}, {}))
    api_next._heads = dict(api._heads)
    api_next.append(thread_id="t-1", agent_code="bot", messages=[{"role": "user", "content": "more"}])
    assert json.loads(seen_next[0].content)["head"] == "h2"


def test_a_thread_never_seen_is_appended_to_as_new_then_after_the_head_read():
    refused = (412, {"code": "precondition_failed", "detail": "exists"}, {})
    saved = {"thread_id": "t-1", "mode": "append", "appended": 1, "archived": 0, "active": 2, "max_seq": 2, "head": "h2"}
    api, seen = api_answering(refused, (200, {**STATE, "head": "h1"}, {"ETag": '"v1"'}), (200, saved, {}))
    api.append(thread_id="t-1", agent_code="bot", messages=[{"role": "assistant", "content": "hello"}])
    assert [r.method for r in seen] == ["POST", "GET", "POST"]
    assert seen[0].headers["If-None-Match"] == "*" and "head" not in json.loads(seen[0].content)
    assert json.loads(seen[2].content)["head"] == "h1"


def test_an_append_needs_a_guard():
    from memoryadmin_client.agent_state import append_call

    with pytest.raises(ValueError, match="guard"):
        append_call(thread_id="t-1", agent_code="bot", messages=[])


def test_append_gives_up_after_its_attempts():
    refused = (412, {"code": "precondition_failed", "detail": "changed"}, {})
    moved = {**STATE, "context": [{"role": "user", "content": "someone else"}], "head": "h9"}
    api, seen = api_answering(
        (200, {**STATE, "head": "h1"}, {"ETag": '"v1"'}), refused, (200, moved, {"ETag": '"v2"'}),
        refused, (200, moved, {"ETag": '"v3"'}),
    )
    api.load(thread_id="t-1")
    with pytest.raises(MemoryAdminPreconditionFailed):
        api.append(thread_id="t-1", agent_code="bot", messages=[{"role": "assistant", "content": "hello"}])
    assert [r.method for r in seen] == ["GET", "POST", "GET", "POST", "GET"]
