"""Thread bundles: the zip's files and manifest, streaming, ownership, the API endpoint, bulk export."""

from __future__ import annotations

import hashlib
import io
import json
import zipfile

import pytest

from memoryadmin.models import AuditEvent
from sessions_app.models import Thread

from ..conftest import login_client, message_envelope
from .helpers import checkpoints, save, table_counts, turns

pytestmark = pytest.mark.django_db


def unzip(response) -> zipfile.ZipFile:
    assert response.status_code == 200 and response.streaming
    assert response["Content-Type"] == "application/zip"
    data = b"".join(response.streaming_content)
    archive = zipfile.ZipFile(io.BytesIO(data))
    assert archive.testzip() is None
    return archive


def check_manifest(archive: zipfile.ZipFile, prefix: str = "") -> dict:
    manifest = json.loads(archive.read(prefix + "manifest.json"))
    for name in ("transcript.md", "agent-state.json", "checkpoints.jsonl"):
        body = archive.read(prefix + name)
        assert manifest["files"][name] == {"bytes": len(body), "sha256": hashlib.sha256(body).hexdigest()}
    return manifest


@pytest.fixture
def thread(alice):
    save(alice, "t1", turns(6), extra_state={"plan": "go"}, extra_state_given=True)
    save(alice, "t1", [{"role": "system", "content": "summary", "name": "__compaction_summary__"}, *turns(2, "n")])
    save(alice, "t1", [{"role": "system", "content": "summary", "name": "__compaction_summary__"}, *turns(2, "n"),
                       {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "lookup", "args": {"q": 1}}]}])
    checkpoints(alice, "t1", 3, writes=2)
    return Thread.objects.get(thread_id="t1")


def test_a_bundle_holds_the_transcript_state_checkpoints_and_a_manifest(client, alice, thread):
    login_client(client, alice)
    response = client.get("/threads/t1/export")
    assert response["Content-Disposition"] == 'attachment; filename="thread-t1.zip"'
    archive = unzip(response)
    assert sorted(archive.namelist()) == ["agent-state.json", "checkpoints.jsonl", "manifest.json", "transcript.md"]
    manifest = check_manifest(archive)
    assert manifest["format"] == "memoryadmin-thread-bundle/1" and manifest["exported_by"] == "alice"
    assert manifest["counts"] == {
        "blocks": 10, "active_blocks": 4, "archived_blocks": 6, "context_messages": 4, "checkpoints": 3, "pending_writes": 6
    }
    state = json.loads(archive.read("agent-state.json"))
    assert state["extra_state"] == {"plan": "go"} and state["agent_code"] == "bot"
    assert state["context"][-1]["tool_calls"][0]["name"] == "lookup"
    assert state["context"] == client.get("/api/v1/threads/t1/agent-state").json()["context"]
    lines = archive.read("checkpoints.jsonl").decode().splitlines()
    records = [json.loads(line) for line in lines]
    assert [r["checkpoint_id"] for r in records] == ["root-0000", "root-0001", "root-0002"]
    assert records[1]["parent_checkpoint_id"] == "root-0000" and len(records[1]["pending_writes"]) == 2
    transcript = archive.read("transcript.md").decode()
    assert transcript.startswith("# m 0") and "archived by rewrite #1" in transcript and "lookup" in transcript


def test_an_export_of_a_large_thread_streams_and_counts_everything(alice, alice_api):
    size = 20_000
    save(alice, "big", turns(size))
    response = alice_api.get("/api/v1/threads/big/export")
    chunks = list(response.streaming_content)
    assert len(chunks) > 2  # streamed in pieces, not built whole
    archive = zipfile.ZipFile(io.BytesIO(b"".join(chunks)))
    manifest = check_manifest(archive)
    assert manifest["counts"]["blocks"] == manifest["counts"]["context_messages"] == size
    state = json.loads(archive.read("agent-state.json"))
    assert len(state["context"]) == size and state["context"][-1]["id"] == f"m-{size - 1}"


def test_members_cannot_export_another_users_thread(client, bob, thread, bob_api):
    before = table_counts()
    login_client(client, bob)
    assert client.get("/threads/t1/export").status_code == 403
    assert bob_api.get("/api/v1/threads/t1/export").status_code == 403
    after = table_counts()
    assert after.pop("audit") == before.pop("audit") + 2 and after == before
    assert AuditEvent.objects.filter(action="access.denied", target="thread:t1").count() == 2


def test_operators_export_and_it_is_audited_once(operator_api, thread):
    archive = unzip(operator_api.get("/api/v1/threads/t1/export"))
    assert check_manifest(archive)["exported_by"] == "olivia"
    events = AuditEvent.objects.filter(target="thread:t1", actor_name="olivia")
    assert [e.action for e in events] == ["thread.export"]


def test_exporting_a_missing_thread_is_a_404(alice_api):
    assert alice_api.get("/api/v1/threads/nope/export").status_code == 404
    assert alice_api.get("/api/v1/threads/bad%20id/export").status_code == 400


def test_the_thread_page_links_to_its_export(client, alice, thread):
    login_client(client, alice)
    assert 'href="/threads/t1/export"' in client.get("/threads/t1/").content.decode()


def test_a_bulk_export_has_one_folder_per_thread(client, operator, alice, bob, thread):
    save(bob, "b1", turns(3))
    login_client(client, operator)
    archive = unzip(client.post("/bulk/export", {"ids": ["t1", "b1"], "action": "export"}))
    assert check_manifest(archive, "t1/")["counts"]["checkpoints"] == 3
    assert check_manifest(archive, "b1/")["counts"]["blocks"] == 3
    index = json.loads(archive.read("index.json"))
    assert [t["thread_id"] for t in index["threads"]] == ["t1", "b1"]
    event = AuditEvent.objects.get(action="bulk.export")
    assert event.detail == {"selection": {"ids": ["t1", "b1"]}, "threads": 2}


def test_a_members_bulk_export_holds_only_their_threads(client, alice, bob, thread):
    save(bob, "b1", turns(3))
    login_client(client, alice)
    archive = unzip(client.post("/bulk/export", {"all": "1", "q": "", "action": "export"}))
    assert {name.split("/")[0] for name in archive.namelist()} == {"t1", "index.json"}
    archive = unzip(client.post("/bulk/export", {"ids": ["t1", "b1"], "action": "export"}))
    assert "b1/manifest.json" not in archive.namelist()


def test_a_langgraph_thread_s_transcript_shows_its_tool_calls_and_names(client, alice):
    """Its blocks are LangChain envelopes: the name and tool calls sit in their kwargs."""
    from sessions_app.checkpoints.conversation import block_messages

    save(alice, "lg", block_messages([
        message_envelope("HumanMessage", content="weather in Oslo?", type="human"),
        message_envelope("AIMessage", content="", type="ai", name="planner",
                         tool_calls=[{"name": "get_weather", "args": {"city": "Oslo"}, "id": "call-1", "type": "tool_call"}]),
        message_envelope("ToolMessage", content="rainy", type="tool", name="get_weather", tool_call_id="call-1"),
    ]))
    transcript = unzip(login_client(client, alice).get("/threads/lg/export")).read("transcript.md").decode()
    assert "## #2 · assistant · tool_call · planner ·" in transcript and '"name": "get_weather"' in transcript
    assert '"city": "Oslo"' in transcript and "## #3 · tool · tool_result · get_weather ·" in transcript
