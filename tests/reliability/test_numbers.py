"""Numbers come back as they were posted, on SQLite and on PostgreSQL (docs/api.md, "Numbers").

PostgreSQL's jsonb keeps a number's digits, not how it was written: `1e16` used to come
back as the integer 10000000000000000, `-0.0` as `0.0`, `1e20` as an integer the JSON
writer refused, and the parser read integers beyond 64 bits as floats. So the hash chain
no longer matched what was stored: `verify` reported corruption after a clean save (and
crashed on 1e20), re-posting the loaded state rewrote the thread, and exports broke off.
"""

from __future__ import annotations

import io
import json
import zipfile
from io import StringIO

import pytest
from django.core.management import call_command

from sessions_app.models import Block, Thread

from ..conftest import login_client

pytestmark = pytest.mark.django_db

# As an agent sends them, and what comes back: a double stays that double (-0.0 is 0.0:
# jsonb has no negative zero, and SQLite is made to agree), an integer stays that integer.
POSTED = (
    '{"a": 1e16, "b": 1.5e17, "c": -0.0, "d": 1e20, "e": 1180591620717411303424, "f": 0.1,'
    ' "g": 18446744073709551615, "h": -9223372036854775808, "i": 1E-7, "j": 1.0, "k": -1.5e300,'
    ' "l": [1e16, -0.0, 2.5]}'
)
EXPECTED = {
    "a": ("float", "1e+16"), "b": ("float", "1.5e+17"), "c": ("float", "0.0"), "d": ("float", "1e+20"),
    "e": ("int", str(2**70)), "f": ("float", "0.1"), "g": ("int", str(2**64 - 1)), "h": ("int", str(-(2**63))),
    "i": ("float", "1e-07"), "j": ("float", "1.0"), "k": ("float", "-1.5e+300"), "l": ("list", "[1e+16, 0.0, 2.5]"),
}


def shape(numbers: dict) -> dict:
    """Each number's type and exact Python spelling (repr tells -0.0 from 0.0 and 1e16 from 10**16)."""
    return {key: (type(value).__name__, repr(value)) for key, value in numbers.items()}


def put_raw(client, body: str, thread_id: str = "t1"):
    return client.generic("PUT", f"/api/v1/threads/{thread_id}/agent-state", body, content_type="application/json")


def state_body(context: list[str], extra_state: str | None = None) -> str:
    body = '{"agent_code": "bot", "context": [' + ", ".join(context) + "]"
    return body + (f', "extra_state": {extra_state}' if extra_state is not None else "") + "}"


FIRST = '{"role": "user", "content": "plan"}'
WITH_NUMBERS = '{"role": "assistant", "content": "numbers", "n": ' + POSTED + "}"


def run_verify() -> tuple[int, str]:
    out, err = StringIO(), StringIO()
    try:
        call_command("verify", stdout=out, stderr=err)
    except SystemExit as exc:
        return exc.code, out.getvalue() + err.getvalue()
    return 0, out.getvalue()


@pytest.fixture
def saved(alice_api):
    # A new thread (the locked path), then an append of the message with the numbers (on
    # PostgreSQL the one-statement append, which writes its own JSON text).
    assert put_raw(alice_api, state_body([FIRST])).json()["mode"] == "append"
    answer = put_raw(alice_api, state_body([FIRST, WITH_NUMBERS], POSTED))
    assert answer.status_code == 200 and answer.json()["mode"] == "append"
    return answer


def test_a_message_and_extra_state_come_back_as_posted(alice_api, saved):
    state = json.loads(alice_api.get("/api/v1/threads/t1/agent-state").content)
    assert shape(state["context"][1]["n"]) == EXPECTED
    assert shape(state["extra_state"]) == EXPECTED


def test_reposting_the_loaded_state_or_the_posted_one_is_a_noop(alice_api, saved):
    loaded = json.loads(alice_api.get("/api/v1/threads/t1/agent-state").content)
    again = {"agent_code": "bot", "context": loaded["context"], "extra_state": loaded["extra_state"]}
    answer = alice_api.put("/api/v1/threads/t1/agent-state", again, format="json")
    assert answer.json()["mode"] == "noop" and answer.json()["archived"] == 0
    # An agent that keeps its own copy (with its -0.0) still extends what is stored.
    assert put_raw(alice_api, state_body([FIRST, WITH_NUMBERS])).json()["mode"] == "noop"
    longer = put_raw(alice_api, state_body([FIRST, WITH_NUMBERS, '{"role": "user", "content": "more"}']))
    assert longer.json()["mode"] == "append" and longer.json()["archived"] == 0
    assert Block.objects.filter(archived=True).count() == 0


