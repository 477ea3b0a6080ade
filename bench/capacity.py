"""Capacity estimate: bytes per thread measured on the benchmark's data, scaled to 100 M threads.

    .venv/bin/python bench/capacity.py [--threads 2000] [--target 100000000] [--write]

Loads `--threads` threads of the benchmark's shape (bench/loader.py: ~100 blocks with
compaction history and ~50 checkpoints per thread; 10 store namespaces of 10 items per
thread, the full benchmark's ratio) into a fresh PostgreSQL database, VACUUM ANALYZEs it, reads each
table's rows and total size (heap, TOAST and indexes) from the catalog, and scales the
per-thread figures to `--target` threads. `--write` puts the table into docs/scaling.md.
"""

from __future__ import annotations

import argparse
import sys
from contextlib import closing
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import loader  # noqa: E402
import run as bench  # noqa: E402

TABLES = (
    ("sessions_app_thread", "threads"),
    ("sessions_app_block", "blocks (messages)"),
    ("sessions_app_checkpoint", "checkpoints"),
    ("sessions_app_checkpointwrite", "pending writes"),
    ("store_app_storeitem", "store items"),
)


def human(size: float) -> str:
    for unit in ("B", "kB", "MB", "GB", "TB", "PB"):
        if size < 1024 or unit == "PB":
            return f"{size:,.1f} {unit}" if unit != "B" else f"{size:,.0f} B"
        size /= 1024
    raise AssertionError


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2000)
    parser.add_argument("--target", type=int, default=100_000_000)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()

    import psycopg

    url = bench.fresh_database()
    bench.setup_django(url)
    # The loader fills LangGraph's tables too (the benchmark compares against them); only ours are counted.
    templates = loader.langgraph_tables(url)
    members, _admin = loader.seed_users(20)
    with closing(psycopg.connect(url)) as conn:
        loader.load_range(
            conn, loader.Loaded(), threads=args.threads, namespaces=10 * args.threads, owners=[u.pk for u in members],
            templates=templates, log=lambda message: print(message, file=sys.stderr),
        )
    with closing(psycopg.connect(url, autocommit=True)) as conn:
        conn.execute("VACUUM ANALYZE")
        rows = []
        for table, label in TABLES:
            count = conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            total, heap, indexes = conn.execute(
                "SELECT pg_total_relation_size(%s), pg_table_size(%s), pg_indexes_size(%s)", (table, table, table)
            ).fetchone()
            rows.append((label, count, total, heap, indexes))
        version = conn.execute("SHOW server_version").fetchone()[0]

    scale = args.target / args.threads
    lines = [
        f"Measured on {args.threads:,} threads of the benchmark's shape (PostgreSQL {version}), scaled to "
        f"{args.target:,} threads; sizes include TOAST and indexes.",
        "",
        "| table | rows measured | bytes per row (table + indexes) | per thread | rows at target | size at target |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    grand = 0.0
    for label, count, total, _heap, _indexes in rows:
        if not count:
            lines.append(f"| {label} | 0 (none in the benchmark's data) | — | — | — | — |")
            continue
        per_row = total / count
        at_target = total * scale
        grand += at_target
        lines.append(
            f"| {label} | {count:,} | {per_row:,.0f} | {human(total / args.threads)} | {count * scale:,.0f} | {human(at_target)} |"
        )
    lines.append(f"| **total** | | | {human(grand / args.target)} | | **{human(grand)}** |")
    report = "\n".join(lines) + "\n"
    print(report)
    if args.write:
        bench.write_section("scaling.md", "capacity", report)


if __name__ == "__main__":
    main()
