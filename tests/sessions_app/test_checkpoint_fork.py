"""Time travel: forking a thread's history from a checkpoint, and the branches the timeline shows."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memoryadmin.errors import Forbidden, InvalidInput
from memoryadmin.models import AuditEvent
from sessions_app.checkpoints import services as svc
from sessions_app.checkpoints import state_update
from sessions_app.checkpoints.branches import checkpoint_branches_in
from sessions_app.models import Checkpoint, Thread

from ..conftest import login_client

pytestmark = pytest.mark.django_db

PAGE = "/threads/t1/checkpoints/"
FORK = "/threads/t1/checkpoints/fork"


def human(text: str, msg_id: str) -> dict:
    return {"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", "HumanMessage"], "kwargs": {"content": text, "type": "human", "id": msg_id}}


def ai(text: str, msg_id: str) -> dict:
    return {"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", "AIMessage"], "kwargs": {"content": text, "type": "ai", "id": msg_id}}


def put(actor, checkpoint_id, body, parent=None, metadata=None, thread_id="t1"):
    body = {"v": 4, "id": checkpoint_id, "ts": "2026-12-01T10:00:00+00:00", **body}
    data = svc.checkpoint_input(checkpoint=body, metadata=metadata or {}, parent_checkpoint_id=parent)
    svc.checkpoint_put(actor=actor, thread_id=thread_id, checkpoint_id=checkpoint_id, data=data)


def langgraph_run(actor, thread_id="t1"):
    """What LangGraph writes for START → agent → END: the input, START's step, the agent's step."""
    question = human("Refund order A-1042?", "h1")
    put(actor, "c0", {"channel_values": {"__start__": {"messages": [question]}}, "channel_versions": {"__start__": 1},
                      "versions_seen": {"__input__": {}}}, metadata={"source": "input", "step": -1}, thread_id=thread_id)
    put(actor, "c1", {"channel_values": {"messages": [question], "branch:to:agent": None},
                      "channel_versions": {"__start__": 2, "messages": 2, "branch:to:agent": 2},
                      "versions_seen": {"__input__": {}, "__start__": {"__start__": 1}}},
        parent="c0", metadata={"source": "loop", "step": 0}, thread_id=thread_id)
    put(actor, "c2", {"channel_values": {"messages": [question, ai("Refunded.", "a1")], "note": "draft"},
                      "channel_versions": {"__start__": 2, "messages": 3, "branch:to:agent": 2, "note": 3},
                      "versions_seen": {"__input__": {}, "__start__": {"__start__": 1}, "agent": {"branch:to:agent": 2}}},
        parent="c1", metadata={"source": "loop", "step": 1}, thread_id=thread_id)


@pytest.fixture
def history(alice):
    langgraph_run(alice)
    return Thread.objects.get(thread_id="t1")


def newest():
    """The newest checkpoint as it reads back: its messages put back from the thread's blocks."""
    from sessions_app.checkpoints.conversation import checkpoints_hydrate

    return checkpoints_hydrate([Checkpoint.objects.filter(thread__thread_id="t1").order_by("-id").first()])[0]


# --- the service -------------------------------------------------------------------------------


def test_a_fork_is_a_new_checkpoint_whose_parent_is_the_chosen_one(history, alice):
    result = state_update.checkpoint_fork(actor=alice, thread_id="t1", checkpoint_id="c1", values='{"note": "checked"}')
    fork = newest()
    assert result["checkpoint"]["checkpoint_id"] == fork.checkpoint_id not in ("c0", "c1", "c2")
    assert fork.parent_checkpoint_id == "c1"
    assert fork.checkpoint["channel_values"]["note"] == "checked"
    assert [m["kwargs"]["id"] for m in fork.checkpoint["channel_values"]["messages"]] == ["h1"]  # c1's, not c2's
    assert fork.metadata == {"source": "update", "step": 1, "parents": {}}
    assert fork.node_id == "__start__"  # as_node left out: inferred as LangGraph infers it
    assert AuditEvent.objects.filter(action="checkpoint.fork").count() == 0  # the owner's own fork


