"""The one HTTP layer: API root and key, strict bodies, the retry policy, and the error hierarchy.

The answers come from `httpx.MockTransport`, httpx's own transport for answering
requests in-process: the client, its headers, its pooling and its retries run
exactly as they do over a socket.
"""

from __future__ import annotations

import asyncio
import email.utils
import time

import httpx
import pytest

from memoryadmin_client import errors
from memoryadmin_client.http import Call, HTTPClient, RetryPolicy, retry_after_seconds

FAST = RetryPolicy(retries=3, base=0.001, cap=0.002)


class Script:
    """Answers requests in turn from a list (a response, or an exception to raise); the last one repeats."""

    def __init__(self, *answers: httpx.Response | Exception) -> None:
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        # A fresh response each time: a client takes over the stream of the one it is handed.
        return httpx.Response(answer.status_code, headers=answer.headers, content=answer.content)


def client(script: Script, *, retry: RetryPolicy = FAST, **kwargs) -> HTTPClient:
    transport = httpx.MockTransport(script)
    return HTTPClient("http://memoryadmin.test", "ma_key", retry=retry, transport=transport, async_transport=transport, **kwargs)


def status(code: int, body=None, **headers) -> httpx.Response:
    return httpx.Response(code, json=body if body is not None else {"code": "c", "detail": f"answered {code}"}, headers=headers)


OK = httpx.Response(200, json={"ok": True})


# --- requests --------------------------------------------------------------------------------


@pytest.mark.parametrize("given", ["http://memoryadmin.test", "http://memoryadmin.test/", "http://memoryadmin.test/api/v1/"])
def test_the_api_root_is_added_once(given):
    script = Script(OK)
    http = HTTPClient(given, transport=httpx.MockTransport(script))
    http.send(Call("GET", "/threads"))
    assert http.base_url == "http://memoryadmin.test/api/v1"
    assert str(script.requests[0].url) == "http://memoryadmin.test/api/v1/threads"


def test_the_key_goes_as_a_bearer_token_and_a_body_as_compact_json():
    script = Script(OK)
    http = client(script)
    http.send(Call("GET", "/store/items", params={"namespace": "a.b", "key": "k"}))
    http.send(Call("PUT", "/store/items", body={"namespace": ["a"], "value": {"text": "記憶", "n": 1.5}}))
    get, put = script.requests
    assert get.headers["authorization"] == "Bearer ma_key" and get.headers["accept"] == "application/json"
    assert get.url.params["namespace"] == "a.b" and "content-type" not in get.headers and get.content == b""
    assert put.headers["content-type"] == "application/json"
    assert put.content == '{"namespace":["a"],"value":{"text":"記憶","n":1.5}}'.encode()


def test_no_key_sends_no_authorization_header():
    script = Script(OK)
    HTTPClient("http://memoryadmin.test", transport=httpx.MockTransport(script)).send(Call("GET", "/threads"))
    assert "authorization" not in script.requests[0].headers


def test_a_body_that_is_not_strict_json_is_refused_before_anything_is_sent():
    script = Script(OK)
    with pytest.raises(ValueError):
        client(script).send(Call("PUT", "/store/items", body={"value": {"x": float("nan")}}))
    assert script.requests == []


def test_a_tolerated_status_answers_none():
    script = Script(status(404))
    assert client(script).send(Call("GET", "/threads/t/checkpoints/latest", tolerate=(404,))) is None


# --- retries ---------------------------------------------------------------------------------


def test_a_503_is_retried_until_it_passes():
    script = Script(status(503), status(503), OK)
    response = client(script).send(Call("GET", "/threads"))
    assert response.json() == {"ok": True} and len(script.requests) == 3


def test_a_503_that_persists_is_raised_once_the_retries_are_spent():
    script = Script(status(503, {"code": "unavailable", "detail": "The database is not answering."}, **{"Retry-After": "5"}))
    with pytest.raises(errors.MemoryAdminUnavailable) as caught:
        client(script).send(Call("GET", "/threads"))
    assert len(script.requests) == FAST.retries + 1
    assert caught.value.status_code == 503 and caught.value.code == "unavailable" and caught.value.retry_after == 5


def test_no_retries_sends_once():
    script = Script(status(503))
    with pytest.raises(errors.MemoryAdminUnavailable):
        client(script, retry=RetryPolicy(retries=0)).send(Call("GET", "/threads"))
    assert len(script.requests) == 1


