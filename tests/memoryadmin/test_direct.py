"""Direct calls (memoryadmin/direct.py): under the production ASGI application, the checkpoint
put, its writes and the latest read are served without Django's handler and DRF's dispatch,
and answer exactly what that path answers: status, body and headers, refusals, audit, metrics."""

from __future__ import annotations

import httpx
import pytest

from memoryadmin import direct
from memoryadmin.apikeys import apikey_create
from memoryadmin.metrics import HTTP_REQUESTS
from memoryadmin.models import AuditEvent

pytestmark = pytest.mark.django_db(transaction=True)

ROUTE = "api/v1/threads/<str:thread_id>/checkpoints"


def checkpoint(checkpoint_id: str, messages: int | None = 2) -> dict:
    values = {"step": 1}
    if messages is not None:
        values["messages"] = [
            {"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", "HumanMessage"],
             "kwargs": {"content": f"message {i}", "type": "human", "id": f"m-{i}"}} for i in range(messages)
        ]
    return {"v": 4, "id": checkpoint_id, "ts": "2026-12-01T00:00:00+00:00", "channel_values": values,
            "channel_versions": {"messages": "1", "step": "1"}, "versions_seen": {}, "updated_channels": ["messages"]}


def scenario(base: str, thread: str, mine: str, theirs: str, their_thread: str) -> list[tuple[str, str, dict]]:
    """Every kind of answer the three endpoints give: (method, path, httpx options)."""
    bearer = {"Authorization": f"Bearer {mine}"}
    put = f"{base}/api/v1/threads/{thread}/checkpoints"
    return [
        ("POST", put, {"headers": bearer, "json": {"checkpoint": checkpoint("c1"), "checkpoint_id": "c1", "metadata": {"step": 1}}}),
        ("POST", put, {"headers": bearer, "json": {"checkpoint": checkpoint("c1"), "checkpoint_id": "c1", "metadata": {"step": 1}}}),  # replaced: 200
        ("POST", put, {"headers": bearer, "json": {"checkpoint": checkpoint("c2", None), "checkpoint_id": "c2", "parent_checkpoint_id": "c1",
                                                    "messages": {"head": "0" * 64, "append": []}, "metadata": {}}}),  # stale head: 412
        ("POST", put, {"headers": bearer, "json": {"checkpoint": "no"}}),  # 400 naming the field
        ("POST", put, {"headers": {**bearer, "Content-Type": "application/json"}, "content": b"{not json"}),  # parse error
        ("POST", put, {"headers": {**bearer, "Content-Type": "application/json"}, "content": b"[1, 2]"}),  # not an object
        ("POST", put, {"headers": {**bearer, "Content-Type": "application/json"}, "content": b"[" * 200 + b"]" * 200}),  # too deep
        ("POST", put, {"headers": {"X-Api-Key": "mk_not-a-key"}, "json": {}}),  # 401
        ("POST", put, {"headers": {"Authorization": f"Bearer {theirs}"}, "json": {"checkpoint": checkpoint("c9"), "checkpoint_id": "c9"}}),  # 403
        ("POST", f"{put}/c1/writes", {"headers": bearer, "json": {"task_id": "t1", "writes": [{"channel": "step", "value": 2}]}}),  # 204
        ("POST", f"{put}/c1/writes", {"headers": bearer, "json": {"task_id": "t1", "writes": "no"}}),  # 400
        ("POST", f"{base}/api/v1/threads/{their_thread}/checkpoints/c0/writes", {"headers": bearer, "json": {"task_id": "t", "writes": [{"channel": "a", "value": 1}]}}),  # 403
        ("GET", f"{put}/latest", {"headers": bearer}),  # 200 with its ETag
        ("GET", f"{base}/api/v1/threads/{'x' * 300}/checkpoints/latest", {"headers": bearer}),  # 400: a thread id too long
        ("GET", f"{base}/api/v1/threads/{thread}-none/checkpoints/latest", {"headers": bearer}),  # 404
        ("GET", f"{base}/api/v1/threads/{their_thread}/checkpoints/latest", {"headers": bearer}),  # 403 (a member)
        ("GET", f"{put}/latest", {"headers": {**bearer, "Accept": "text/html"}}),  # 406: DRF's negotiation
        ("GET", f"{put}/latest?format=xml", {"headers": bearer}),  # 404: no such renderer
    ]


