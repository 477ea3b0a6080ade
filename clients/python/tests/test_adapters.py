"""The saver and the store send through the one HTTP layer: its key, its retries, its errors.

Answers come from `httpx.MockTransport` (httpx's in-process transport). What the
adapters do against a live memoryadmin is tested in the server's suite
(tests/integrations: real graphs, LangGraph's conformance suite).
"""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from langgraph.store.base import GetOp, PutOp

from memoryadmin_client.langgraph import (
    MemoryAdminForbidden,
    MemoryAdminSaver,
    MemoryAdminStore,
    MemoryAdminThrottled,
    StoreForbiddenError,
    StoreInvalidError,
)

ITEM = {
    "namespace": ["users", "alice"],
    "key": "tea",
    "value": {"text": "likes green tea"},
    "created_at": "2026-01-02T03:04:05Z",
    "updated_at": "2026-01-02T03:04:05Z",
}
CHECKPOINT = {"v": 4, "id": "c-1", "ts": "2026-01-01T00:00:00+00:00", "channel_values": {}, "channel_versions": {}, "versions_seen": {}}


class Answers:
    """Answers each request with the next of `answers` (status, JSON body, headers); the last one repeats."""

    def __init__(self, *answers: tuple[int, object, dict]) -> None:
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        code, body, headers = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if code == 204:
            return httpx.Response(204, headers=headers)
        return httpx.Response(code, json=body, headers=headers)


def store_with(answers: Answers) -> MemoryAdminStore:
    transport = httpx.MockTransport(answers)
    return MemoryAdminStore("http://memoryadmin.test", "ma_key", transport=transport, async_transport=transport)


def saver_with(answers: Answers) -> MemoryAdminSaver:
    transport = httpx.MockTransport(answers)
    return MemoryAdminSaver("http://memoryadmin.test", "ma_key", transport=transport, async_transport=transport)


def results(*answers) -> dict:
    return {"results": [{"result": answer} for answer in answers]}


def test_the_store_retries_a_503_and_reads_the_item():
    answers = Answers((503, {"code": "unavailable"}, {}), (200, results(ITEM), {}))
    item = store_with(answers).get(("users", "alice"), "tea")
    assert item.value == {"text": "likes green tea"} and item.namespace == ("users", "alice")
    assert item.created_at.tzinfo is not None
    assert len(answers.requests) == 2
    assert all(r.headers["authorization"] == "Bearer ma_key" for r in answers.requests)
    assert answers.requests[0].url.path == "/api/v1/store/batch"
    assert json.loads(answers.requests[0].content) == {
        "ops": [{"op": "get", "namespace": ["users", "alice"], "key": "tea", "refresh_ttl": True}],
        # One operation goes not atomic: a refusal then names its own fields.
        "atomic": False,
    }


def test_the_store_raises_the_one_hierarchy():
    store = store_with(Answers((403, {"code": "permission_denied", "detail": "Not yours."}, {})))
    with pytest.raises(StoreForbiddenError) as caught:
        store.put(("users", "bob"), "pin", {"pin": "0000"})
    assert isinstance(caught.value, MemoryAdminForbidden) and isinstance(caught.value, PermissionError)
    invalid = store_with(Answers((400, {"code": "invalid", "errors": {"filter": ["bad"]}}, {})))
    with pytest.raises(StoreInvalidError) as refused:
        invalid.search(("users",), filter={"pin": {"$regex": "1"}})
    assert "filter" in refused.value.errors and isinstance(refused.value, ValueError)


def test_the_store_sends_a_batch_as_one_request_and_a_put_of_none_is_a_delete():
    answers = Answers((200, results(None, None, None), {}))
    answered = store_with(answers).batch(
        [PutOp(("m",), "a", {"text": "x"}, ttl=5), GetOp(("m",), "a"), PutOp(("m",), "a", None)]
    )
    assert answered == [None, None, None]
    assert [r.method for r in answers.requests] == ["POST"]
    assert json.loads(answers.requests[0].content)["ops"] == [
        {"op": "put", "namespace": ["m"], "key": "a", "value": {"text": "x"}, "ttl": 5},
        {"op": "get", "namespace": ["m"], "key": "a", "refresh_ttl": True},
        {"op": "delete", "namespace": ["m"], "key": "a"},
    ]


