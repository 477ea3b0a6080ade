"""Every field of a realistic request given a value of each other JSON type, one at a time.

An agent's messages are its own JSON: a LangGraph checkpoint holds LangChain envelopes whose
fields (a tool call's id, a chat message's role, a name) the server reads for the
conversation, the status and the pages. Whatever type a field turns out to be, the answer is
a 2xx or a 4xx, never a 500, and what was stored reads back and renders.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client

from ..conftest import api_client_for, make_user, message_envelope

pytestmark = pytest.mark.django_db

SWAPS: list[Any] = [["x"], {"k": 1}, 7, -1, 2**70, 1.5, None, True, ""]


@pytest.fixture(autouse=True)
def no_throttle(settings):
    """Thousands of requests a minute from one key: the rate limit is not what is tested here."""
    rates = {**settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], "client": None}
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": rates}


MESSAGES = [
    message_envelope("HumanMessage", content="weather in Oslo?", type="human", id="h-1", name="alice"),
    message_envelope("AIMessage", content=[{"type": "text", "text": "looking"}], type="ai", id="a-1",
                     tool_calls=[{"name": "get_weather", "args": {"city": "Oslo"}, "id": "call-1", "type": "tool_call"}]),
    message_envelope("ToolMessage", content="rainy", type="tool", id="t-1", tool_call_id="call-1", name="get_weather"),
    message_envelope("ChatMessage", content="noted", type="chat", role="assistant", id="c-1"),
    message_envelope("SystemMessage", content="so far: rain", type="system", name="__compaction_summary__", id="s-1"),
]

SEND = {"lc": 2, "type": "constructor", "id": ["langgraph", "types", "Send"],
        "kwargs": {"node": "tools", "arg": {"messages": MESSAGES[:2]}}}

CHECKPOINT = {
    "checkpoint_id": "1f1f0000-0000-6000-8000-000000000001",
    "parent_checkpoint_id": None,
    "checkpoint": {
        "v": 4, "id": "1f1f0000-0000-6000-8000-000000000001", "ts": "2026-12-01T00:00:00+00:00",
        "channel_values": {"messages": MESSAGES, "__pregel_tasks": [SEND], "branch:to:agent": None},
        "channel_versions": {"messages": "00000000000000000000000000000002.0.1", "__pregel_tasks": "1"},
        "versions_seen": {"agent": {"messages": "00000000000000000000000000000001.0.1"}},
        "updated_channels": ["messages", "__pregel_tasks"],
    },
    "metadata": {"source": "loop", "step": 1, "parents": {}, "graph_id": "weather"},
}

WRITES = {
    "checkpoint_ns": "", "task_id": "task-1", "task_path": "~__pregel_push, 0",
    "writes": [
        {"channel": "messages", "value": [MESSAGES[2]]},
        {"channel": "__interrupt__", "value": [{"lc": 2, "type": "constructor", "id": ["langgraph", "types", "Interrupt"],
                                                "kwargs": {"value": {"question": "go?"}, "id": "i-1"}}]},
    ],
}

AGENT_STATE = {
    "agent_code": "planner",
    "context": [
        {"role": "user", "content": "weather in Oslo?", "name": "alice"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "rainy"},
        {"role": "system", "name": "__compaction_summary__", "content": "so far"},
    ],
    "extra_state": {"plan": ["a"]},
}


def leaves(value: Any, path: tuple = ()) -> Iterator[tuple]:
    """The path of every value inside `value` (objects' members and lists' items), `value` itself last."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from leaves(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from leaves(item, (*path, index))
    if path:
        yield path


def swapped(body: Any, path: tuple, new: Any) -> Any:
    copied = copy.deepcopy(body)
    target = copied
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = new
    return copied


def cases(body: dict, *, skip: tuple = ()) -> Iterator[tuple[str, Any]]:
    for path in leaves(body):
        if path[0] in skip:
            continue
        for new in SWAPS:
            yield "/".join(map(str, path)) + f"={json.dumps(new)}", swapped(body, path, new)


def sent(send, bodies) -> tuple[dict[str, int], list[tuple[int, str, Any]]]:
    """Each (label, body) sent by `send(index, body)`: the 5xx answers by label, and the
    (index, label, body) of those stored (a 2xx)."""
    errors, stored = {}, []
    for index, (label, body) in enumerate(bodies):
        code = send(index, body).status_code
        if code >= 500:
            errors[label] = code
        elif code < 300:
            stored.append((index, label, body))
    return errors, stored


