"""The latest read's state tag (sessions_app/checkpoints/latest.py): a put on the fast path and
the owner's read of a checkpoint without pending writes answer it; a read sent with it answers
304 in one query while the latest checkpoint is that one, as it was; anything that changes the
answer changes the tag."""

from __future__ import annotations

import pytest

from memoryadmin.errors import Forbidden
from sessions_app.checkpoints import latest
from sessions_app.checkpoints import selectors as cs
from sessions_app.models import Checkpoint
from sessions_app.threads.services import thread_clear

from ..conftest import IS_POSTGRES
from .test_checkpoint_fastpath import grown, put, write
from .test_langgraph_conversation_api import human

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not IS_POSTGRES, reason="the state tag is the fast paths' (PostgreSQL); SQLite reads in full"),
]
BASE = "/api/v1/threads/{}/checkpoints"


def unless(actor, thread_id, tag):
    return latest.checkpoint_latest_unless(actor=actor, thread_id=thread_id, if_none_match=tag)


def stepped(actor, thread_id, count=3):
    """A thread of `count` messages and a next step put as a delta: that put's answer."""
    head = grown(actor, thread_id, count)
    return put(actor, thread_id, "c1", 2, delta={"head": head, "append": [human(count)]}, parent="c0")


@pytest.mark.parametrize("count", [2, 300])
def test_a_read_with_the_put_s_tag_is_unchanged_in_one_query(alice, count, django_assert_num_queries):
    answer = stepped(alice, f"t-{count}", count)
    assert answer.state_tag and answer.as_dict()["state_tag"] == answer.state_tag
    with django_assert_num_queries(1):
        found = unless(alice, f"t-{count}", answer.state_tag)
    row = Checkpoint.objects.get(thread__thread_id=f"t-{count}", checkpoint_id="c1")
    assert found == latest.Unchanged(etag=cs.checkpoint_etag(row))
    # The full read gives the same tag, and that tag answers unchanged too.
    full = latest.checkpoint_latest(actor=alice, thread_id=f"t-{count}")
    assert full.state_tag == answer.state_tag and cs.checkpoint_as_dict(full)["state_tag"] == answer.state_tag
    assert isinstance(unless(alice, f"t-{count}", f'"other", {full.state_tag}'), latest.Unchanged)


def test_writes_a_new_step_or_a_replacement_change_the_answer_and_so_the_tag(alice):
    tag = stepped(alice, "moves").state_tag
    write(alice, "moves", "c1", [("step", 3)])
    found = unless(alice, "moves", tag)
    assert isinstance(found, Checkpoint) and [w.channel for w in found.pending] == ["step"]
    assert getattr(found, "state_tag", None) is None  # a checkpoint with pending writes has none

    tag = stepped(alice, "next").state_tag
    answer = put(alice, "next", "c2", 3, parent="c1")
    assert answer.state_tag != tag and unless(alice, "next", tag).checkpoint_id == "c2"
    assert isinstance(unless(alice, "next", answer.state_tag), latest.Unchanged)

    tag = stepped(alice, "replaced").state_tag
    put(alice, "replaced", "c1", 2, parent="c0", documents=False)  # the same id again: the general path replaces it
    found = unless(alice, "replaced", tag)
    assert isinstance(found, Checkpoint) and "documents" not in found.checkpoint["channel_values"]
    assert found.state_tag != tag


def test_a_change_to_the_thread_s_blocks_changes_the_tag(alice, admin_user):
    tag = stepped(alice, "cleared").state_tag
    thread_clear(actor=admin_user, thread_id="cleared")
    found = unless(alice, "cleared", tag)
    assert isinstance(found, Checkpoint) and found.state_tag != tag


def test_only_the_owner_is_answered_unchanged(alice, bob, admin_user):
    tag = stepped(alice, "alices").state_tag
    with pytest.raises(Forbidden):
        unless(bob, "alices", tag)
    assert isinstance(unless(admin_user, "alices", tag), Checkpoint)  # read in full, as the general path reads for others
    assert isinstance(unless(alice, "alices", "*"), latest.Unchanged)


def test_the_endpoint_answers_304_with_the_checkpoint_s_etag_and_no_body(alice, alice_api, bob_api):
    tag = stepped(alice, "http").state_tag
    url = BASE.format("http") + "/latest"
    full = alice_api.get(url)
    assert full.status_code == 200 and full.json()["state_tag"] == tag
    unchanged = alice_api.get(url, HTTP_IF_NONE_MATCH=tag)
    assert unchanged.status_code == 304 and unchanged.content == b"" and unchanged["ETag"] == full["ETag"]
    assert alice_api.get(url, HTTP_IF_NONE_MATCH='"s0000"').status_code == 200
    assert alice_api.get(url, HTTP_IF_NONE_MATCH="garbage, \x7f").status_code == 200
    assert bob_api.get(url, HTTP_IF_NONE_MATCH=tag).status_code == 403
