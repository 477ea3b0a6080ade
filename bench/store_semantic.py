"""The store's semantic search, its batches and its queue of concurrent async calls, timed.

    .venv/bin/python bench/store_semantic.py [--small] [--rounds 30] [--write]

A fresh PostgreSQL database (BENCH_DB, default memoryadmin_semantic_bench, made
through BENCH_ADMIN_URL as in bench/run.py) is migrated and measured:

1. Semantic search in process (the selector, as the API runs it): 10,000 items
   under one prefix, one 256-number vector each, the best 10 for a query
   vector; then with 100,000 items in the store (90,000 under other prefixes).
   With pgvector when the database has it, and with the numpy ranking (with the
   process's vector cache, warmed by the first search, and without it); the CPU
   time of a search, the database server's (from /proc, when it runs on this
   machine) and Python's, beside the wall times: figures load barely changes.
2. Over HTTP (gunicorn, 2 workers, on 127.0.0.1), with `MemoryAdminStore`: a
   batch of 100 puts as one request against a single put, with the CPU time a
   request costs the client, gunicorn's workers and the database server's
   processes serving them (from /proc, when all run on this machine).
3. 10,000 concurrent async calls (puts, gets, searches) from one client,
   against the same calls made one after another: calls per second.

`--small` divides the sizes by 10. `--write` replaces the "store-semantic"
section of docs/benchmarks.md. The database is dropped at the end. Also run by
`make bench`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "clients" / "python"))

import run as bench  # noqa: E402  (fresh database, Django setup, gunicorn, percentiles)

DB_NAME = os.environ.get("BENCH_DB", "memoryadmin_semantic_bench")
DIMS = 256
log, pct, ms = bench.log, bench.pct, bench.ms

# Items written by SQL, their vectors by COPY (`load`).
_ITEMS_SQL = """
INSERT INTO store_app_storeitem (owner_id, namespace_path, depth, key, value, created_at, updated_at)
SELECT %s, %s || '.t' || (i %% 10), 3, 'k' || i, jsonb_build_object('text', 'item ' || i, 'n', i),
       now() - (i || ' seconds')::interval, now() - (i || ' seconds')::interval