def test_the_fork_is_the_update_state_the_api_makes(history, alice):
    """The same service: a fork from the dashboard and the API's update_state write the same state."""
    state_update.checkpoint_fork(actor=alice, thread_id="t1", checkpoint_id="c1", values='{"note": "x"}', as_node="__start__")
    forked = newest()
    state_update.thread_update_state(actor=alice, thread_id="t1", values={"note": "x"}, as_node="__start__", checkpoint_id="c1")
    updated = newest()
    assert forked.pk != updated.pk and updated.parent_checkpoint_id == forked.parent_checkpoint_id == "c1"
    assert forked.checkpoint["channel_values"] == updated.checkpoint["channel_values"]
    assert forked.checkpoint["channel_versions"] == updated.checkpoint["channel_versions"]
    assert (forked.node_id, forked.next_node_id) == (updated.node_id, updated.next_node_id)


def test_messages_given_to_a_fork_merge_by_id(history, alice):
    values = '{"messages": [{"type": "human", "content": "Actually, keep it.", "id": "h1"}]}'
    state_update.checkpoint_fork(actor=alice, thread_id="t1", checkpoint_id="c2", values=values)
    messages = newest().checkpoint["channel_values"]["messages"]
    assert len(messages) == 2 and "Actually, keep it." in str(messages[0]) and "Refunded." in str(messages[1])


def test_an_admin_forks_another_users_thread_and_it_is_audited(history, admin_user, alice):
    state_update.checkpoint_fork(actor=admin_user, thread_id="t1", checkpoint_id="c1", values='{"note": "by admin"}')
    fork = newest()
    assert fork.parent_checkpoint_id == "c1" and fork.thread.owner == alice
    event = AuditEvent.objects.get(action="checkpoint.fork")
    assert event.actor == admin_user and event.target == "thread:t1"
    assert event.detail["owner"] == "alice" and event.detail["parent_checkpoint_id"] == "c1"
    assert event.detail["checkpoint_id"] == fork.checkpoint_id and event.detail["keys"] == ["note"]


@pytest.mark.parametrize("who", ["operator", "bob"])
def test_operators_and_other_members_may_not_fork(history, who, request):
    before = Checkpoint.objects.count()
    with pytest.raises(Forbidden):
        state_update.checkpoint_fork(actor=request.getfixturevalue(who), thread_id="t1", checkpoint_id="c1", values="{}")
    assert Checkpoint.objects.count() == before


@pytest.mark.parametrize(
    ("values", "as_node", "field"),
    [
        ("{not json", "", "values"),
        ("[1, 2]", "", "values"),
        ('"text"', "", "values"),
        ('{"__pregel_tasks": []}', "", "values.__pregel_tasks"),
        ('{"messages": [{"content": "no role"}]}', "", "values.messages"),
        ("{}", "no-such-node", "as_node"),
        ("{}", "__end__", "as_node"),
    ],
)
def test_bad_input_is_refused_naming_the_field_and_writes_nothing(history, alice, values, as_node, field):
    before = Checkpoint.objects.count()
    with pytest.raises(InvalidInput) as refused:
        state_update.checkpoint_fork(actor=alice, thread_id="t1", checkpoint_id="c1", values=values, as_node=as_node)
    assert any(name.startswith(field) for name in refused.value.fields), refused.value.fields
    assert Checkpoint.objects.count() == before


def test_a_saver_snapshot_cannot_be_forked(alice):
    put(alice, "s1", {"channel_values": {"node": "start"}})
    with pytest.raises(InvalidInput) as refused:
        state_update.checkpoint_fork(actor=alice, thread_id="t1", checkpoint_id="s1", values="{}")
    assert "checkpoint" in refused.value.fields


# --- branches ----------------------------------------------------------------------------------


