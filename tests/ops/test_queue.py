"""Jobs on the queue (memoryadmin/queue.py): real worker processes on the test database.

A bulk purge started from the dashboard finishes with nobody watching its page; a
worker killed mid-batch is replaced and every thread is purged exactly once; two
workers share one job without taking the same batch; retention and the store sweep
run from the queue's schedule at the instants it gives. PostgreSQL only: SQLite has
no queue (there a job runs where it is started, tests/ops/test_bulk.py).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest
from asgiref.sync import async_to_sync
from django.db import connection
from django.utils import timezone
from procrastinate.contrib.django import app
from procrastinate.periodic import PeriodicDeferrer

from memoryadmin.models import AuditEvent
from memoryadmin.operations import bulk
from memoryadmin.operations.models import BulkJob, RetentionPolicy, RetentionRun
from sessions_app.models import Block, Thread
from store_app.models import StoreItem

from ..conftest import IS_POSTGRES, login_client
from .helpers import compacted, save, store_item, turns

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif(not IS_POSTGRES, reason="the job queue is PostgreSQL's (SQLite runs jobs where they start)"),
    pytest.mark.django_db(transaction=True),
]
ROOT = Path(__file__).resolve().parents[2]
HEARTBEAT = 0.5  # seconds: a silent worker is stalled after three of these


def _url(port=None) -> str:
    db = connection.settings_dict
    auth = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{port or db['PORT'] or 5432}/{db['NAME']}"


class Worker:
    """`manage.py jobs_worker` in a process of its own, its log kept in a file."""

    def __init__(self, log: Path, *extra: str, env_extra: dict | None = None):
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "PYTEST"))},
            "DJANGO_DEBUG": "1",
            "DJANGO_LOG_LEVEL": "INFO",
            "DATABASE_URL": _url(),
            # Behind PgBouncer the worker listens on PostgreSQL itself.
            "DATABASE_WORKER_URL": _url(os.environ.get("POSTGRES_DIRECT_PORT")),
            "MEMORYADMIN_WORKER_HEARTBEAT_SECONDS": str(HEARTBEAT),
            "PYTHONUNBUFFERED": "1",
            **(env_extra or {}),
        }
        if os.environ.get("DJANGO_DB_POOLER"):
            env["DJANGO_DB_POOLER"] = os.environ["DJANGO_DB_POOLER"]
        self.log = log
        self.proc = subprocess.Popen(
            [sys.executable, "manage.py", "jobs_worker", "--concurrency", "1", *extra],
            cwd=ROOT, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT,
        )

    def text(self) -> str:
        return self.log.read_text()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture
def workers(tmp_path):
    started: list[Worker] = []

    def start(*extra: str, **env: str) -> Worker:
        worker = Worker(tmp_path / f"worker-{len(started)}.log", *extra, env_extra=env)
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.stop()
    with connection.cursor() as cursor:  # the queue's tables are not Django's to flush
        cursor.execute("DELETE FROM procrastinate_jobs; DELETE FROM procrastinate_workers; DELETE FROM procrastinate_periodic_defers")


def wait_for(condition, seconds: float = 60, what: str = "the job"):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"{what} did not happen within {seconds} s")


def job_state(job_id: int) -> BulkJob:
    return BulkJob.objects.get(pk=job_id)


def many_threads(user, count: int, prefix: str = "bulk") -> list[str]:
    ids = [f"{prefix}-{i:04}" for i in range(count)]
    for thread_id in ids:
        save(user, thread_id, turns(2, thread_id))
    return ids


def deletes_per_thread() -> Counter:
    return Counter(AuditEvent.objects.filter(action="thread.delete").values_list("target", flat=True))


def queue_rows(task: str = "bulk_job_run") -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT task_name, status, args::text, attempts FROM procrastinate_jobs WHERE task_name = %s ORDER BY id", [task])
        return [(name, status, json.loads(args), attempts) for name, status, args, attempts in cursor.fetchall()]


def test_a_purge_started_from_the_dashboard_finishes_with_no_page_open(client, alice, admin_user, workers):
    ids = many_threads(alice, 30)
    login_client(client, admin_user)
    response = client.post("/bulk/start", {"action": "purge", "all": "1", "q": "bulk"})
    job = BulkJob.objects.get()
    assert response.status_code == 302 and job.status == "pending"
    # The queue entry was committed with the job, by the request that started it.
    assert queue_rows() == [("bulk_job_run", "todo", {"job_id": job.pk}, 0)]
    worker = workers()
    done = wait_for(lambda: job_state(job.pk).is_finished and job_state(job.pk), what="the purge")
    assert done.status == "done" and done.processed == 30 and done.counts["threads"] == 30
    assert not Thread.objects.filter(thread_id__in=ids).exists()
    assert deletes_per_thread() == Counter({f"thread:{thread_id}": 1 for thread_id in ids})
    assert AuditEvent.objects.filter(action="bulk.finish").count() == 1
    # The page only reads the row: it shows the job done and asks nothing more.
    page = client.get(f"/bulk/{job.pk}/", HTTP_HX_REQUEST="true").content.decode()
    assert 'data-status="done"' in page and "hx-get" not in page
    assert "bulk_job_run" in worker.text()


def test_a_worker_killed_mid_job_is_replaced_and_every_thread_is_purged_once(alice, admin_user, workers):
    ids = many_threads(alice, 240)
    job = bulk.bulk_start(actor=admin_user, action="purge", selection=bulk.Selection(filter={"q": "bulk"}))
    first = workers()
    wait_for(lambda: job_state(job.pk).processed >= bulk.BATCH, what="the first batch")
    first.proc.send_signal(signal.SIGKILL)
    first.proc.wait()
    killed = job_state(job.pk)
    assert killed.status == "running" and not killed.is_finished
    # Only whole batches committed: progress, deleted threads and audit events agree.
    assert killed.processed % bulk.BATCH == 0 and killed.processed < 240
    assert sum(deletes_per_thread().values()) == killed.processed == 240 - Thread.objects.filter(thread_id__in=ids).count()
    assert [row[1] for row in queue_rows()] == ["doing"]  # left behind by the dead worker
    time.sleep(3 * HEARTBEAT + 0.5)  # its heartbeat goes stale
    second = workers()
    done = wait_for(lambda: job_state(job.pk).is_finished and job_state(job.pk), what="the resumed purge")
    assert done.status == "done" and done.processed == 240 and done.counts == {"threads": 240, "blocks": 480, "checkpoints": 0, "skipped": 0}
    assert deletes_per_thread() == Counter({f"thread:{thread_id}": 1 for thread_id in ids})
    assert not Thread.objects.filter(thread_id__in=ids).exists()
    assert "queued again" in second.text()


def test_two_workers_share_one_job_and_never_take_the_same_batch(alice, admin_user, workers):
    ids = many_threads(alice, 150)
    job = bulk.bulk_start(actor=admin_user, action="purge", selection=bulk.Selection(filter={"q": "bulk"}))
    # A second run of the same job, in small batches: two workers then work on one job at once.
    app.configure_task("bulk_job_run").defer(job_id=job.pk, batch=5)
    # The job's row is held locked by another connection while the workers start: whichever
    # worker takes a run first waits at its first batch, busy (one job at a time), so the other
    # run can only go to the other worker. Without the hold, a purge's batch is a few statements
    # and one worker can end its run and take the second before the other worker asks.
    with psycopg.connect(_url(os.environ.get("POSTGRES_DIRECT_PORT")), autocommit=False) as holder:
        holder.execute(f"SELECT id FROM {BulkJob._meta.db_table} WHERE id = %s FOR UPDATE", [job.pk])
        one, two = workers(MEMORYADMIN_WORKER_CONCURRENCY="1"), workers(MEMORYADMIN_WORKER_CONCURRENCY="1")
        wait_for(lambda: [row[1] for row in queue_rows()] == ["doing", "doing"], what="both runs taken")
        assert job_state(job.pk).processed == 0  # neither run got past the held row
        holder.rollback()
    done = wait_for(lambda: job_state(job.pk).is_finished and job_state(job.pk), what="the shared purge")
    wait_for(lambda: not queue_rows(), what="both runs ending")
    assert done.status == "done" and done.processed == 150 and done.counts["threads"] == 150
    assert deletes_per_thread() == Counter({f"thread:{thread_id}": 1 for thread_id in ids})
    assert AuditEvent.objects.filter(action="bulk.finish").count() == 1
    # Each worker ran one of the two runs (a job is taken by one worker: SKIP LOCKED).
    assert "bulk_job_run" in one.text() and "bulk_job_run" in two.text()


def _defer_due(at: float) -> list[str]:
    """What the queue's scheduler defers when the clock reads `at` (procrastinate's own deferrer)."""
    deferrer = PeriodicDeferrer(registry=app.periodic_registry)
    due = list(deferrer.get_previous_tasks(at=at))
    # On this thread's connection to the test database, as the worker's own deferrer would.
    async_to_sync(deferrer.defer_jobs)(jobs_to_defer=due)
    return sorted(task.task.name for task, _ in due)


def test_retention_and_the_store_sweep_run_from_the_queue_schedule(alice, workers):
    compacted(alice, "old-chat", 4)
    compacted(alice, "young-chat", 4)
    RetentionPolicy.objects.create(agent_code="", purge_archived_days=1)
    # The schedule's instant: a retention time (03:15 by default) a day from now.
    base = (timezone.now() + timedelta(days=1)).replace(hour=3, minute=15, second=0, microsecond=0)
    Block.objects.filter(thread__thread_id="old-chat", archived=True).update(archived_at=base - timedelta(days=2))
    Block.objects.filter(thread__thread_id="young-chat", archived=True).update(archived_at=base - timedelta(hours=12))
    store_item(alice, ["notes"], "expired")
    store_item(alice, ["notes"], "kept")
    StoreItem.objects.filter(key="expired").update(expires_at=base - timedelta(minutes=10))
    StoreItem.objects.filter(key="kept").update(expires_at=base + timedelta(hours=1))

    assert "retention_scheduled" in _defer_due(base.timestamp() + 30)
    workers("--one-shot").proc.wait(60)
    run = RetentionRun.objects.get()
    assert (run.via, run.status, run.actor_name, run.cutoff_now) == ("schedule", "done", "system", base)
    assert not Block.objects.filter(thread__thread_id="old-chat", archived=True).exists()
    assert Block.objects.filter(thread__thread_id="young-chat", archived=True).count() == 4
    assert list(StoreItem.objects.values_list("key", flat=True)) == ["kept"]  # the sweep ran at 03:10

    # An hour later nothing is due for retention; a day later it runs again, as of then.
    assert "retention_scheduled" not in _defer_due(base.timestamp() + 3600 + 30)
    assert "retention_scheduled" in _defer_due((base + timedelta(days=1)).timestamp() + 30)
    workers("--one-shot").proc.wait(60)
    assert list(RetentionRun.objects.order_by("id").values_list("cutoff_now", flat=True)) == [base, base + timedelta(days=1)]
    assert not Block.objects.filter(archived=True).exists()


def test_metrics_show_the_queue_depth_and_the_age_of_the_oldest_job(client, alice, admin_user, workers):
    from prometheus_client.parser import text_string_to_metric_families

    many_threads(alice, 3)
    for _ in range(2):
        bulk.bulk_start(actor=admin_user, action="clear", selection=bulk.Selection(filter={"q": "bulk"}))
    with connection.cursor() as cursor:  # the first was queued a minute ago
        cursor.execute("UPDATE procrastinate_events SET at = now() - interval '60 seconds' WHERE job_id = (SELECT min(id) FROM procrastinate_jobs)")

    def gauges() -> dict:
        families = text_string_to_metric_families(client.get("/metrics").content.decode())
        return {
            (family.name, sample.labels["status"]): sample.value
            for family in families if family.name.startswith("jobs_queue")
            for sample in family.samples if sample.labels.get("queue") == "jobs"
        }

    before = gauges()
    assert before[("jobs_queue_depth", "todo")] == 2 and before[("jobs_queue_depth", "doing")] == 0
    assert 60 <= before[("jobs_queue_oldest_seconds", "todo")] < 120
    workers()
    wait_for(lambda: BulkJob.objects.filter(status="done").count() == 2, what="both jobs")
    wait_for(lambda: gauges()[("jobs_queue_depth", "todo")] == 0 or None, what="an empty queue")


def test_a_large_erase_runs_on_the_queue_and_its_page_shows_the_receipt(client, alice, admin_user, workers, monkeypatch):
    from memoryadmin.operations import erase
    from memoryadmin.operations.models import EraseJob

    monkeypatch.setattr(erase, "INLINE_THREADS", 2)  # alice's three threads are then a job
    ids = many_threads(alice, 3, prefix="mine")
    login_client(client, admin_user)
    response = client.post("/erase/", {"username": "alice", "confirm": "alice", "revoke_access": "1"})
    job = EraseJob.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/erase/jobs/{job.pk}/"
    assert job.status == "pending" and Thread.objects.filter(thread_id__in=ids).count() == 3
    assert 'hx-get="/erase/jobs/' in client.get(response["Location"]).content.decode()
    workers()
    wait_for(lambda: EraseJob.objects.get().is_finished, what="the erase")
    job.refresh_from_db()
    assert job.status == "done" and job.receipt["counts"]["threads"] == 3 and job.receipt["erased_by"] == "adam"
    assert not Thread.objects.filter(owner=alice).exists()
    assert AuditEvent.objects.filter(action="user.erase", target="user:alice").count() == 1
    page = client.get(f"/erase/jobs/{job.pk}/", HTTP_HX_REQUEST="true").content.decode()
    assert 'data-status="done"' in page and 'data-count="threads">3<' in page and "hx-get" not in page


def test_a_large_bulk_export_is_written_by_a_worker_for_its_owner_to_download(client, alice, bob, workers, monkeypatch, settings, tmp_path):
    import io
    import zipfile

    from memoryadmin.operations import export
    from memoryadmin.operations.models import ExportJob

    monkeypatch.setattr(export, "EXPORT_INLINE_THREADS", 2)  # alice's three threads are then a job
    settings.MEMORYADMIN_EXPORT_DIR = tmp_path / "exports"
    ids = many_threads(alice, 3, prefix="mine")
    login_client(client, alice)
    response = client.post("/bulk/export", {"all": "1", "q": "mine"})
    job = ExportJob.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/bulk/exports/{job.pk}/"
    assert job.status == "pending" and job.total == 3
    assert AuditEvent.objects.filter(action="bulk.export").count() == 1
    save(alice, "mine-late", turns(2))  # after the export was asked for: not in it
    workers(MEMORYADMIN_EXPORT_DIR=str(settings.MEMORYADMIN_EXPORT_DIR))
    wait_for(lambda: ExportJob.objects.get().is_finished, what="the export")
    job.refresh_from_db()
    assert job.status == "done" and job.size > 0
    page = client.get(f"/bulk/exports/{job.pk}/", HTTP_HX_REQUEST="true").content.decode()
    assert 'data-status="done"' in page and f'href="/bulk/exports/{job.pk}/download"' in page and "hx-get" not in page
    download = client.get(f"/bulk/exports/{job.pk}/download")
    archive = zipfile.ZipFile(io.BytesIO(b"".join(download.streaming_content)))
    index = json.loads(archive.read("index.json"))
    assert [entry["thread_id"] for entry in index["threads"]] == ids
    assert AuditEvent.objects.filter(action="bulk.export").count() == 1  # asked once, recorded once
    login_client(client, bob)
    assert client.get(f"/bulk/exports/{job.pk}/download").status_code == 403