def _without_moments(value):
    """The body with every `created_at`, `updated_at` and `etag` left out, however deep (a batch's results)."""
    if isinstance(value, dict):
        return {key: _without_moments(item) for key, item in value.items() if key not in ("created_at", "updated_at", "etag")}
    if isinstance(value, list):
        return [_without_moments(item) for item in value]
    return value


def collected(calls: list[tuple[str, str, dict]], name: str) -> list[tuple]:
    """Each call's answer as both paths must give it alike: status, body and headers, with the
    moments (and ETags) of what was written left out and `name` (a thread or namespace) as "T"."""
    found = []
    for method, url, options in calls:
        response = httpx.request(method, url, **options)
        headers = {key: value for key, value in response.headers.items() if key not in ("date", "etag", "content-length")}
        body = _without_moments(response.json() if response.content else None)
        found.append((method, url.replace(name, "T"), response.status_code, str(body).replace(name, "T"), headers,
                      "etag" in response.headers))
    return found


def answers(base: str, thread: str, mine: str, theirs: str, their_thread: str) -> list[tuple]:
    return collected(scenario(base, thread, mine, theirs, their_thread), thread)


@pytest.fixture
def served(monkeypatch):
    """How many requests direct.py answered itself."""
    calls = []
    respond = direct._respond

    def counted(*args, **kwargs):
        calls.append(1)
        return respond(*args, **kwargs)

    monkeypatch.setattr(direct, "_respond", counted)
    return calls


def test_direct_calls_answer_what_django_and_drf_answer(asgi_server, alice, bob, settings, served):
    from sessions_app.checkpoints import services as svc

    mine, theirs = apikey_create(owner=alice).plaintext, apikey_create(owner=bob).plaintext
    svc.checkpoint_put(actor=bob, thread_id="bobs", data=svc.checkpoint_input(checkpoint=checkpoint("c0")), checkpoint_id="c0")
    settings.MEMORYADMIN_DIRECT_CALLS = False
    through_django = answers(asgi_server.url, "thread-django", mine, theirs, "bobs")
    assert served == []
    denied = AuditEvent.objects.filter(action="access.denied").count()
    settings.MEMORYADMIN_DIRECT_CALLS = True
    direct_answers = answers(asgi_server.url, "thread-direct", mine, theirs, "bobs")
    assert len(served) == len(direct_answers)
    assert direct_answers == through_django
    assert [answer[2] for answer in direct_answers] == [201, 200, 412, 400, 400, 400, 400, 401, 403, 204, 400, 403, 200, 400, 404, 403, 406, 404]
    # Each 403 audited the same way, by whoever asked.
    events = list(AuditEvent.objects.filter(action="access.denied").order_by("pk"))
    assert len(events) == 2 * denied and {event.detail["path"].split("/")[4] for event in events[denied:]} >= {"thread-direct", "bobs"}
    assert events[-1].actor == alice


def test_a_direct_call_is_counted_by_its_route(asgi_server, alice, served):
    key = apikey_create(owner=alice).plaintext
    before = HTTP_REQUESTS.labels("POST", ROUTE, "201")._value.get()
    body = {"checkpoint": checkpoint("c1"), "checkpoint_id": "c1"}
    assert httpx.post(f"{asgi_server.url}/api/v1/threads/counted/checkpoints", json=body, headers={"X-Api-Key": key}).status_code == 201
    assert served and HTTP_REQUESTS.labels("POST", ROUTE, "201")._value.get() == before + 1


def test_a_throttled_direct_call_is_a_429_with_retry_after(asgi_server, alice, settings, served):
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"client": "2/min"}}
    from django.core.cache import cache
    from rest_framework.settings import api_settings

    api_settings.reload()
    cache.clear()
    try:
        key = apikey_create(owner=alice).plaintext
        url = f"{asgi_server.url}/api/v1/threads/slow/checkpoints/latest"
        codes = [httpx.get(url, headers={"X-Api-Key": key}) for _ in range(3)]
        assert [r.status_code for r in codes] == [404, 404, 429]
        assert int(codes[-1].headers["Retry-After"]) >= 1 and codes[-1].json()["code"] == "throttled"
        assert len(served) == 3
    finally:
        settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK}
        api_settings.reload()
        cache.clear()