FROM generate_series(%s, %s) AS i
"""
_VECTORLESS_SQL = """
SELECT item.id, item.namespace_path FROM store_app_storeitem AS item
WHERE item.namespace_path LIKE %s AND NOT EXISTS (SELECT 1 FROM store_app_storevector v WHERE v.item_id = item.id)
ORDER BY item.id
"""


def timed(fn, rounds: int) -> list[float]:
    fn(), fn()
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - started)
    return samples


def load(cursor, owner_id: int, prefix: str, first: int, last: int) -> None:
    """Items first..last under `prefix`, each with one random vector, stored as the server stores
    one (float32 bytes, or pgvector's type) with its norm, by COPY."""
    import numpy as np

    from store_app.models import vector_column_type

    cursor.execute(_ITEMS_SQL, [owner_id, prefix, first, last])
    cursor.execute(_VECTORLESS_SQL, [prefix + ".%"])
    items = cursor.fetchall()
    rng = np.random.default_rng(first)
    vectors = (rng.random((len(items), DIMS)) - 0.5).astype("<f4")
    norms = np.sqrt((vectors.astype(np.float64) ** 2).sum(axis=1))
    as_bytes = vector_column_type(cursor.db) in ("bytea", "blob")
    columns = "item_id, namespace_path, path, dims, norm, vector"
    with cursor.cursor.copy(f"COPY store_app_storevector ({columns}) FROM STDIN") as copy:
        for (item_id, path), vector, vector_norm in zip(items, vectors, norms):
            stored = vector.tobytes() if as_bytes else "[" + ",".join(map(repr, vector.tolist())) + "]"
            copy.write_row((item_id, path, "text", DIMS, float(vector_norm), stored))
    cursor.execute("ANALYZE store_app_storeitem")
    cursor.execute("ANALYZE store_app_storevector")


def semantic_rows(member, rounds: int) -> tuple[list[str], bool]:
    import random

    from django.conf import settings
    from django.db import connection
    from django.test.utils import override_settings

    from store_app import semantic, vectorcache
    from store_app.selectors import store_item_search, store_search_validate

    rng = random.Random(1)
    query = [rng.uniform(-0.5, 0.5) for _ in range(DIMS)]
    request = store_search_validate(namespace_prefix=["bench", "p0"], query="q", query_vector=query, dims=DIMS, limit=10)

    def search():
        found = store_item_search(actor=member, request=request)
        assert len(found) == 10 and found[0].score is not None

    rows = []
    has_pgvector = semantic.pgvector_in_use(connection.alias)
    modes = [("pgvector", "auto", 0)] if has_pgvector else []
    numpy = "numpy" if not has_pgvector else "numpy (MEMORYADMIN_STORE_PGVECTOR=off)"
    # The process's vector cache (store_app.vectorcache) as a server runs it, and without it:
    # what the first search of a process, or one whose vectors do not fit, costs.
    modes.append((f"{numpy}, vectors kept in the process", "off", settings.MEMORYADMIN_STORE_VECTOR_CACHE_MB))
    modes.append((f"{numpy}, every vector read (MEMORYADMIN_STORE_VECTOR_CACHE_MB=0)", "off", 0))
    for label, setting, cache_mb in modes:
        with override_settings(MEMORYADMIN_STORE_PGVECTOR=setting, MEMORYADMIN_STORE_VECTOR_CACHE_MB=cache_mb):
            vectorcache.cache.clear()
            search()  # the first search of the process reads (and keeps) every vector
            count = rounds if setting == "auto" or not has_pgvector else max(5, rounds // 3)
            backend, process = backend_cpu(connection), time.process_time()
            samples = timed(search, count)
            cpu = ((backend_cpu(connection) - backend) / (count + 2), (time.process_time() - process) / (count + 2))
        rows.append((label, samples, cpu))
    return rows, has_pgvector


def backend_cpu(connection) -> float:
    """CPU seconds the database server's process for this connection has used (user and system),
    from /proc when the server runs on this machine, else NaN: a figure load barely changes."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def processes_cpu(pids: list[int]) -> float:
    """CPU seconds (user and system) the processes have used, from /proc; 0 for one that is gone."""
    total = 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def child_pids(pid: int) -> list[int]:
    """The processes `pid` started (gunicorn's workers), from /proc; [] where /proc does not say."""
    found: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as children:
                found += [int(child) for child in children.read().split()]
    except OSError:
        return []
    return found


def server_backends(connection) -> list[int]:
    """The database server's processes for the other connections to this database: the web server's."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()")
        return [row[0] for row in cursor.fetchall()]


def timed_cpu(fn, rounds: int, workers: list[int], connection) -> tuple[list[float], tuple[float, float, float]]:
    """`timed`, and the CPU seconds a call cost the client (this process), the web server's workers
    and the database server's processes serving them, each per call (/proc, so on this machine
    only): figures load barely changes, beside wall times that it does."""
    fn()  # the web server's connections to the database are open before they are looked up
    backends = server_backends(connection)
    client, server, database = time.process_time(), processes_cpu(workers), processes_cpu(backends)
    samples = timed(fn, rounds)
    calls = rounds + 2
    return samples, (
        (time.process_time() - client) / calls,
        (processes_cpu(workers) - server) / calls,
        (processes_cpu(backends) - database) / calls,
    )


def http_rows(url: str, key: str, rounds: int, calls: int, workers: list[int]) -> dict[str, float]:
    from django.db import connection
    from langgraph.store.base import PutOp

    from memoryadmin_client.langgraph import MemoryAdminStore

    store = MemoryAdminStore(url, key)
    figures: dict[str, float] = {}
    try:
        counter = iter(range(10**9))
        single, figures["single put cpu"] = timed_cpu(
            lambda: store.put(("http", "single"), f"k{next(counter)}", {"text": "one put"}), rounds, workers, connection
        )

        def batch():
            start = next(counter) * 100
            store.batch([PutOp(("http", "batch"), f"k{start + i}", {"text": f"put {i}"}) for i in range(100)])

        batched, figures["100-put batch cpu"] = timed_cpu(batch, rounds, workers, connection)
        figures["single put p50"] = pct(single, 0.5)
        figures["100-put batch p50"] = pct(batched, 0.5)

        async def sequential(count):
            for i in range(count):
                if i % 2:
                    await store.aget(("http", "seq"), f"k{i - 1}")
                else:
                    await store.aput(("http", "seq"), f"k{i}", {"i": i})

        async def concurrent(count):
            async def one(i):
                namespace = ("http", f"c{i % 10}")
                if i % 5 in (0, 1):
                    return await store.aput(namespace, f"k{i}", {"i": i})
                if i % 5 in (2, 3):
                    return await store.aget(namespace, f"k{i - 2}")
                return await store.asearch(namespace, limit=2)

            answers = await asyncio.gather(*(one(i) for i in range(count)), return_exceptions=True)
            failed = [a for a in answers if isinstance(a, BaseException)]
            assert not failed, failed[:3]

        async def both():
            sequential_calls = max(100, calls // 20)
            started = time.perf_counter()
            await sequential(sequential_calls)
            figures["sequential calls/s"] = sequential_calls / (time.perf_counter() - started)
            started = time.perf_counter()
            await concurrent(calls)
            figures["concurrent seconds"] = time.perf_counter() - started
            figures["concurrent calls/s"] = calls / figures["concurrent seconds"]
            await store.aclose()

        asyncio.run(both())
    finally:
        store.close()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", action="store_true", help="every size divided by 10")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--write", action="store_true", help="write the figures into docs/benchmarks.md")
    args, _ = parser.parse_known_args()  # `make bench` hands over the arguments of bench/run.py too
    divisor = 10 if args.small else 1
    prefix_items, store_items, calls = 10_000 // divisor, 100_000 // divisor, 10_000 // divisor
    load_before = os.getloadavg()
    started = time.perf_counter()

    url = bench.fresh_database(DB_NAME)
    bench.setup_django(url)
    from django.db import connection

    from django.contrib.auth import get_user_model

    from memoryadmin import roles
    from memoryadmin.apikeys import apikey_create

    member = get_user_model().objects.create_user(username="semantic-member", password=None)
    roles.role_set(member, "member")
    key = apikey_create(owner=member).plaintext
    server = None
    try:
        with connection.cursor() as cursor:
            log(f"loading {prefix_items:,} items with vectors under bench.p0 …")
            load(cursor, member.pk, "bench.p0", 1, prefix_items)
            cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
            row = cursor.fetchone()
            pgvector_version = row[0] if row else None
            cursor.execute("SHOW server_version")
            pg_version = cursor.fetchone()[0]
        small, has_pgvector = semantic_rows(member, args.rounds)
        with connection.cursor() as cursor:
            log(f"loading {store_items - prefix_items:,} more items under other prefixes …")
            for part, first in enumerate(range(prefix_items + 1, store_items + 1, prefix_items), start=1):
                load(cursor, member.pk, f"bench.p{part}", first, min(store_items, first + prefix_items - 1))
        large, _ = semantic_rows(member, args.rounds)
        port = bench.free_port()
        server = bench.start_server(url, port)
        log(f"HTTP: single puts, 100-put batches, {calls:,} concurrent async calls …")
        figures = http_rows(f"http://127.0.0.1:{port}", key, args.rounds, calls, child_pids(server.pid))
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)
        connection.close()
        bench.drop_database(DB_NAME)
    load_after = os.getloadavg()

    lines = [
        f"Measured by `bench/store_semantic.py{' --small' if args.small else ''}` on PostgreSQL {pg_version}"
        f" ({'pgvector ' + pgvector_version if pgvector_version else 'without pgvector'}), {args.rounds} rounds,"
        f" load average {load_before[0]:.1f} before and {load_after[0]:.1f} after the run"
        f" ({time.perf_counter() - started:.0f} s in all).",
        "",
        f"| semantic search, best 10 of {prefix_items:,} items under one prefix ({DIMS} dimensions) | store holds | p50 | p95"
        " | CPU per search: database, Python |",
        "|---|---:|---:|---:|---:|",
    ]
    for rows, held in ((small, prefix_items), (large, store_items)):
        for label, samples, (database, python) in rows:
            lines.append(
                f"| in process, ranked with {label} | {held:,} | {ms(pct(samples, .5))} ms | {ms(pct(samples, .95))} ms"
                f" | {ms(database)} ms, {ms(python)} ms |"
            )
    ratio = figures["100-put batch p50"] / figures["single put p50"]
    speedup = figures["concurrent calls/s"] / figures["sequential calls/s"]
    single_cpu, batch_cpu = figures["single put cpu"], figures["100-put batch cpu"]
    cpu_ratio = sum(batch_cpu) / sum(single_cpu) if sum(single_cpu) else float("nan")
    lines += [
        "",
        "| over HTTP (gunicorn, 2 workers), `MemoryAdminStore` | figure | CPU per request: client, web server, database |",
        "|---|---:|---:|",
        f"| one put (one request), p50 | {ms(figures['single put p50'])} ms | {', '.join(ms(x) + ' ms' for x in single_cpu)} |",
        f"| a batch of 100 puts (one request, one transaction), p50 | {ms(figures['100-put batch p50'])} ms ({ratio:.1f}× one put) |"
        f" {', '.join(ms(x) + ' ms' for x in batch_cpu)} ({cpu_ratio:.1f}× one put) |",
        f"| async calls one after another | {figures['sequential calls/s']:.0f} calls/s | |",
        f"| {calls:,} concurrent async calls (queued, 100 a request, 4 requests at a time) | "
        f"{figures['concurrent calls/s']:.0f} calls/s, {figures['concurrent seconds']:.1f} s in all ({speedup:.1f}× sequential) | |",
        "",
    ]
    report = "\n".join(lines)
    print(report)
    if args.write:
        bench.write_section("benchmarks.md", "store-semantic", report)
    if not has_pgvector:
        log("this database has no pgvector: the numpy ranking alone was measured")


if __name__ == "__main__":
    main()
