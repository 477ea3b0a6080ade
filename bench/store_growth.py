"""The store operations that used to grow with the data, timed at 1x and 100x, with their plans.

    BENCH_DB=memoryadmin_store_bench .venv/bin/python bench/store_growth.py [--scales 1,100] [--rounds 30]

A fresh PostgreSQL database (BENCH_DB, made through BENCH_ADMIN_URL as in
bench/run.py) is loaded with bench/loader.py's store data only (100x: 1 000 000
items over 100 000 namespaces, 2 500 orgs), and after each stage, through
memoryadmin's selectors in process:

- store search with a namespace prefix and a filter (the newest org, by its owner,
  `{"topic": "travel"}`, limit 10) and the same for an org from the middle of the store;
- namespace expansion at the root (the store browser's first level) as an admin
  and as a member; the namespace listing API at the root (max_depth 1).

Prints p50 / p95 (ms), the query count, a digest of each answer (to compare runs
of different code on the same data) and EXPLAIN ANALYZE of every statement.
`--keep` leaves the database for another run with `--measure-only`, which
migrates it and measures it as it is. The database is dropped otherwise.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
from contextlib import closing
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import loader  # noqa: E402
import run as bench  # noqa: E402  (fresh database, Django setup, percentiles)

DB_NAME = os.environ.get("BENCH_DB", "memoryadmin_store_bench")
FULL_NAMESPACES = 100_000
MEMBERS = 100
log, pct = bench.log, bench.pct


def timed(fn, rounds: int) -> list[float]:
    import time

    fn(), fn()
    out = []
    for _ in range(rounds):
        started = time.perf_counter()
        fn()
        out.append(time.perf_counter() - started)
    return out


def digest(value) -> str:
    return hashlib.sha256(repr(value).encode()).hexdigest()[:12]


def explain(fn) -> tuple[int, list[str]]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured:
        fn()
    plans = []
    with connection.cursor() as cursor:
        for query in captured.captured_queries:
            cursor.execute("EXPLAIN (ANALYZE, COSTS OFF) " + query["sql"])
            plans.append("\n".join(row[0] for row in cursor.fetchall()))
    return len(captured), plans


def measure(scale: int, namespaces: int, members, admin, rounds: int) -> None:
    from store_app.selectors import (
        store_item_search,
        store_namespace_children,
        store_namespace_list,
        store_search_validate,
    )

    orgs = namespaces // (loader.USERS_PER_ORG * len(loader.KINDS))

    def search(org: int):
        user = members[org % len(members)]
        request = store_search_validate(namespace_prefix=[loader.org_key(org)], filter={"topic": "travel"}, limit=10)
        return lambda: [(i.namespace_path, i.key) for i in store_item_search(actor=user, request=request)]

    def children(user):
        return lambda: [(n.namespace, n.items, n.has_children) for n in store_namespace_children(actor=user, namespace=())[0]]

    operations = [
        (f"store search, prefix + filter (newest org {loader.org_key(orgs - 1)}, its owner)", search(orgs - 1)),
        (f"store search, prefix + filter (middle org {loader.org_key(orgs // 2)}, its owner)", search(orgs // 2)),
        ("namespace expansion (root, admin)", children(admin)),
        ("namespace expansion (root, member)", children(members[0])),
        ("namespace listing API (root, max_depth 1, limit 1000, admin)",
         lambda: store_namespace_list(actor=admin, max_depth=1, limit=1000)),
    ]
    print(f"\n## {scale}x: {namespaces * loader.ITEMS_PER_NAMESPACE:,} items, {namespaces:,} namespaces, {orgs:,} orgs\n")
    print("| operation | p50 ms | p95 ms | queries | answer digest |")
    print("|---|---:|---:|---:|---|")
    plans = []
    for label, fn in operations:
        samples = timed(fn, rounds)
        queries, explained = explain(fn)
        print(f"| {label} | {pct(samples, .5) * 1000:.2f} | {pct(samples, .95) * 1000:.2f} | {queries} | {digest(fn())} |",
              flush=True)
        plans.append((label, explained))
    for label, explained in plans:
        for plan in explained:
            print(f"\n{label}:\n```\n{plan}\n```")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scales", default="1,100")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--keep", action="store_true", help="leave the database for a later --measure-only run")
    parser.add_argument("--measure-only", action="store_true", help="measure the database left by --keep")
    args = parser.parse_args()
    scales = [int(s) for s in args.scales.split(",")]
    url = bench.database_url(DB_NAME) if args.measure_only else bench.fresh_database(DB_NAME)
    try:
        bench.setup_django(url)
        import platform

        import psycopg
        from django.contrib.auth import get_user_model
        from django.db import connection

        if args.measure_only:
            User = get_user_model()
            members = list(User.objects.filter(username__startswith="member-").order_by("username"))
            admin = User.objects.get(username="bench-admin")
            namespaces = connection.cursor().execute(
                "SELECT count(DISTINCT namespace_path) FROM store_app_storeitem").fetchone()[0]
            with connection.cursor() as cursor:
                cursor.execute("ANALYZE store_app_storeitem")
            measure(scales[-1], namespaces, members, admin, args.rounds)
        else:
            loader.langgraph_tables(url, checkpoints=False)  # the loader fills PostgresStore's table too
            members, admin = loader.seed_users(MEMBERS)
            loaded = loader.Loaded()
            with closing(psycopg.connect(url)) as conn:
                for scale in scales:
                    namespaces = FULL_NAMESPACES * scale // 100
                    log(f"loading {scale}x ({namespaces:,} namespaces) …")
                    loader.load_range(conn, loaded, threads=0, namespaces=namespaces, owners=[m.pk for m in members],
                                      templates=None, log=log)
                    measure(scale, namespaces, members, admin, args.rounds)
        version = connection.cursor().execute("SHOW server_version").fetchone()[0]
        print(f"\nMachine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
              f"PostgreSQL {version}; load average {os.getloadavg()[0]:.1f} at the end.")
    finally:
        from django.db import connections

        connections.close_all()
        if not args.keep:
            bench.drop_database(DB_NAME)


if __name__ == "__main__":
    main()