def test_branches_are_forks_and_the_latest_branch_is_the_newest_ones_chain(history, alice):
    state_update.checkpoint_fork(actor=alice, thread_id="t1", checkpoint_id="c1", values='{"note": "other"}')
    fork = newest()
    branches = checkpoint_branches_in(thread=history)
    assert (branches.total, branches.fork_count, branches.branch_count) == (4, 1, 2)
    assert [f.checkpoint.checkpoint_id for f in branches.forks] == [fork.checkpoint_id]
    assert branches.forks[0].on_latest_branch
    from sessions_app.checkpoints import timeline as tl

    rows = {row.checkpoint.checkpoint_id: row for row in tl.checkpoint_timeline(actor=alice, thread_id="t1").rows}
    assert {name for name, row in rows.items() if row.fork} == {fork.checkpoint_id}
    assert {name for name, row in rows.items() if row.on_latest_branch} == {fork.checkpoint_id, "c1", "c0"}
    assert not rows["c2"].on_latest_branch  # the branch left behind


# --- the page ----------------------------------------------------------------------------------


def test_the_owner_forks_from_the_timeline_and_sees_the_branch(history, client, alice):
    login_client(client, alice)
    html = client.get(PAGE, {"checkpoint": "c1"}).content.decode()
    assert "Fork from here" in html and 'name="checkpoint" value="c1"' in html
    # The editor starts empty (it showed the repr of a dict's `values` method), on the page and in the pane.
    assert re.search(r'<textarea id="fork-values"[^>]*></textarea>', html)
    pane = client.get(PAGE, {"checkpoint": "c1"}, HTTP_HX_REQUEST="true", HTTP_HX_TARGET="checkpoint-detail")
    assert re.search(r'<textarea id="fork-values"[^>]*></textarea>', pane.content.decode())
    assert "dict_values" not in html + pane.content.decode()
    response = client.post(FORK, {"checkpoint": "c1", "cns": "", "values": '{"note": "checked"}', "as_node": ""})
    fork = newest()
    assert response.status_code == 302 and response["Location"] == f"{PAGE}?checkpoint={fork.checkpoint_id}&cns="
    page = client.get(response["Location"]).content.decode()
    assert "Forked: new checkpoint" in page and 'data-fork' in page and "branches off" in page
    assert page.count("on-latest-branch") == 3 and page.count("off-branch") == 1


def test_an_admin_forks_from_the_timeline_and_an_audit_row_says_so(history, client, admin_user):
    login_client(client, admin_user)
    assert "Fork from here" in client.get(PAGE, {"checkpoint": "c2"}).content.decode()
    response = client.post(FORK, {"checkpoint": "c2", "values": "", "as_node": "agent"})
    assert response.status_code == 302 and newest().parent_checkpoint_id == "c2"
    assert AuditEvent.objects.filter(action="checkpoint.fork", actor=admin_user, target="thread:t1").count() == 1


def test_operators_see_no_fork_control_and_their_post_is_a_403(history, client, operator):
    login_client(client, operator)
    html = client.get(PAGE, {"checkpoint": "c1"}).content.decode()
    assert "Fork from here" not in html and "fork-form" not in html
    before = Checkpoint.objects.count()
    response = client.post(FORK, {"checkpoint": "c1", "values": "{}"})
    assert response.status_code == 403 and Checkpoint.objects.count() == before
    assert AuditEvent.objects.filter(action="access.denied", actor=operator).exists()


def test_another_member_can_neither_see_nor_fork(history, client, bob):
    login_client(client, bob)
    assert client.get(PAGE).status_code == 403
    before = Checkpoint.objects.count()
    assert client.post(FORK, {"checkpoint": "c1", "values": "{}"}).status_code == 403
    assert Checkpoint.objects.count() == before


