"""Bulk actions from the thread list: selection, preview (writes nothing), batched jobs, permissions."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memoryadmin import roles
from memoryadmin.errors import Forbidden
from memoryadmin.models import AuditEvent
from memoryadmin.operations import bulk
from memoryadmin.operations.models import BulkJob
from sessions_app.models import Block, Checkpoint, Thread

from ..conftest import IS_POSTGRES, login_client
from .helpers import broken_parents, checkpoints, compacted, save, table_counts, turns

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def threads(alice, bob):
    for i in range(5):
        save(alice, f"kyoto-{i}", turns(4, f"k{i}"))
        checkpoints(alice, f"kyoto-{i}", 2)
    compacted(bob, "bob-kyoto", 4)
    save(bob, "other", turns(2), agent="special")


def preview(client, action, **data):
    return client.post("/bulk/preview", {"action": action, **data})


def run_job(client, job_id):
    """Run the job as the queue's worker does (tests/ops/test_queue.py runs real workers), then read its fragment."""
    bulk.bulk_run(job_id=job_id)
    response = client.get(f"/bulk/{job_id}/", **HX)
    assert response.status_code == 200
    return response


def test_the_preview_counts_the_impact_and_writes_nothing(client, threads, admin_user):
    login_client(client, admin_user)
    before = table_counts()
    response = preview(client, "purge", all="1", q="kyoto")
    assert response.status_code == 200
    impact = response.context["impact"]
    assert (impact.threads, impact.active_blocks, impact.archived_blocks, impact.checkpoints, impact.pending_writes) == (6, 21, 4, 10, 10)
    body = response.content.decode()
    assert 'data-impact="threads">6<' in body and 'name="all" value="1"' in body and 'name="q" value="kyoto"' in body
    assert table_counts() == before


def test_ticked_rows_are_previewed_as_ticked(client, threads, admin_user):
    login_client(client, admin_user)
    response = preview(client, "clear", ids=["kyoto-1", "bob-kyoto"])
    assert response.context["impact"].threads == 2
    body = response.content.decode()
    assert 'name="ids" value="kyoto-1"' in body and 'name="ids" value="bob-kyoto"' in body


def test_a_clear_job_runs_in_batches_and_is_audited(client, threads, admin_user):
    login_client(client, admin_user)
    response = client.post("/bulk/start", {"action": "clear", "all": "1", "q": "kyoto"})
    job = BulkJob.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/bulk/{job.pk}/"
    assert job.status == "pending" and job.total == 6 and job.preview["active_blocks"] == 21
    page = client.get(f"/bulk/{job.pk}/").content.decode()
    # The page reads the job's progress and drives nothing: no step endpoint, no POST.
    assert f'hx-get="/bulk/{job.pk}/"' in page and 'hx-trigger="every 2s"' in page and "hx-post" not in page
    assert client.post(f"/bulk/{job.pk}/step").status_code == 404
    # Two threads per batch: the progress moves step by step, and the page shows it.
    first = bulk.bulk_step(actor=admin_user, job_id=job.pk, batch=2)
    assert (first.status, first.processed, first.percent) == ("running", 2, 33)
    fragment = client.get(f"/bulk/{job.pk}/", **HX).content.decode()
    assert 'data-status="running"' in fragment and "2 of 6 threads processed (33%)" in fragment
    final = run_job(client, job.pk)
    job.refresh_from_db()
    assert job.status == "done" and job.processed == 6 and job.counts == {"threads": 6, "blocks": 21, "checkpoints": 0, "skipped": 0}
    assert 'data-status="done"' in final.content.decode()
    assert Block.objects.filter(thread__thread_id__startswith="kyoto", archived=False).count() == 0
    assert Block.objects.filter(thread__thread_id="other", archived=False).count() == 2
    assert AuditEvent.objects.filter(action="thread.clear").count() == 6
    start, finish = AuditEvent.objects.get(action="bulk.start"), AuditEvent.objects.get(action="bulk.finish")
    assert start.detail["before"]["threads"] == 6 and finish.detail["done"]["blocks"] == 21