def test_what_is_not_for_a_direct_call_goes_to_django(asgi_server, alice, settings, served):
    key = apikey_create(owner=alice).plaintext
    url = f"{asgi_server.url}/api/v1/threads/elsewhere/checkpoints"
    body = {"checkpoint": checkpoint("c1"), "checkpoint_id": "c1"}
    # Not listed: another method of the same view, another view.
    assert httpx.get(url, headers={"X-Api-Key": key}).status_code == 404  # no such thread yet
    assert httpx.get(f"{asgi_server.url}/api/v1/threads/elsewhere/messages", headers={"X-Api-Key": key}).status_code == 404
    # No key: a session (here none), so Django's 401.
    assert httpx.post(url, json=body).status_code == 401
    # A body that is not JSON by its type: DRF's 415.
    assert httpx.post(url, content=b"{}", headers={"X-Api-Key": key, "Content-Type": "text/plain"}).status_code == 415
    # Chunked (no Content-Length), and over the limit: the limits' middleware decides.
    chunked = httpx.post(url, content=iter([b'{"checkpoint": ', b"{}}"]), headers={"X-Api-Key": key, "Content-Type": "application/json"})
    assert chunked.status_code == 201
    # A host not allowed: Django's 400.
    assert httpx.post(url, json=body, headers={"X-Api-Key": key, "Host": "evil.example"}).status_code == 400
    settings.MEMORYADMIN_MAX_BODY_BYTES = 100
    big = httpx.post(url, json={**body, "pad": "x" * 200}, headers={"X-Api-Key": key})
    assert big.status_code == 413 and big.json()["code"] == "too_large"
    assert served == []


def store_answers(base: str, suffix: str, mine: str, theirs: str) -> list[tuple]:
    bearer = {"Authorization": f"Bearer {mine}"}
    items = f"{base}/api/v1/store/items"
    batch = f"{base}/api/v1/store/batch"
    calls = [
        ("PUT", items, {"headers": bearer, "json": {"namespace": ["notes", suffix], "key": "k1", "value": {"text": "hello", "n": 1}}}),
        ("PUT", items, {"headers": bearer, "json": {"namespace": ["notes", suffix], "value": {}}}),  # 400: no key
        ("PUT", items, {"headers": {"Authorization": f"Bearer {theirs}"}, "json": {"namespace": ["notes", suffix], "key": "k1", "value": {}}}),
        ("GET", f"{items}?namespace=notes.{suffix}&key=k1", {"headers": bearer}),
        ("GET", f"{items}?namespace=notes.{suffix}&key=none", {"headers": bearer}),  # null, Django's own JsonResponse
        ("GET", f"{items}?key=k1", {"headers": bearer}),  # 400: no namespace
        ("GET", f"{items}?namespace=notes.{suffix}&key=k1&refresh_ttl=maybe", {"headers": bearer}),  # 400
        ("POST", f"{items}/search", {"headers": bearer, "json": {"namespace_prefix": ["notes", suffix], "filter": {"n": 1}}}),
        ("POST", f"{items}/search", {"headers": bearer, "json": {"namespace_prefix": "notes", "limit": -1}}),  # 400
        # The batch (every call of MemoryAdminStore): each kind of op, a refusal per op, a bad op, a bad body.
        ("POST", batch, {"headers": bearer, "json": {"ops": [
            {"op": "put", "namespace": ["notes", suffix], "key": "k2", "value": {"text": "two", "n": 2}},
            {"op": "get", "namespace": ["notes", suffix], "key": "k1"},
            {"op": "get", "namespace": ["notes", suffix], "key": "none"},
            {"op": "search", "namespace_prefix": ["notes", suffix], "filter": {"n": 2}},
            {"op": "list_namespaces", "prefix": ["notes", suffix], "max_depth": 2, "limit": 10, "offset": 0},
            {"op": "delete", "namespace": ["notes", suffix], "key": "k2"},
        ]}}),
        ("POST", batch, {"headers": {"Authorization": f"Bearer {theirs}"}, "json": {"atomic": False, "ops": [
            {"op": "put", "namespace": ["notes", suffix], "key": "k1", "value": {"text": "theirs"}},  # 403 for this op
            {"op": "get", "namespace": ["notes", suffix], "key": "k1"},
        ]}}),
        ("POST", batch, {"headers": bearer, "json": {"ops": [{"op": "get", "namespace": ["notes", suffix]}]}}),  # 400: no key
        ("POST", batch, {"headers": bearer, "json": {"ops": "no"}}),  # 400
    ]
    return collected(calls, suffix)