def test_every_field_of_a_langgraph_step_takes_any_json_type():
    user = make_user("agent", password="pw-for-tests-1")
    api, page = api_client_for(user), Client()
    page.force_login(user)
    bodies = list(cases(CHECKPOINT, skip=("checkpoint_id",)))
    errors, stored = sent(lambda n, body: api.post(f"/api/v1/threads/swap-{n}/checkpoints", body, format="json"), bodies)
    assert not errors
    assert len(stored) > len(bodies) // 3  # most swaps are values the server keeps as they are
    for n, label, body in stored:
        thread, checkpoint_id = f"swap-{n}", body["checkpoint_id"]
        writes = api.post(f"/api/v1/threads/{thread}/checkpoints/{checkpoint_id}/writes", WRITES, format="json")
        for url in (
            f"/api/v1/threads/{thread}/checkpoints/latest", f"/api/v1/threads/{thread}/state",
            f"/api/v1/threads/{thread}/messages", f"/api/v1/threads/{thread}",
        ):
            assert api.get(url).status_code == 200, (label, url)
        assert api.post(f"/api/v1/threads/{thread}/history", {}, format="json").status_code == 200, label
        for url in (
            f"/threads/{thread}/", f"/threads/{thread}/checkpoints/", f"/threads/{thread}/context/",
            f"/threads/{thread}/checkpoints/?checkpoint={checkpoint_id}&cns=", f"/graphs/thread/{thread}/",
        ):
            assert page.get(url).status_code == 200, (label, url)
        assert writes.status_code < 500, label
    assert api.post("/api/v1/threads/search", {"status": "interrupted"}, format="json").status_code == 200


def test_every_field_of_a_step_s_writes_takes_any_json_type():
    user = make_user("agent", password="pw-for-tests-1")
    api = api_client_for(user)
    assert api.post("/api/v1/threads/w/checkpoints", CHECKPOINT, format="json").status_code == 201
    url = f"/api/v1/threads/w/checkpoints/{CHECKPOINT['checkpoint_id']}/writes"
    errors, _ = sent(lambda n, body: api.post(url, body, format="json"), cases(WRITES))
    assert not errors
    for url in ("/api/v1/threads/w/checkpoints/latest", "/api/v1/threads/w/state"):
        assert api.get(url).status_code == 200, url
    assert api.post("/api/v1/threads/w/history", {}, format="json").status_code == 200


def test_every_field_of_an_agent_s_state_takes_any_json_type():
    user = make_user("agent", password="pw-for-tests-1")
    api, page = api_client_for(user), Client()
    page.force_login(user)
    errors, stored = sent(lambda n, body: api.put(f"/api/v1/threads/state-{n}/agent-state", body, format="json"), cases(AGENT_STATE))
    assert not errors
    for n, label, _ in stored:
        thread = f"state-{n}"
        assert api.get(f"/api/v1/threads/{thread}/agent-state").status_code == 200, label
        assert page.get(f"/threads/{thread}/").status_code == 200, label
        assert page.get(f"/threads/{thread}/export").status_code == 200, label


STORE_PUT = {"namespace": ["users", "alice", "prefs"], "key": "diet", "value": {"text": "no peanuts", "tags": ["food"]},
             "ttl": 60, "index": ["text"]}
BATCH = {"atomic": False, "ops": [
    {"op": "put", **STORE_PUT},
    {"op": "get", "namespace": ["users", "alice", "prefs"], "key": "diet", "refresh_ttl": True},
    {"op": "search", "namespace_prefix": ["users"], "filter": {"tags": ["food"]}, "query": "peanuts", "limit": 5, "offset": 0},
    {"op": "list_namespaces", "match_conditions": [{"match_type": "prefix", "path": ["users", "*"]}], "max_depth": 2, "limit": 10},
]}
APPEND = {"agent_code": "planner", "messages": [{"role": "user", "content": "and tomorrow?", "name": "alice"}]}
UPDATE_STATE = {"values": {"messages": [{"role": "user", "content": "resume", "id": "h-2"}]}, "as_node": "agent"}
SEARCH = {"status": "interrupted", "metadata": {"graph_id": "weather"}, "limit": 10, "offset": 0,
          "sort_by": "updated_at", "sort_order": "desc"}