def test_a_release_job_deletes_checkpoints_and_keeps_threads(client, threads, admin_user):
    login_client(client, admin_user)
    client.post("/bulk/start", {"action": "release", "ids": ["kyoto-0", "kyoto-1"]})
    job = BulkJob.objects.get()
    run_job(client, job.pk)
    job.refresh_from_db()
    assert job.counts["checkpoints"] == 4
    assert Checkpoint.objects.filter(thread__thread_id__in=["kyoto-0", "kyoto-1"]).count() == 0
    assert Checkpoint.objects.count() == 6 and Thread.objects.count() == 7
    assert broken_parents() == []


def test_a_purge_job_deletes_what_the_filter_matched_at_preview_time(client, threads, admin_user, alice):
    login_client(client, admin_user)
    client.post("/bulk/start", {"action": "purge", "all": "1", "q": "kyoto"})
    job = BulkJob.objects.get()
    save(alice, "kyoto-late", turns(2))  # created after the preview: not part of the job
    Thread.objects.filter(thread_id="kyoto-3").delete()  # gone meanwhile: skipped
    run_job(client, job.pk)
    job.refresh_from_db()
    assert job.counts == {"threads": 5, "blocks": 4 * 4 + 5, "checkpoints": 4 * 2, "skipped": 0}
    assert sorted(Thread.objects.values_list("thread_id", flat=True)) == ["kyoto-late", "other"]


def test_operators_may_export_but_not_destroy(client, threads, operator):
    login_client(client, operator)
    before = table_counts()
    for action in ("clear", "release", "purge"):
        assert preview(client, action, all="1").status_code == 403
        assert client.post("/bulk/start", {"action": action, "all": "1"}).status_code == 403
    after = table_counts()
    assert after.pop("audit") == before.pop("audit") + 6 and after == before
    assert AuditEvent.objects.filter(action="access.denied", actor_name="olivia").count() == 6
    assert preview(client, "export", all="1").context["impact"].threads == 7
    body = client.get("/threads/").content.decode()
    assert '<option value="export">' in body and 'value="purge"' not in body


def test_members_preview_exports_of_their_own_threads_only(client, threads, alice):
    login_client(client, alice)
    assert preview(client, "export", all="1").context["impact"].threads == 5
    assert preview(client, "export", ids=["bob-kyoto", "kyoto-0"]).context["impact"].threads == 1
    assert preview(client, "purge", ids=["kyoto-0"]).status_code == 403


def test_job_pages_and_steps_are_for_admins(client, threads, admin_user, operator):
    job = bulk.bulk_start(actor=admin_user, action="clear", selection=bulk.Selection(ids=("kyoto-0",)))
    login_client(client, operator)
    assert client.get(f"/bulk/{job.pk}/").status_code == 403
    with pytest.raises(Forbidden):
        bulk.bulk_step(actor=operator, job_id=job.pk)
    job.refresh_from_db()
    assert job.processed == 0 and job.status == "pending"


def test_a_job_fails_when_its_admin_loses_the_role(threads, admin_user):
    job = bulk.bulk_start(actor=admin_user, action="purge", selection=bulk.Selection(ids=("kyoto-0",)))
    roles.role_set(admin_user, "member")
    other_admin = type(admin_user).objects.create_superuser("root", password="pw-for-tests-1")
    with pytest.raises(Forbidden):
        bulk.bulk_step(actor=other_admin, job_id=job.pk)
    job.refresh_from_db()
    assert job.status == "failed" and "no longer" in job.error
    assert Thread.objects.filter(thread_id="kyoto-0").exists()


def test_a_worker_run_of_a_job_whose_admin_lost_the_role_fails_the_job(threads, admin_user):
    job = bulk.bulk_start(actor=admin_user, action="purge", selection=bulk.Selection(ids=("kyoto-0",)))
    roles.role_set(admin_user, "member")
    assert bulk.bulk_run(job_id=job.pk).status == "failed"  # recorded on the job, not raised at the worker
    assert Thread.objects.filter(thread_id="kyoto-0").exists()