def test_a_dropped_connection_is_retried():
    script = Script(httpx.ConnectError("refused"), httpx.RemoteProtocolError("peer closed the connection"), OK)
    assert client(script).send(Call("GET", "/threads")).status_code == 200
    assert len(script.requests) == 3


def test_a_connection_that_stays_down_raises_httpx_error_once_the_retries_are_spent():
    script = Script(httpx.ConnectError("refused"))
    with pytest.raises(httpx.ConnectError):
        client(script).send(Call("GET", "/threads"))
    assert len(script.requests) == FAST.retries + 1


def test_a_429_waits_the_retry_after_the_server_asked_for():
    script = Script(status(429, **{"Retry-After": "1"}), OK)
    started = time.monotonic()
    assert client(script).send(Call("GET", "/threads")).status_code == 200
    # FAST's backoff is at most 2 ms: only the server's Retry-After explains a second.
    assert time.monotonic() - started >= 1.0 and len(script.requests) == 2


def test_a_429_without_retry_after_backs_off_and_retries():
    script = Script(status(429), OK)
    started = time.monotonic()
    assert client(script).send(Call("GET", "/threads")).status_code == 200
    assert time.monotonic() - started < 0.5 and len(script.requests) == 2


def test_a_retry_after_beyond_the_limit_is_raised_at_once():
    script = Script(status(429, {"code": "throttled", "detail": "Request was throttled."}, **{"Retry-After": "120"}), OK)
    with pytest.raises(errors.MemoryAdminThrottled) as caught:
        client(script).send(Call("GET", "/threads"))
    assert caught.value.retry_after == 120 and len(script.requests) == 1


def test_a_429_that_persists_is_raised_as_throttled():
    script = Script(status(429, **{"Retry-After": "0"}))
    with pytest.raises(errors.MemoryAdminThrottled):
        client(script).send(Call("GET", "/threads"))
    assert len(script.requests) == FAST.retries + 1


@pytest.mark.parametrize("code", [400, 401, 403, 404, 409, 412, 413, 500])
def test_other_refusals_are_not_retried(code):
    script = Script(status(code), OK)
    with pytest.raises(errors.MemoryAdminError):
        client(script).send(Call("POST", "/threads/t/copy", body={"thread_id": "u"}))
    assert len(script.requests) == 1


def test_the_async_calls_follow_the_same_policy():
    script = Script(status(503), status(429, **{"Retry-After": "0"}), httpx.ReadError("reset"), OK)
    http = client(script)

    async def run():
        response = await http.asend(Call("GET", "/threads"))
        await http.aclose()
        return response

    assert asyncio.run(run()).status_code == 200 and len(script.requests) == 4


def test_the_async_errors_are_the_same_classes():
    http = client(Script(status(403)))

    async def run():
        try:
            await http.asend(Call("GET", "/threads/t"))
        finally:
            await http.aclose()

    with pytest.raises(errors.MemoryAdminForbidden):
        asyncio.run(run())


def test_each_event_loop_gets_its_own_async_client():
    http = client(Script(OK))

    async def clients_of_one_loop():
        first, again = http.async_client(), http.async_client()
        await http.aclose()
        return first, again, http.async_client()

    first, again, after_close = asyncio.run(clients_of_one_loop())
    other_loop, _, _ = asyncio.run(clients_of_one_loop())
    assert first is again and after_close is not first and first.is_closed
    assert other_loop is not first


def test_the_backoff_doubles_up_to_its_cap_with_jitter():
    policy = RetryPolicy(base=0.05, cap=1.0)
    for attempt, ceiling in [(0, 0.05), (1, 0.1), (2, 0.2), (3, 0.4), (4, 0.8), (5, 1.0), (9, 1.0)]:
        waits = [policy.backoff(attempt=attempt) for _ in range(200)]
        assert all(ceiling / 2 <= wait <= ceiling for wait in waits)
        assert max(waits) - min(waits) > ceiling / 10  # jittered, not a fixed wait