def test_verify_is_clean_after_such_saves(alice_api, saved):
    code, output = run_verify()
    assert code == 0 and "0 problem(s)" in output, output


def test_thread_and_checkpoint_metadata_and_checkpoint_values_come_back_as_posted(alice_api, saved):
    body = '{"thread_id": "meta", "metadata": ' + POSTED + "}"
    assert alice_api.generic("POST", "/api/v1/threads", body, content_type="application/json").status_code == 201
    assert shape(json.loads(alice_api.get("/api/v1/threads/meta").content)["metadata"]) == EXPECTED
    body = '{"checkpoint_id": "c1", "checkpoint": {"channel_values": {"n": ' + POSTED + '}}, "metadata": ' + POSTED + "}"
    response = alice_api.generic("POST", "/api/v1/threads/t1/checkpoints", body, content_type="application/json")
    assert response.status_code == 201, response.content
    checkpoint = json.loads(alice_api.get("/api/v1/threads/t1/checkpoints/c1").content)
    assert shape(checkpoint["metadata"]) == EXPECTED
    assert shape(checkpoint["checkpoint"]["channel_values"]["n"]) == EXPECTED
    state = json.loads(alice_api.get("/api/v1/threads/t1/state").content)
    assert shape(state["metadata"]) == EXPECTED and shape(state["values"]["n"]) == EXPECTED
    # The numbers also match as filters, as the same numbers.
    found = json.loads(alice_api.get("/api/v1/threads/t1/checkpoints", {"metadata": '{"a": 1e16, "e": 1180591620717411303424}'}).content)
    assert [row["checkpoint_id"] for row in found["results"]] == ["c1"]


def test_a_store_value_comes_back_as_posted(alice_api):
    body = '{"namespace": ["n"], "key": "k", "value": ' + POSTED + "}"
    assert alice_api.generic("PUT", "/api/v1/store/items", body, content_type="application/json").status_code == 204
    item = json.loads(alice_api.get("/api/v1/store/items", {"namespace": "n", "key": "k"}).content)
    assert shape(item["value"]) == EXPECTED
    found = json.loads(alice_api.post("/api/v1/store/items/search", {"filter": {"e": 2**70, "a": {"$gte": 1e16}}}, format="json").content)
    assert [item["key"] for item in found["items"]] == ["k"]


def unzip(response) -> zipfile.ZipFile:
    assert response.status_code == 200
    archive = zipfile.ZipFile(io.BytesIO(b"".join(response.streaming_content)))
    assert archive.testzip() is None
    return archive


def test_exports_with_such_numbers_stream_completely(client, operator, alice_api, saved):
    body = '{"checkpoint_id": "c1", "checkpoint": {"channel_values": {"n": ' + POSTED + '}}, "metadata": ' + POSTED + "}"
    alice_api.generic("POST", "/api/v1/threads/t1/checkpoints", body, content_type="application/json")
    alice_api.generic("PATCH", "/api/v1/threads/t1", '{"metadata": ' + POSTED + "}", content_type="application/json")
    login_client(client, operator)
    for archive, prefix in ((unzip(client.get("/threads/t1/export")), ""),
                            (unzip(client.post("/bulk/export", {"all": "1", "q": "", "action": "export"})), "t1/")):
        manifest = json.loads(archive.read(prefix + "manifest.json"))
        assert manifest["counts"]["checkpoints"] == 1 and manifest["counts"]["context_messages"] == 2
        state = json.loads(archive.read(prefix + "agent-state.json"))
        assert shape(state["context"][1]["n"]) == EXPECTED and shape(state["extra_state"]) == EXPECTED
        assert shape(state["metadata"]) == EXPECTED
        (line,) = archive.read(prefix + "checkpoints.jsonl").decode().splitlines()
        assert shape(json.loads(line)["metadata"]) == EXPECTED
    assert Thread.objects.get(thread_id="t1").extra_state["e"] == 2**70
