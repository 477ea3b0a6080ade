"""The checkpoint timeline page: rows, selection, diff, escaping, and constant query counts."""

from __future__ import annotations

import base64

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from sessions_app.checkpoints import services as svc
from sessions_app.models import Checkpoint, CheckpointWrite, Thread

from ..conftest import login_client
from sessions_app.checkpoints import lifecycle

pytestmark = pytest.mark.django_db

PAGE = "/threads/t1/checkpoints/"


def message(kind: str, text: str, msg_id: str) -> dict:
    cls = {"human": "HumanMessage", "ai": "AIMessage", "tool": "ToolMessage"}[kind]
    return {"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", cls], "kwargs": {"content": text, "type": kind, "id": msg_id}}


def put(actor, checkpoint_id, values, parent=None, ns="", metadata=None):
    checkpoint = {"v": 4, "id": checkpoint_id, "channel_values": values, "channel_versions": {}, "versions_seen": {}, "updated_channels": sorted(values)}
    data = svc.checkpoint_input(checkpoint=checkpoint, metadata=metadata or {}, checkpoint_ns=ns, parent_checkpoint_id=parent)
    svc.checkpoint_put(actor=actor, thread_id="t1", checkpoint_id=checkpoint_id, data=data)


@pytest.fixture
def history(alice):
    blob = {"$blob": {"type": "bytes", "base64": base64.b64encode(b"SECRET-BYTES").decode()}}
    put(alice, "c1", {"messages": [message("human", "Hello <script>alert(1)</script>", "h1")], "plan": {"a": 1, "b": 2}}, metadata={"step": 0, "source": "input"})
    put(
        alice,
        "c2",
        {"messages": [message("human", "Hello <script>alert(1)</script>", "h1"), message("ai", "Hi! How can I help?", "a1")], "plan": {"a": 1, "c": 3}, "raw": blob},
        parent="c1",
        metadata={"step": 1, "source": "loop"},
    )
    put(alice, "s1", {"inner": 1}, ns="child:1", metadata={"step": 0, "source": "loop"})
    svc.checkpoint_put_writes(
        actor=alice, thread_id="t1", checkpoint_id="c2",
        data=svc.write_input(task_id="task-9", writes=[{"channel": "__interrupt__", "value": [{"value": "<b>approve?</b>"}]}]),
    )
    return Thread.objects.get(thread_id="t1")


def test_the_timeline_lists_checkpoints_newest_first_and_shows_the_newest(history, client, alice):
    login_client(client, alice)
    response = client.get(PAGE)
    assert response.status_code == 200
    html = response.content.decode()
    assert html.index('title="s1"') < html.index('title="c2"') < html.index('title="c1"')
    assert "step 1" in html and ">loop<" in html and "3 checkpoints" in html
    detail = html[html.index('id="checkpoint-detail"'):]
    assert "s1" in detail[:400]


def test_selecting_a_checkpoint_shows_values_writes_and_the_diff_to_its_parent(history, client, alice):
    login_client(client, alice)
    html = client.get(PAGE, {"checkpoint": "c2"}).content.decode()
    detail = html[html.index('id="checkpoint-detail"'):]
    # the diff: one message added, plan's keys, a new blob channel
    assert "+ assistant" in detail and "Hi! How can I help?" in detail
    assert "keys added: <code>c</code>" in detail and "keys removed: <code>b</code>" in detail
    assert "binary value (bytes, 12 bytes)" in detail
    # values as role and content, pending writes, all escaped; never the blob's bytes
    assert '<span class="role-badge">user</span>' in detail
    assert "Hello &lt;script&gt;alert(1)&lt;/script&gt;" in detail and "<script>alert(1)" not in html
    assert "&lt;b&gt;approve?&lt;/b&gt;" in detail and "__interrupt__" in detail
    assert base64.b64encode(b"SECRET-BYTES").decode() not in html


def test_htmx_gets_only_the_detail_fragment(history, client, alice):
    login_client(client, alice)
    response = client.get(PAGE, {"checkpoint": "c1"}, HTTP_HX_REQUEST="true", HTTP_HX_TARGET="checkpoint-detail")
    html = response.content.decode()
    assert html.lstrip().startswith('<section id="checkpoint-detail"') and "<html" not in html
    assert "No parent: every channel is new." in html


def test_the_namespace_filter(history, client, alice):
    login_client(client, alice)
    root = client.get(PAGE, {"ns": ""}).content.decode()
    assert 'title="c2"' in root and 'title="s1"' not in root and "(root)" in root
    child = client.get(PAGE, {"ns": "child:1"}).content.decode()
    assert 'title="s1"' in child and 'title="c2"' not in child


def test_unknown_or_bad_checkpoints_are_404_and_400_pages(history, client, alice):
    login_client(client, alice)
    assert client.get(PAGE, {"checkpoint": "nope"}).status_code == 404
    assert client.get(PAGE, {"checkpoint": "bad id"}).status_code == 400
    assert client.get("/threads/nope/checkpoints/").status_code == 404