def test_retry_after_is_read_as_seconds_or_as_a_date():
    now = 1_800_000_000.0

    def read(value):
        return retry_after_seconds(response=httpx.Response(429, headers={"Retry-After": value}), now=now)

    assert read("5") == 5 and read(" 2.5 ") == 2.5 and read("-3") == 0
    assert read(email.utils.formatdate(now + 30, usegmt=True)) == 30
    assert read(email.utils.formatdate(now - 30, usegmt=True)) == 0
    assert read("soon") is None and read("inf") is None
    assert retry_after_seconds(response=httpx.Response(429)) is None


# --- errors ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "code, cls, builtin",
    [
        (400, errors.MemoryAdminInvalid, ValueError),
        (401, errors.MemoryAdminAuthError, PermissionError),
        (403, errors.MemoryAdminForbidden, PermissionError),
        (404, errors.MemoryAdminNotFound, LookupError),
        (409, errors.MemoryAdminConflict, errors.MemoryAdminError),
        (412, errors.MemoryAdminPreconditionFailed, errors.MemoryAdminError),
        (413, errors.MemoryAdminTooLarge, ValueError),
        (429, errors.MemoryAdminThrottled, errors.MemoryAdminError),
        (503, errors.MemoryAdminUnavailable, errors.MemoryAdminError),
    ],
)
def test_each_status_is_raised_as_its_own_class(code, cls, builtin):
    body = {"code": "some_code", "detail": "Invalid input: thread_id.", "errors": {"thread_id": ["bad"]}}
    script = Script(status(code, body, **{"Retry-After": "999"}))
    with pytest.raises(cls) as caught:
        client(script).send(Call("PUT", "/threads/t/agent-state", body={}))
    error = caught.value
    assert type(error) is cls and isinstance(error, builtin) and isinstance(error, errors.MemoryAdminError)
    assert (error.status_code, error.code, error.detail, error.errors) == (code, "some_code", body["detail"], body["errors"])
    assert "PUT http://memoryadmin.test/api/v1/threads/t/agent-state" in str(error)


def test_a_too_large_body_is_an_invalid_one_too():
    assert issubclass(errors.MemoryAdminTooLarge, errors.MemoryAdminInvalid)


def test_any_other_status_is_the_base_class_with_the_text_it_answered():
    script = Script(httpx.Response(502, text="Bad Gateway", headers={"content-type": "text/plain"}))
    with pytest.raises(errors.MemoryAdminError) as caught:
        client(script).send(Call("GET", "/threads"))
    assert type(caught.value) is errors.MemoryAdminError
    assert caught.value.detail == "Bad Gateway" and caught.value.code is None and caught.value.errors is None


def test_the_store_names_are_the_same_classes():
    assert errors.MemoryAdminStoreError is errors.MemoryAdminError
    assert errors.StoreForbiddenError is errors.MemoryAdminForbidden
    assert errors.StoreInvalidError is errors.MemoryAdminInvalid


def test_every_named_status_has_a_class_of_its_own():
    assert set(errors.ERRORS_BY_STATUS) == {400, 401, 403, 404, 409, 412, 413, 429, 503}
    assert len(set(errors.ERRORS_BY_STATUS.values())) == len(errors.ERRORS_BY_STATUS)


def test_content_already_encoded_goes_as_it_is_and_answers_read_the_same_with_orjson_or_without():
    import json

    from memoryadmin_client import http as layer

    script = Script(httpx.Response(200, json={"ok": True, "n": [1, 2.5, None]}))
    answer = client(script).send(Call("POST", "/threads/t/checkpoints", content=b'{"a":1}'))
    assert script.requests[0].content == b'{"a":1}'
    assert script.requests[0].headers["Content-Type"] == "application/json"
    assert layer.json_of(answer) == answer.json() == {"ok": True, "n": [1, 2.5, None]}
    value = {"é": ["x", 1, 2.5, True, None, {"k": -0.0}], "big": 2**63}
    assert json.loads(layer.dumps_strict(value)) == json.loads(layer.encode_json(body=value)) == value
    # Past 64 bits orjson refuses an integer: the standard library writes it.
    assert json.loads(layer.dumps_strict({"n": 2**70})) == {"n": 2**70}


def test_every_client_of_the_process_shares_one_tls_context():
    from memoryadmin_client.http import tls_context

    first, second = HTTPClient("https://a.test"), HTTPClient("https://b.test")
    assert tls_context() is tls_context()
    assert first._client._transport.fallback._pool._ssl_context is second._client._transport.fallback._pool._ssl_context is tls_context()
