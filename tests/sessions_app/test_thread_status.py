"""A thread's status kept on its row (sessions_app/checkpoints/status.py): after every write that
can change it, the stored status is the one read from the thread's checkpoints and writes."""

from __future__ import annotations

import importlib
import threading
from concurrent.futures import ThreadPoolExecutor
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection

from sessions_app.checkpoints import lifecycle
from sessions_app.checkpoints import services as svc
from sessions_app.checkpoints.models import CheckpointWrite
from sessions_app.checkpoints.removal import writes_remove
from sessions_app.checkpoints.search import ThreadFilter, thread_search_queryset
from sessions_app.checkpoints.status import statuses_stale
from sessions_app.threads.models import Thread

from ..conftest import IS_POSTGRES, login_client

pytestmark = pytest.mark.django_db(transaction=True)


def put(actor, thread_id, checkpoint_id, *, next_node="", ns="", run_id="", parent=None):
    data = svc.checkpoint_input(
        checkpoint={"id": checkpoint_id}, metadata={"run_id": run_id} if run_id else {}, checkpoint_ns=ns,
        parent_checkpoint_id=parent, next_node_id=next_node,
    )
    return svc.checkpoint_put(actor=actor, thread_id=thread_id, data=data, checkpoint_id=checkpoint_id)


def write(actor, thread_id, checkpoint_id, channel, value="x", ns="", task_id="task-1"):
    return svc.checkpoint_put_writes(
        actor=actor, thread_id=thread_id, checkpoint_id=checkpoint_id, checkpoint_ns=ns,
        data=svc.write_input(task_id=task_id, writes=[{"channel": channel, "value": value}]),
    )


def status(thread_id: str) -> str:
    """The stored status, after checking that it is the one read from the checkpoints."""
    assert list(statuses_stale(Thread.objects.all())) == []
    return Thread.objects.get(thread_id=thread_id).lg_status


def test_puts_and_writes_keep_the_status_that_is_read(alice):
    put(alice, "t", "c1", next_node="agent")
    assert status("t") == "interrupted"  # a node still to run
    put(alice, "t", "c2", parent="c1")
    assert status("t") == "idle"
    write(alice, "t", "c2", "step")
    assert status("t") == "idle"  # an ordinary write changes nothing
    write(alice, "t", "c2", "__interrupt__", [{"value": "ask", "id": "i1"}])
    assert status("t") == "interrupted"
    write(alice, "t", "c2", "__error__", "boom", task_id="task-2")
    assert status("t") == "error"  # an error outranks an interrupt
    put(alice, "t", "c3", parent="c2")
    assert status("t") == "idle"  # the latest checkpoint decides
    write(alice, "t", "c1", "__error__", "late")
    assert status("t") == "idle"  # an error against an older checkpoint does not
    put(alice, "t", "s1", ns="child", next_node="tool")
    write(alice, "t", "s1", "__error__", "inner", ns="child")
    assert status("t") == "idle"  # a subgraph's checkpoints and writes do not either


def test_writes_sent_before_their_checkpoint_count_when_it_arrives(alice):
    """LangGraph sends a task's writes alongside the put of their checkpoint: they may come first."""
    put(alice, "early", "c1")
    write(alice, "early", "c2", "__error__", "boom")
    assert status("early") == "idle"
    put(alice, "early", "c2", parent="c1")
    assert status("early") == "error"


def test_a_checkpoint_put_again_or_replaced_in_place_stores_its_status(alice):
    put(alice, "again", "c1")
    put(alice, "again", "c1", next_node="agent")  # the same id: replaced under the lock
    assert status("again") == "interrupted"
    data = svc.checkpoint_input(checkpoint={"id": "c1"}, next_node_id="")
    svc.checkpoint_replace(actor=alice, thread_id="again", checkpoint_id="c1", data=data)
    assert status("again") == "idle"


def test_removals_store_the_status_of_what_stays(alice, admin_user):
    put(alice, "r", "c1", next_node="agent", run_id="run-1")
    put(alice, "r", "c2", parent="c1", run_id="run-2")
    write(alice, "r", "c2", "__error__", "boom")
    assert status("r") == "error"
    lifecycle.checkpoint_delete_for_runs(actor=alice, run_ids=["run-2"])
    assert status("r") == "interrupted"  # c1 is the latest again
    put(alice, "r", "c3", parent="c1")
    write(alice, "r", "c3", "__interrupt__", [{"value": "ask", "id": "i1"}])
    assert status("r") == "interrupted"
    writes_remove(CheckpointWrite.objects.filter(thread__thread_id="r", checkpoint_id="c3"))
    assert status("r") == "idle"
    lifecycle.checkpoint_prune(actor=admin_user, thread_ids=["r"], strategy="keep_latest")
    assert status("r") == "idle"
    put(alice, "r", "c4", next_node="agent")
    lifecycle.checkpoint_release(actor=admin_user, thread_id="r")
    assert status("r") == "idle"  # no checkpoint: idle