@pytest.mark.skipif(IS_POSTGRES, reason="on PostgreSQL the job goes to the queue (tests/ops/test_queue.py)")
def test_without_a_queue_the_job_runs_once_the_start_commits(client, threads, admin_user, django_capture_on_commit_callbacks):
    login_client(client, admin_user)
    with django_capture_on_commit_callbacks(execute=True):
        client.post("/bulk/start", {"action": "purge", "ids": ["kyoto-0", "kyoto-1"]})
    job = BulkJob.objects.get()
    assert job.status == "done" and job.counts["threads"] == 2
    assert not Thread.objects.filter(thread_id__in=["kyoto-0", "kyoto-1"]).exists()


@pytest.mark.skipif(not IS_POSTGRES, reason="SQLite has no queue")
def test_the_queue_entry_is_written_in_the_transaction_that_starts_the_job(threads, admin_user):
    from django.db import connection, transaction

    with pytest.raises(RuntimeError), transaction.atomic():
        bulk.bulk_start(actor=admin_user, action="purge", selection=bulk.Selection(ids=("kyoto-0",)))
        raise RuntimeError("the start fails after the job was queued")
    job = bulk.bulk_start(actor=admin_user, action="purge", selection=bulk.Selection(ids=("kyoto-1",)))
    with connection.cursor() as cursor:
        cursor.execute("SELECT task_name, args->>'job_id' FROM procrastinate_jobs")
        assert cursor.fetchall() == [("bulk_job_run", str(job.pk))]
    assert BulkJob.objects.count() == 1


def test_bad_selections_are_a_400(client, threads, admin_user):
    login_client(client, admin_user)
    assert preview(client, "clear").status_code == 400  # nothing ticked
    assert preview(client, "explode", ids=["kyoto-0"]).status_code == 400
    assert preview(client, "clear", ids=["bad id"]).status_code == 400
    assert client.post("/bulk/start", {"action": "clear", "ids": ["nope"]}).status_code == 400
    assert client.post("/bulk/start", {"action": "export", "ids": ["kyoto-0"]}).status_code == 400
    assert BulkJob.objects.count() == 0


def test_the_command_finishes_pending_jobs(threads, admin_user):
    job = bulk.bulk_start(actor=admin_user, action="clear", selection=bulk.Selection(filter={"q": "kyoto", "agent": "", "owner": ""}))
    out = StringIO()
    call_command("bulk_jobs", "run", "--batch", "4", stdout=out)
    job.refresh_from_db()
    assert job.status == "done" and job.counts["threads"] == 6
    call_command("bulk_jobs", "list", stdout=out)
    assert "clear" in out.getvalue()


@pytest.mark.parametrize("rows", [5, 50])
def test_the_thread_list_with_bulk_selection_takes_constant_queries(client, admin_user, alice, rows, django_assert_num_queries):
    for i in range(rows):
        save(alice, f"t{i}", turns(2))
    login_client(client, admin_user)
    # session, user, role, agent codes, saved views, the total, the page of threads,
    # the audit statement of reading alice's threads
    with django_assert_num_queries(8):
        response = client.get("/threads/")
    body = response.content.decode()
    assert body.count('name="ids"') == rows and 'action="/bulk/preview"' in body and 'href="/search/' in body


def _purge_step_queries(admin_user, owner, prefix: str, count: int) -> tuple[int, BulkJob]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from sessions_app.turns import services as turn_services

    for i in range(count):
        save(owner, f"{prefix}-{i}", turns(3, f"{prefix}{i}"))
        checkpoints(owner, f"{prefix}-{i}", 2)
        turn_services.turn_begin(actor=owner, thread_id=f"{prefix}-{i}", question="q")
        turn_services.turn_append_chunk(actor=owner, thread_id=f"{prefix}-{i}", text="so far")
    job = bulk.bulk_start(actor=admin_user, action="purge", selection=bulk.Selection(filter={"q": prefix}))
    with CaptureQueriesContext(connection) as queries:
        job = bulk.bulk_step(actor=admin_user, job_id=job.pk, batch=count + 1)
    return len(queries.captured_queries), job


