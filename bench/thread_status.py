"""The thread search filtered by LangGraph's status, as the number of threads grows.

    .venv/bin/python bench/thread_status.py [--threads 100000,1000000] [--rounds 20]

A fresh PostgreSQL database (BENCH_DB with "_status", made through BENCH_ADMIN_URL as in
bench/run.py) gets, for each size, that many threads of one admin with five root
checkpoints each, made by SQL: the latest has a node still to run on one thread in 200
(the rest idle) and an error write on one in 1 000. Then, through memoryadmin's selector
(`thread_search_queryset`, what `threads.search`, `threads.count`, `GET /threads` and the
dashboard's list all use), p50 / p95 (ms) and the query count of the first page (50 rows,
newest first) and of the count, for each status and for none, and the plan of the
filtered page. The stored status is filled from the checkpoints as migration 0015 fills it.
Then what keeping it costs a put: p50 / p95 of `--puts` puts of new root checkpoints (every
other one with a node to run) on three threads, through the service (the fast path's one
statement). Run on a checkout from before the column, the same script gives the "before"
figures. The database is dropped at the end.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import run as bench  # noqa: E402  (fresh database, Django setup, percentiles)

DB_NAME = f"{bench.DB_NAME}_status"
CHECKPOINTS = 5
log, pct = bench.log, bench.pct


def load(total: int, owner_pk: int) -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE sessions_app_checkpointwrite, sessions_app_checkpoint, sessions_app_thread CASCADE")
        cursor.execute(
            """INSERT INTO sessions_app_thread (thread_id, owner_id, agent_code, title, last_seq, rewrite_count,
                   active_count, archived_count, metadata, streams_ended, created_at, updated_at)
               SELECT 't-' || g, %s, 'agent', 'a thread', 0, 0, 0, 0, '{}'::jsonb, '',
                      now() - g * interval '1 second', now() - g * interval '1 second'
                 FROM generate_series(1, %s) g""",
            [owner_pk, total],
        )
        cursor.execute(
            """INSERT INTO sessions_app_checkpoint (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id,
                   checkpoint, metadata, run_id, node_id, next_node_id, created_at, updated_at)
               SELECT t.id, '', 'c-' || k, '', '{}'::jsonb, '{}'::jsonb, '', 'agent',
                      CASE WHEN k < %s OR t.id %% 200 = 0 THEN 'tools' ELSE '' END, now(), now()
                 FROM sessions_app_thread t CROSS JOIN generate_series(1, %s) k ORDER BY k, t.id""",
            [CHECKPOINTS, CHECKPOINTS],
        )
        cursor.execute(
            """INSERT INTO sessions_app_checkpointwrite (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path,
                   idx, channel, value, refers, created_at)
               SELECT t.id, '', 'c-' || %s, 'task', '', -1, '__error__', '"boom"'::jsonb, false, now()
                 FROM sessions_app_thread t WHERE t.id %% 1000 = 1""",
            [CHECKPOINTS],
        )
        try:  # the stored status, as the migration fills it (code from before the column has none)
            cursor.execute(importlib.import_module("sessions_app.migrations.0015_thread_lg_status").FILL)
        except ModuleNotFoundError:
            pass
        cursor.execute("VACUUM ANALYZE")


def timed(fn, rounds: int) -> tuple[list[float], int, object]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    fn()
    samples = []
    for _ in range(rounds):
        with CaptureQueriesContext(connection) as queries:
            started = time.perf_counter()
            answer = fn()
            samples.append(time.perf_counter() - started)
    return samples, len(queries), answer


def measure_puts(actor, count: int) -> list[float]:
    from sessions_app.checkpoints import services as svc

    def body(step: int) -> dict:
        return {"v": 4, "id": f"c{step}", "ts": "2026-12-01T00:00:00+00:00", "channel_values": {"step": step},
                "channel_versions": {"step": str(step)}, "versions_seen": {"agent": {"step": str(step - 1)}},
                "updated_channels": ["step"]}

    samples = []
    for thread in range(3):
        for step in range(count):
            data = svc.checkpoint_input(checkpoint=body(step), metadata={"source": "loop", "step": step},
                                        parent_checkpoint_id=f"c{step - 1}" if step else None,
                                        next_node_id="agent" if step % 2 else "")
            started = time.perf_counter()
            svc.checkpoint_put(actor=actor, thread_id=f"puts-{thread}", data=data, checkpoint_id=f"c{step}")
            if step >= count // 10:  # the first tenth warms the process and the thread up
                samples.append(time.perf_counter() - started)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", default="100000,1000000", help="comma-separated numbers of threads")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--puts", type=int, default=1500, help="puts per thread for the put's cost (0: none)")
    args = parser.parse_args()
    url = bench.fresh_database(DB_NAME)
    try:
        bench.setup_django(url)
        from django.contrib.auth import get_user_model
        from django.db import connection

        from sessions_app.checkpoints.search import ThreadFilter, thread_search_queryset

        admin = get_user_model().objects.create_superuser("status-bench", password="x")
        print("| threads | status | first page p50 / p95 | queries | count p50 / p95 | queries | found |")
        print("|---:|---|---:|---:|---:|---:|---:|")
        for total in (int(n) for n in args.threads.split(",")):
            started = time.perf_counter()
            load(total, admin.pk)
            log(f"  {total:,} threads loaded in {time.perf_counter() - started:.1f}s")
            for status in ("", "interrupted", "error", "idle"):
                filters = ThreadFilter(status=status)
                page, page_queries, _ = timed(lambda: list(thread_search_queryset(actor=admin, filters=filters)[:50]), args.rounds)
                count, count_queries, found = timed(lambda: thread_search_queryset(actor=admin, filters=filters).count(), args.rounds)
                print(f"| {total:,} | {status or '(any)'} | {pct(page, .5) * 1000:.1f} / {pct(page, .95) * 1000:.1f} | {page_queries} "
                      f"| {pct(count, .5) * 1000:.1f} / {pct(count, .95) * 1000:.1f} | {count_queries} | {found:,} |", flush=True)
            sql, params = thread_search_queryset(actor=admin, filters=ThreadFilter(status="interrupted"))[:50].query.sql_with_params()
            with connection.cursor() as cursor:
                cursor.execute("EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) " + sql, params)
                log("\n".join(row[0] for row in cursor.fetchall()))
        if args.puts:
            samples = measure_puts(admin, args.puts)
            print(f"\ncheckpoint put (service, new root checkpoints): p50 {pct(samples, .5) * 1000:.3f} ms, "
                  f"p95 {pct(samples, .95) * 1000:.3f} ms over {len(samples)} puts")
    finally:
        from django.db import connections

        connections.close_all()
        bench.drop_database(DB_NAME)


if __name__ == "__main__":
    main()