def test_a_copy_has_the_status_of_its_source(alice):
    put(alice, "source", "c1")
    write(alice, "source", "c1", "__interrupt__", [{"value": "ask", "id": "i1"}])
    lifecycle.checkpoint_copy_thread(actor=alice, source_thread_id="source", target_thread_id="copy")
    assert status("copy") == "interrupted"


def test_the_search_filters_and_sorts_by_the_stored_status(alice, django_assert_num_queries):
    for index in range(6):
        put(alice, f"s{index}", "c1", next_node="agent" if index % 3 == 0 else "")
    write(alice, "s1", "c1", "__error__", "boom")
    with django_assert_num_queries(1):
        found = [t.thread_id for t in thread_search_queryset(actor=alice, filters=ThreadFilter(status="interrupted"))]
    assert sorted(found) == ["s0", "s3"]
    assert thread_search_queryset(actor=alice, filters=ThreadFilter(status="error")).count() == 1
    ordered = thread_search_queryset(actor=alice, filters=ThreadFilter(), sort="status", order="asc")
    assert [t.lg_status for t in ordered] == ["error", "idle", "idle", "idle", "interrupted", "interrupted"]


def test_the_migration_fills_the_status_as_it_is_read(alice):
    put(alice, "m1", "c1", next_node="agent")
    put(alice, "m2", "c1")
    write(alice, "m2", "c1", "__error__", "boom")
    put(alice, "m3", "c1")
    Thread.objects.update(lg_status="idle")
    assert len(statuses_stale(Thread.objects.all())) == 2
    fill = importlib.import_module("sessions_app.migrations.0015_thread_lg_status").FILL
    with connection.cursor() as cursor:
        cursor.execute(fill)
    assert list(statuses_stale(Thread.objects.all())) == []
    assert dict(Thread.objects.values_list("thread_id", "lg_status")) == {"m1": "interrupted", "m2": "error", "m3": "idle"}


def test_verify_reports_a_stale_status_and_stores_it_again_when_asked(alice):
    put(alice, "v", "c1", next_node="agent")
    Thread.objects.filter(thread_id="v").update(lg_status="idle")  # as a hand-made SQL change would leave it
    out, err = StringIO(), StringIO()
    with pytest.raises(SystemExit):
        call_command("verify", stdout=out, stderr=err)
    assert "stale_status: thread:v: status 'idle' stored, 'interrupted' read from its checkpoints" in out.getvalue()
    call_command("verify", "--fix-status", stdout=(out := StringIO()))
    assert "status stored again: thread:v: idle -> interrupted" in out.getvalue()
    assert status("v") == "interrupted"
    call_command("verify", stdout=StringIO())  # clean: no exit


@pytest.mark.postgres
@pytest.mark.skipif(not IS_POSTGRES, reason="parallel transactions need PostgreSQL")
def test_concurrent_puts_errors_and_interrupts_leave_the_status_that_is_read(alice):
    """Puts of new checkpoints (some with a node to run) racing against error and interrupt writes
    to the checkpoints already there, and against prunes: whatever the order, the stored status
    is the one read afterwards."""
    put(alice, "race", "c0")
    barrier = threading.Barrier(4)

    def job(kind: int):
        barrier.wait()
        try:
            for step in range(1, 31):
                if kind == 0:
                    put(alice, "race", f"c{step}", next_node="agent" if step % 3 else "", parent=f"c{step - 1}")
                elif kind == 1:
                    write(alice, "race", f"c{step}", "__error__", "boom", task_id=f"e{step}")
                elif kind == 2:
                    write(alice, "race", f"c{step}", "__interrupt__", [{"value": "ask", "id": f"i{step}"}], task_id=f"i{step}")
                else:
                    write(alice, "race", f"c{step - 1}", "step", step, task_id=f"s{step}")
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=4) as pool:
        for future in [pool.submit(job, kind) for kind in range(4)]:
            future.result()
    assert list(statuses_stale(Thread.objects.all())) == []
    assert Thread.objects.get(thread_id="race").lg_status == "error"  # c30 has its error write


def test_the_thread_page_shows_the_stored_status(alice, client):
    login_client(client, alice)
    put(alice, "paused", "c1", next_node="tools")
    put(alice, "failed", "c1")
    write(alice, "failed", "c1", "__error__", "boom")
    put(alice, "done", "c1")
    for thread_id, expected in (("paused", "interrupted"), ("failed", "error"), ("done", "idle")):
        page = client.get(f"/threads/{thread_id}/").content.decode()
        start = page.index("data-thread-status")
        shown = page[start:page.index("</", start)]
        assert shown.endswith(">" + expected)
        # Not idle: a link to the timeline, where the latest checkpoint says what the thread waits on.
        assert (f'href="/threads/{thread_id}/checkpoints/"' in shown) is (expected != "idle")