def test_a_purge_batch_takes_the_same_queries_whatever_its_size_and_audits_every_thread(admin_user, alice):
    """Each thread by thread_delete's rules (its rows, its streams told, one audit event each), and
    a fixed number of statements per batch: 2 threads and 12 threads cost the same."""
    small, job = _purge_step_queries(admin_user, alice, "few", 2)
    assert job.status == "done" and job.counts["threads"] == 2 and job.counts["checkpoints"] == 4
    large, job = _purge_step_queries(admin_user, alice, "many", 12)
    assert job.status == "done" and job.counts["threads"] == 12 and job.counts["checkpoints"] == 24
    assert job.counts["blocks"] == 12 * 3
    assert large == small
    from sessions_app.turns.models import Turn, TurnChunk

    assert not Thread.objects.filter(thread_id__startswith="many-").exists()
    assert Block.objects.count() == Checkpoint.objects.count() == Turn.objects.count() == TurnChunk.objects.count() == 0
    events = AuditEvent.objects.filter(action="thread.delete", target__startswith="thread:many-")
    assert events.count() == 12
    assert all(event.actor_id == admin_user.pk and event.detail["owner"] == "alice" for event in events)
    assert events.get(target="thread:many-3").detail["before"] == {"active": 3, "archived": 0}


def test_a_purge_goes_on_batch_after_batch_to_the_end(admin_user, alice):
    for i in range(5):
        save(alice, f"batched-{i}", turns(2, f"b{i}"))
    job = bulk.bulk_start(actor=admin_user, action="purge", selection=bulk.Selection(filter={"q": "batched"}))
    job = bulk.bulk_step(actor=admin_user, job_id=job.pk, batch=2)
    assert job.status == "running" and job.processed == 2
    job = bulk.bulk_run(job_id=job.pk, batch=2)
    assert job.status == "done" and job.processed == 5 and job.counts["threads"] == 5
    assert not Thread.objects.filter(thread_id__startswith="batched-").exists()


@pytest.mark.parametrize("action", ["clear", "release", "purge"])
def test_a_batch_takes_the_same_queries_whatever_its_size(alice, admin_user, action):
    """A clear, a release and a purge of 20 threads cost the statements of 2: a job of 10 000
    threads is 500 batches of a fixed few statements each, not tens of thousands."""
    counts = []
    for size in (2, 20):
        Thread.objects.all().delete()
        for i in range(size):
            save(alice, f"t-{i}", turns(4, f"k{i}"))
            checkpoints(alice, f"t-{i}", 2)
        job = bulk.bulk_start(actor=admin_user, action=action, selection=bulk.Selection.from_data({"all": "1"}))
        with CaptureQueriesContext(connection) as queries:
            job = bulk.bulk_step(actor=admin_user, job_id=job.pk, batch=50)  # the job ends in this step
        assert job.processed == size and job.counts["threads"] == size
        counts.append(len(queries.captured_queries))
    assert counts[0] == counts[1], counts


def test_a_batched_clear_archives_each_thread_as_its_own_next_rewrite(alice, bob, admin_user):
    """Threads at different rewrites cleared in one batch: each one's blocks are archived under its own
    next rewrite, its counters and extra_state as a single clear leaves them, one audit event each,
    and the integrity check finds nothing."""
    save(alice, "plain", turns(4, "p"), extra_state={"k": 1})
    compacted(bob, "twice", 6)
    rewrites = dict(Thread.objects.values_list("thread_id", "rewrite_count"))
    job = bulk.bulk_start(actor=admin_user, action="clear", selection=bulk.Selection.from_data({"all": "1"}))
    job = bulk.bulk_run(job_id=job.pk)
    assert job.counts["threads"] == 2 and job.counts["blocks"] == 4 + 1
    for thread in Thread.objects.all():
        assert thread.rewrite_count == rewrites[thread.thread_id] + 1
        assert (thread.active_count, thread.extra_state, thread.streams_ended) == (0, None, "cleared")
        assert thread.archived_count == Block.objects.filter(thread=thread, archived=True).count()
        assert not Block.objects.filter(thread=thread, archived=False).exists()
        newest = Block.objects.filter(thread=thread, archived_by=thread.rewrite_count)
        assert newest.count() == (4 if thread.thread_id == "plain" else 1)
    cleared = AuditEvent.objects.filter(action="thread.clear").order_by("target")
    assert [(e.target, e.detail["archived"]) for e in cleared] == [("thread:plain", 4), ("thread:twice", 1)]
    out = StringIO()
    call_command("verify", stdout=out, stderr=StringIO())  # exits non-zero on a problem
    assert "0 problem(s)" in out.getvalue()
