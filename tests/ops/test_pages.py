"""The retention page, the navigation, and the operations schema."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from memoryadmin.models import AuditEvent
from memoryadmin.operations import retention
from memoryadmin.operations.models import RetentionPolicy, RetentionRun
from sessions_app.models import Checkpoint

from ..conftest import IS_POSTGRES, login_client
from .helpers import age_archived, checkpoints, compacted, table_counts

pytestmark = pytest.mark.django_db


@pytest.fixture
def estate(alice):
    compacted(alice, "t1", 6)
    checkpoints(alice, "t1", 6)
    age_archived("t1", 60)
    RetentionPolicy.objects.create(agent_code="", keep_checkpoints=2, purge_archived_days=30)


def test_admins_edit_policies_from_the_page(client, admin_user):
    login_client(client, admin_user)
    response = client.post(
        "/retention/policies", {"agent_code": "bot", "keep_checkpoints": "5", "purge_archived_days": "", "store_ttl_days": ""}
    )
    assert response.status_code == 302
    policy = RetentionPolicy.objects.get(agent_code="bot")
    assert policy.keep_checkpoints == 5 and policy.purge_archived_days is None and policy.updated_by == admin_user
    body = client.get("/retention/?edit=bot").content.decode()
    assert 'name="keep_checkpoints" value="5"' in body
    bad = client.post("/retention/policies", {"agent_code": "bot", "store_ttl_days": "3"})
    assert bad.status_code == 400 and "store_ttl_days" in bad.content.decode()
    client.post("/retention/policies/delete", {"agent_code": "bot"})
    assert not RetentionPolicy.objects.exists()
    assert AuditEvent.objects.filter(action__startswith="retention.policy").count() == 2


def test_the_dry_run_shows_what_would_go_and_writes_nothing(client, estate, admin_user):
    login_client(client, admin_user)
    before = table_counts()
    body = client.get("/retention/?dry_run=1").content.decode()
    assert "nothing was written" in body and "data-total-checkpoints>4<" in body and "data-total-blocks>6<" in body
    assert table_counts() == before


def test_an_apply_from_the_page_is_a_run_in_the_history(client, estate, admin_user, django_capture_on_commit_callbacks):
    login_client(client, admin_user)
    # Without a queue (SQLite) the apply runs once the request's transaction commits.
    with django_capture_on_commit_callbacks(execute=not IS_POSTGRES):
        response = client.post("/retention/apply")
    assert response.status_code == 302
    run = RetentionRun.objects.get()
    if IS_POSTGRES:
        assert run.status == "queued" and Checkpoint.objects.count() == 6
        assert f'data-run="{run.pk}"' in client.get("/retention/").content.decode()
        retention.retention_run_queued(run_id=run.pk)  # what the worker runs
        run.refresh_from_db()
    assert run.via == "web" and run.status == "done" and run.counts["checkpoints"] == 4
    assert Checkpoint.objects.count() == 2
    body = client.get("/retention/").content.decode()
    assert f'data-run="{run.pk}"' in body and 'class="tag status-done"' in body


def test_operators_read_the_page_but_change_nothing(client, estate, operator):
    login_client(client, operator)
    body = client.get("/retention/").content.decode()
    assert "Keep checkpoints" in body and "Apply now" not in body and "Save policy" not in body
    before = table_counts()
    assert client.get("/retention/?dry_run=1").status_code == 403
    assert client.post("/retention/apply").status_code == 403
    assert client.post("/retention/policies", {"agent_code": "x", "keep_checkpoints": "1"}).status_code == 403
    assert client.post("/retention/policies/delete", {"agent_code": ""}).status_code == 403
    after = table_counts()
    assert after.pop("audit") == before.pop("audit") + 4 and after == before


def test_members_cannot_see_retention(client, estate, alice):
    login_client(client, alice)
    assert client.get("/retention/").status_code == 403


def test_the_navigation_shows_operations_links_by_role(client, alice, admin_user):
    body = login_client(client, alice).get("/threads/").content.decode()
    assert 'href="/search/"' in body and 'href="/audit/"' not in body and 'href="/retention/"' not in body
    body = login_client(client, admin_user).get("/threads/").content.decode()
    assert 'href="/audit/"' in body and 'href="/retention/"' in body


@pytest.mark.parametrize("rows", [5, 50])
def test_the_retention_page_takes_the_same_queries_at_any_size(client, admin_user, rows, django_assert_num_queries):
    for i in range(rows):
        RetentionPolicy.objects.create(agent_code=f"agent-{i}", keep_checkpoints=3, updated_by=admin_user)
        RetentionRun.objects.create(cutoff_now="2026-01-01T00:00:00Z", counts={"checkpoints": i})
    login_client(client, admin_user)
    # session, user, role, policies (with their editor), threads per policy (for the delete's confirmation), runs
    with django_assert_num_queries(6):
        assert client.get("/retention/").status_code == 200


def test_the_operations_endpoints_are_in_a_clean_schema(tmp_path):
    out = tmp_path / "schema.yml"
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(out))
    text = out.read_text()
    assert "/api/v1/search/messages" in text and "/api/v1/threads/{thread_id}/export" in text