def test_bad_json_comes_back_inline_naming_the_field_with_the_text_kept_and_escaped(history, client, alice):
    login_client(client, alice)
    before = Checkpoint.objects.count()
    hostile = '{"note": "</textarea><script>alert(1)</script>"'
    response = client.post(FORK, {"checkpoint": "c1", "values": hostile, "as_node": ""})
    html = response.content.decode()
    assert response.status_code == 400 and Checkpoint.objects.count() == before
    assert 'id="fork-values-error"' in html and "values: is not valid JSON" in html
    assert "&lt;/textarea&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in html and "<script>alert(1)" not in html
    assert '<details class="cp-fork" open>' in html and 'aria-invalid="true"' in html
    unknown = client.post(FORK, {"checkpoint": "c1", "values": "{}", "as_node": "<b>ghost</b>"})
    page = unknown.content.decode()
    assert unknown.status_code == 400 and "as_node: node" in page and "<b>ghost</b>" not in page
    assert 'id="fork-values-error"' not in page and 'aria-invalid' not in page  # the values were fine
    internal = client.post(FORK, {"checkpoint": "c1", "values": '{"branch:to:x": 1}'}).content.decode()
    assert 'id="fork-values-error"' in internal and "values.branch:to:x: is not a state key" in internal
    assert client.post(FORK, {"checkpoint": "bad id\n", "values": "{}"}).status_code == 400
    assert client.post(FORK, {"checkpoint": "nope", "values": "{}"}).status_code == 404
    assert Checkpoint.objects.count() == before


def test_the_thread_page_shows_the_branches(history, client, alice):
    state_update.checkpoint_fork(actor=alice, thread_id="t1", checkpoint_id="c1", values="{}")
    login_client(client, alice)
    assert 'hx-get="/threads/t1/checkpoints/branches"' in client.get("/threads/t1/").content.decode()
    fragment = client.get("/threads/t1/checkpoints/branches", HTTP_HX_REQUEST="true").content.decode()
    assert "4 checkpoints" in fragment and "2 branches" in fragment and "latest branch" in fragment


def _forked_history(alice, count):
    """`count` checkpoints where every fifth goes on from two checkpoints back (a fork)."""
    thread = Thread.objects.get_or_create(thread_id="t1", owner=alice)[0]
    Checkpoint.objects.filter(thread=thread).delete()
    Checkpoint.objects.bulk_create(
        Checkpoint(
            thread=thread,
            checkpoint_id=f"c{i}",
            parent_checkpoint_id=(f"c{i - 2}" if i % 5 == 0 else f"c{i - 1}") if i > 1 else ("c0" if i else ""),
            checkpoint={"channel_values": {"n": i}, "channel_versions": {"n": i}, "versions_seen": {}},
            metadata={"step": i, "source": "loop"},
        )
        for i in range(count)
    )


def test_the_timeline_and_the_branches_cost_the_same_queries_for_10_and_120_checkpoints(client, alice):
    login_client(client, alice)
    counts = []
    for count in (10, 120):
        _forked_history(alice, count)
        with CaptureQueriesContext(connection) as page:
            html = client.get(PAGE).content.decode()
        with CaptureQueriesContext(connection) as fragment:
            client.get("/threads/t1/checkpoints/branches")
        assert "data-fork" in html
        counts.append((len(page), len(fragment)))
    assert counts[0] == counts[1]
    branches = checkpoint_branches_in(thread=Thread.objects.get(thread_id="t1"))
    assert branches.fork_count == len([i for i in range(2, 120) if i % 5 == 0])


def test_hostile_namespaces_and_ids_stay_text_in_the_branch_marks(client, alice):
    hostile = "<img src=x onerror=alert(1)>"
    thread = Thread.objects.create(thread_id="t1", owner=alice)
    Checkpoint.objects.bulk_create(
        Checkpoint(thread=thread, checkpoint_ns=hostile, checkpoint_id=name, parent_checkpoint_id=parent,
                   checkpoint={"channel_values": {"x": hostile}}, metadata={"step": hostile})
        for name, parent in (("a", ""), ("b", "a"), ("c", "a"))
    )
    login_client(client, alice)
    pages = [client.get(PAGE).content.decode(), client.get("/threads/t1/checkpoints/branches").content.decode()]
    for page in pages:
        assert "<img src=x" not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    assert "data-fork" in pages[0] and "2 branches" in pages[1]