def test_a_nan_in_a_filter_is_refused_before_sending_as_invalid_input():
    answers = Answers((200, results([]), {}))
    store = store_with(answers)
    for bad in (float("nan"), float("inf")):
        with pytest.raises(StoreInvalidError) as refused:
            store.search(("m",), filter={"score": {"$gt": bad}})
        assert refused.value.errors == {"filter": [refused.value.errors["filter"][0]]}
        assert "NaN" in str(refused.value) or "infinity" in str(refused.value)
    assert answers.requests == []


def test_the_async_store_honours_a_429_retry_after():
    answers = Answers((429, {"code": "throttled"}, {"Retry-After": "0"}), (200, results(ITEM), {}))
    store = store_with(answers)

    async def run():
        try:
            return await store.aget(("users", "alice"), "tea")
        finally:
            await store.aclose()

    assert asyncio.run(run()).key == "tea" and len(answers.requests) == 2


def test_the_saver_reads_a_missing_thread_as_nothing():
    answers = Answers((404, {"code": "not_found"}, {}))
    saver = saver_with(answers)
    config = {"configurable": {"thread_id": "never-made:1"}}
    assert saver.get_tuple(config) is None and list(saver.list(config)) == []
    assert answers.requests[0].url.raw_path.split(b"?")[0] == b"/api/v1/threads/never-made%3A1/checkpoints/latest"


def test_the_saver_retries_a_throttled_put_and_raises_one_it_may_not_wait_for():
    answers = Answers((429, {"code": "throttled"}, {"Retry-After": "0"}), (201, {}, {}))
    config = {"configurable": {"thread_id": "t-1", "checkpoint_ns": ""}}
    saved = saver_with(answers).put(config, CHECKPOINT, {"source": "input", "step": -1}, {})
    assert saved == {"configurable": {"thread_id": "t-1", "checkpoint_ns": "", "checkpoint_id": "c-1"}}
    assert len(answers.requests) == 2
    assert json.loads(answers.requests[1].content)["checkpoint_id"] == "c-1"
    with pytest.raises(MemoryAdminThrottled) as caught:
        saver_with(Answers((429, {"code": "throttled"}, {"Retry-After": "3600"}))).put(config, CHECKPOINT, {}, {})
    assert caught.value.retry_after == 3600


def test_the_saver_refuses_writes_without_a_checkpoint_before_sending():
    answers = Answers((201, {}, {}))
    with pytest.raises(ValueError):
        saver_with(answers).put_writes({"configurable": {"thread_id": "t-1"}}, [("messages", "hi")], "task-1")
    assert answers.requests == []


def test_concurrent_async_calls_share_requests_and_keep_their_own_answers():
    """The queue: 250 calls in three requests of at most 100; a refused call raises alone."""
    seen: list[int] = []

    def answer(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        assert body["atomic"] is False
        seen.append(len(body["ops"]))
        results = []
        for op in body["ops"]:
            if op["key"] == "bob":
                results.append({"error": {"status": 403, "code": "forbidden", "detail": "Not yours."}})
            else:
                results.append({"result": {**ITEM, "key": op["key"]}})
        return httpx.Response(200, json={"results": results})

    transport = httpx.MockTransport(answer)
    store = MemoryAdminStore("http://memoryadmin.test", "ma_key", transport=transport, async_transport=transport)

    async def run():
        try:
            return await asyncio.gather(
                *(store.aget(("users", "alice"), "bob" if i == 7 else f"k{i}") for i in range(250)), return_exceptions=True
            )
        finally:
            await store.aclose()

    answers = asyncio.run(run())
    assert sorted(seen) == [50, 100, 100]
    assert isinstance(answers[7], StoreForbiddenError)
    assert [a.key for i, a in enumerate(answers) if i != 7] == [f"k{i}" for i in range(250) if i != 7]