def test_an_empty_thread_says_so(client, alice):
    lifecycle.thread_create(actor=alice, thread_id="t1")
    login_client(client, alice)
    assert b"No checkpoint" in client.get(PAGE).content


def test_the_thread_page_links_to_the_timeline(history, client, alice):
    login_client(client, alice)
    assert b'href="/threads/t1/checkpoints/"' in client.get("/threads/t1/").content


def _fill(alice, count):
    thread = Thread.objects.get_or_create(thread_id="t1", owner=alice)[0]
    Checkpoint.objects.filter(thread=thread).delete()
    CheckpointWrite.objects.filter(thread=thread).delete()
    rows = Checkpoint.objects.bulk_create(
        Checkpoint(
            thread=thread,
            checkpoint_id=f"c{i}",
            parent_checkpoint_id=f"c{i - 1}" if i else "",
            checkpoint={"channel_values": {"messages": [message("human", f"m{j}", f"m{j}") for j in range(i % 5)]}, "updated_channels": ["messages"]},
            metadata={"step": i, "source": "loop"},
        )
        for i in range(count)
    )
    CheckpointWrite.objects.bulk_create(
        CheckpointWrite(thread=thread, checkpoint_id=row.checkpoint_id, task_id="t", idx=0, channel="messages", value=[]) for row in rows
    )


def test_the_page_costs_the_same_queries_for_10_and_100_checkpoints(client, alice, django_assert_num_queries):
    login_client(client, alice)
    counts = []
    for count in (10, 100):
        _fill(alice, count)
        with CaptureQueriesContext(connection) as captured:
            response = client.get(PAGE)
        assert response.status_code == 200
        counts.append(len(captured))
    assert counts[0] == counts[1]
    with django_assert_num_queries(counts[0]):
        client.get(PAGE, {"checkpoint": "c50"})


def test_the_thread_detail_reads_the_latest_checkpoint_in_one_more_query(alice, alice_api, django_assert_num_queries):
    put(alice, "c1", {"messages": [message("human", "hi", "h1")], "branch:to:agent": None})
    svc.checkpoint_put_writes(
        actor=alice, thread_id="t1", checkpoint_id="c1",
        data=svc.write_input(task_id="x", writes=[{"channel": "__interrupt__", "value": [{"value": "ok?"}]}]),
    )
    put(alice, "s1", {"inner": 1}, ns="child:1")
    detail = alice_api.get("/api/v1/threads/t1").json()
    assert detail["checkpoints"] == 2 and detail["status"] == "interrupted"
    assert detail["values"] == {"messages": [{"content": "hi", "type": "human", "id": "h1"}]}
    from sessions_app.checkpoints.langgraph import thread_detail

    with CaptureQueriesContext(connection) as base:
        thread_detail(actor=alice, thread_id="t1")
    # The latest checkpoint holds its messages by reference to the thread's blocks: one more
    # query reads them, whatever their number; a thread without checkpoints takes neither.
    Thread.objects.create(thread_id="empty", owner=alice)
    with django_assert_num_queries(len(base) - 1):
        assert thread_detail(actor=alice, thread_id="empty")["checkpoints"] == 0
    from sessions_app.threads.selectors import thread_get_for_read

    with CaptureQueriesContext(connection) as read_only:
        thread_get_for_read(actor=alice, thread_id="t1")
    assert len(base) == len(read_only) + 2


def test_any_two_checkpoints_compare_not_only_a_parent_and_child(history, client, alice):
    put(alice, "c3", {"messages": [message("human", "Hello <script>alert(1)</script>", "h1"), message("ai", "Hi! How can I help?", "a1"),
                                   message("human", "Book it", "h2")], "plan": {"a": 9, "c": 3}}, parent="c2")
    login_client(client, alice)
    html = client.get(PAGE, {"compare": ["c3", "c1"]}).content.decode()
    detail = html[html.index('id="checkpoint-detail"'):]
    assert "Comparing two checkpoints" in detail
    assert detail.index("<code>c1</code>") < detail.index("<code>c3</code>")  # the older one is the base
    # Both messages added since c1 (one in c2, one in c3), and the plan's keys across both steps.
    assert "Hi! How can I help?" in detail and "Book it" in detail and detail.count("+ assistant") == 1
    assert "keys removed: <code>b</code>" in detail and "keys added: <code>c</code>" in detail and "keys changed: <code>a</code>" in detail
    assert "<script>alert(1)" not in html and 'data-copy-text="c3"' in html
    fragment = client.get(PAGE, {"compare": ["c1", "c3"]}, HTTP_HX_REQUEST="true", HTTP_HX_TARGET="checkpoint-detail")
    assert fragment.content.decode().lstrip().startswith('<section id="checkpoint-detail"')


def test_comparing_needs_exactly_two_valid_checkpoints(history, client, alice):
    login_client(client, alice)
    one = client.get(PAGE, {"compare": ["c1"]})
    assert one.status_code == 200 and "Tick exactly two checkpoints" in one.content.decode()
    assert client.get(PAGE, {"compare": ["c1", "nope"]}).status_code == 404
    assert client.get(PAGE, {"compare": ["c1", "bad id\n"]}).status_code == 400
