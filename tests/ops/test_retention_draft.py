"""The dry run of a policy not saved: the form's values counted by the retention service, threads named, nothing written."""

from __future__ import annotations

import pytest
from django.utils import timezone

from memoryadmin.errors import Forbidden, InvalidInput
from memoryadmin.operations import retention, retention_draft
from memoryadmin.operations.models import RetentionPolicy

from ..conftest import login_client
from .helpers import age_archived, age_thread, checkpoints, compacted, table_counts

pytestmark = pytest.mark.django_db


@pytest.fixture
def estate(alice, bob):
    compacted(alice, "old-chat", 6)
    checkpoints(alice, "old-chat", 5)
    age_archived("old-chat", 40)
    age_thread("old-chat", 40)
    compacted(alice, "busy-chat", 4)
    checkpoints(alice, "busy-chat", 8)
    compacted(bob, "support-1", 8, agent="support")
    checkpoints(bob, "support-1", 6)
    age_archived("support-1", 20)


def test_an_unsaved_policy_counts_what_the_same_policy_saved_would_remove(estate):
    now = timezone.now()
    draft = retention_draft.retention_preview_draft(actor=None, agent_code="", keep_checkpoints="3", release_idle_days="30",
                                              purge_archived_days="30", now=now)
    assert not RetentionPolicy.objects.exists()
    retention.retention_policy_save(actor=None, agent_code="", keep_checkpoints=3, release_idle_days=30, purge_archived_days=30)
    saved = retention.retention_preview(now=now)
    assert draft.impact == saved.total and not draft.impact.is_empty
    # The default covers every agent without a policy: old-chat released and purged, busy-chat and support-1 pruned.
    assert {row["thread_id"]: row["rules"] for row in draft.threads} == {
        "old-chat": ["release", "purge"], "busy-chat": ["keep"], "support-1": ["keep"]}


def test_the_draft_takes_the_place_of_the_saved_policy_of_its_agent(estate):
    retention.retention_policy_save(actor=None, agent_code="support", keep_checkpoints=1)
    retention.retention_policy_save(actor=None, agent_code="", keep_checkpoints=1)
    draft = retention_draft.retention_preview_draft(actor=None, agent_code="support", purge_archived_days="10")
    assert [row["thread_id"] for row in draft.threads] == ["support-1"]  # the default's threads are not this policy's
    assert draft.impact.checkpoints == 0 and draft.impact.blocks > 0
    assert RetentionPolicy.objects.get(agent_code="support").keep_checkpoints == 1


def test_the_list_of_threads_is_bounded(alice):
    for i in range(5):
        compacted(alice, f"t{i}", 3)
        checkpoints(alice, f"t{i}", 3)
    draft = retention_draft.retention_preview_draft(actor=None, keep_checkpoints="1", sample=3)
    assert len(draft.threads) == 3 and draft.impact.threads_pruned == 5


@pytest.mark.parametrize(("rules", "field"), [
    ({"keep_checkpoints": "0"}, "keep_checkpoints"),
    ({"release_idle_days": "soon"}, "release_idle_days"),
    ({"agent_code": "bot", "store_ttl_days": "3"}, "store_ttl_days"),
    ({"agent_code": "x" * 65}, "agent_code"),
    ({"frobnicate": "1"}, "frobnicate"),
])
def test_bad_values_are_refused_naming_the_field(rules, field):
    with pytest.raises(InvalidInput) as refused:
        retention_draft.retention_preview_draft(actor=None, **rules)
    assert field in refused.value.fields


def test_only_admins_dry_run(operator, alice):
    for person in (operator, alice):
        with pytest.raises(Forbidden):
            retention_draft.retention_preview_draft(actor=person, keep_checkpoints="1")


def test_the_page_dry_runs_the_form_without_saving(client, estate, admin_user):
    login_client(client, admin_user)
    before = table_counts()
    form = {"agent_code": "", "keep_checkpoints": "3", "release_idle_days": "30", "purge_archived_days": "", "store_ttl_days": ""}
    response = client.post("/retention/dry-run", form)
    body = response.content.decode()
    assert response.status_code == 200 and "not saved" in body and "nothing was written" in body
    assert "First threads it would touch" in body and 'href="/threads/old-chat/"' in body and "checkpoints released" in body
    assert 'name="keep_checkpoints" value="3"' in body  # the form keeps the values tried
    assert table_counts() == before and not RetentionPolicy.objects.exists()
    bad = client.post("/retention/dry-run", {**form, "keep_checkpoints": "-1"})
    assert bad.status_code == 400 and "keep_checkpoints" in bad.content.decode() and not RetentionPolicy.objects.exists()


def test_operators_may_not_dry_run_a_draft(client, estate, operator):
    login_client(client, operator)
    assert client.post("/retention/dry-run", {"keep_checkpoints": "1"}).status_code == 403


def test_deleting_a_policy_asks_in_the_page_with_the_threads_it_covers(client, estate, admin_user):
    retention.retention_policy_save(actor=None, agent_code="support", keep_checkpoints=1)
    retention.retention_policy_save(actor=None, agent_code="", keep_checkpoints=1)
    login_client(client, admin_user)
    body = client.get("/retention/").content.decode()
    assert 'data-confirm="Delete the retention policy of support? Its 1 thread then follow the default policy."' in body
    assert "It is the default: the 2 threads it covers are then kept forever." in body
    assert 'hx-confirm="Apply every saved policy now? What the dry run lists' in body
    counted = client.get("/retention/", {"dry_run": "1"}).content.decode()
    assert "The dry run counts" in counted and "checkpoints" in counted