# A step with no Send packets pending, which an update_state may continue from.
PLAIN = swapped(CHECKPOINT, ("checkpoint", "channel_values"), {"messages": MESSAGES, "branch:to:agent": None})


GRAPH = {
    "nodes": [
        {"id": "A"},
        {"id": "B", "subgraph": {
            "nodes": [{"id": "D"}, {"id": "E"}],
            "edges": [{"source": "__start__", "target": "D"}, {"source": "D", "target": "E"}, {"source": "E", "target": "__end__"}],
            "interrupt_before": ["E"]}},
        {"id": "C"},
    ],
    "edges": [
        {"source": "__start__", "target": "A"}, {"source": "A", "target": "B"},
        {"source": "B", "condition": "review", "targets": {"ok": "C", "stop": "__end__"}},
        {"source": "C", "target": "__end__"},
    ],
    "interrupt_after": ["B"],
}
STORE_SEARCH = {"namespace_prefix": ["users"], "filter": {"tags": ["food"], "n": {"$gt": 1}}, "query": "peanuts",
                "limit": 5, "offset": 0, "refresh_ttl": False}
NAMESPACES = {"prefix": ["users"], "suffix": ["prefs"], "max_depth": 2, "limit": 10, "offset": 0}
CONTEXT = {"budget": 3000, "namespace": ["users", "alice"], "query": "food", "min_score": 0.3}
CREATE = {"thread_id": "made", "metadata": {"env": "prod", "n": 1}, "if_exists": "do_nothing"}
PATCH = {"metadata": {"env": "staging", "tags": ["a"]}}
COPY = {"thread_id": "copied"}
PRUNE = {"thread_ids": ["lg"], "strategy": "keep_latest"}
FOR_RUNS = {"run_ids": ["run-1", "run-2"]}
TURN = {"question": "plan a trip"}


@pytest.mark.parametrize(
    "method, url, body",
    [
        ("put", "/api/v1/store/items", STORE_PUT),
        ("post", "/api/v1/store/batch", BATCH),
        ("post", "/api/v1/store/items/search", STORE_SEARCH),
        ("post", "/api/v1/store/namespaces", NAMESPACES),
        ("post", "/api/v1/threads/t1/agent-state/append", APPEND),
        ("post", "/api/v1/threads/plain/state", UPDATE_STATE),
        ("post", "/api/v1/threads/search", SEARCH),
        ("post", "/api/v1/threads/count", {"status": "idle", "metadata": {"env": "prod"}}),
        ("post", "/api/v1/threads", CREATE),
        ("patch", "/api/v1/threads/lg", PATCH),
        ("post", "/api/v1/threads/lg/copy", COPY),
        ("post", "/api/v1/checkpoints/prune", PRUNE),
        ("post", "/api/v1/checkpoints/delete-for-runs", FOR_RUNS),
        ("post", "/api/v1/threads/t1/context-preview", CONTEXT),
        ("post", "/api/v1/threads/t1/turns", TURN),
        ("post", "/api/v1/graphs/compile", {"spec": GRAPH}),
        ("post", "/api/v1/graphs", {"name": "review-flow", "spec": GRAPH}),
    ],
    ids=["store put", "store batch", "store search", "namespaces", "append", "update_state", "thread search",
         "thread count", "thread create", "thread patch", "copy", "prune", "delete for runs", "context preview",
         "turn", "graph compile", "graph save"],
)
def test_every_field_of_the_other_writes_takes_any_json_type(method, url, body):
    user = make_user("agent", password="pw-for-tests-1")
    api = api_client_for(user)
    assert api.put("/api/v1/threads/t1/agent-state", AGENT_STATE, format="json").status_code == 200
    assert api.post("/api/v1/threads/lg/checkpoints", CHECKPOINT, format="json").status_code == 201
    assert api.post("/api/v1/threads/plain/checkpoints", PLAIN, format="json").status_code == 201
    assert getattr(api, method)(url, body, format="json").status_code < 300  # the body as it is: taken
    errors, _ = sent(lambda n, swapped_body: getattr(api, method)(url, swapped_body, format="json"), cases(body))
    assert not errors
    assert api.post("/api/v1/store/items/search", {"namespace_prefix": ["users"]}, format="json").status_code == 200
    assert api.get("/api/v1/threads/t1/agent-state").status_code == 200
    assert api.get("/api/v1/threads/lg/state").status_code == 200
    assert api.get("/api/v1/threads/plain/state").status_code == 200