def test_the_stores_direct_calls_answer_what_django_and_drf_answer(asgi_server, alice, bob, settings, served):
    mine, theirs = apikey_create(owner=alice).plaintext, apikey_create(owner=bob).plaintext
    settings.MEMORYADMIN_DIRECT_CALLS = False
    through_django = store_answers(asgi_server.url, "viadjango", mine, theirs)
    assert served == []
    settings.MEMORYADMIN_DIRECT_CALLS = True
    direct_answers = store_answers(asgi_server.url, "viadirect", mine, theirs)
    assert len(served) == len(direct_answers)
    assert direct_answers == through_django
    assert [answer[2] for answer in direct_answers][:6] == [204, 400, 403, 200, 200, 400]
    # The batches: one of every op, another member's put and get refused each in its place, bad ops.
    assert [answer[2] for answer in direct_answers][9:] == [200, 200, 400, 400]
    assert "'key': 'k1', 'value'" in direct_answers[9][3]
    assert direct_answers[10][3].count("'status': 403") == 2


def state_answers(base: str, thread: str, mine: str, theirs: str) -> list[tuple]:
    bearer = {"Authorization": f"Bearer {mine}"}
    url = f"{base}/api/v1/threads/{thread}/agent-state"
    context = [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"}]
    calls = [
        ("PUT", url, {"headers": bearer, "json": {"agent_code": "a", "context": context}}),
        ("PUT", url, {"headers": bearer, "json": {"agent_code": "a", "context": context + [{"role": "user", "content": "more"}]}}),
        ("PUT", url, {"headers": {**bearer, "If-Match": '"stale"'}, "json": {"agent_code": "a", "context": context}}),  # 412
        ("PUT", url, {"headers": bearer, "json": {"agent_code": "a", "context": "no"}}),  # 400
        ("PUT", url, {"headers": {"Authorization": f"Bearer {theirs}"}, "json": {"agent_code": "a", "context": context}}),  # 403
        ("GET", url, {"headers": bearer}),
        ("GET", f"{base}/api/v1/threads/{thread}-none/agent-state", {"headers": bearer}),  # 404
        ("POST", f"{url}/append", {"headers": bearer, "json": {"agent_code": "a", "head": "0" * 64, "messages": [{"role": "user", "content": "x"}]}}),
    ]
    return collected(calls, thread)


def test_an_agents_state_through_direct_calls_is_what_django_and_drf_answer(asgi_server, alice, bob, settings, served):
    mine, theirs = apikey_create(owner=alice).plaintext, apikey_create(owner=bob).plaintext
    settings.MEMORYADMIN_DIRECT_CALLS = False
    through_django = state_answers(asgi_server.url, "state-django", mine, theirs)
    assert served == []
    settings.MEMORYADMIN_DIRECT_CALLS = True
    direct_answers = state_answers(asgi_server.url, "state-direct", mine, theirs)
    assert len(served) == len(direct_answers)
    assert direct_answers == through_django
    assert [answer[2] for answer in direct_answers][:7] == [200, 200, 412, 400, 403, 200, 404]


def test_an_unexpected_error_in_a_direct_call_is_answered_and_logged_as_django_does(asgi_server, alice, settings, served, monkeypatch, caplog):
    from sessions_app.checkpoints.api import views

    def broken(self, request, thread_id):
        raise RuntimeError("a bug")

    monkeypatch.setattr(views.CheckpointLatestView, "get", broken)
    key = apikey_create(owner=alice).plaintext
    url = f"{asgi_server.url}/api/v1/threads/any/checkpoints/latest"
    answers = {}
    for direct_on in (False, True):
        settings.MEMORYADMIN_DIRECT_CALLS = direct_on
        caplog.clear()
        response = httpx.get(url, headers={"X-Api-Key": key})
        logged = [record for record in caplog.records if record.name == "django.request" and record.levelname == "ERROR"]
        answers[direct_on] = (response.status_code, response.json(), len(logged))
    assert answers[True] == answers[False] == (500, {"code": "server_error", "detail": "Something went wrong on our side; it has been logged."}, 1)
    assert len(served) == 1
