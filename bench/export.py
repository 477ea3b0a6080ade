"""Benchmark: peak memory of a thread export, as the thread grows to 100 000 messages.

    .venv/bin/python bench/export.py [--sizes 1000,10000,100000] [--database postgres|sqlite] [--write]

Creates a fresh database (PostgreSQL `memoryadmin_bench_export` at BENCH_ADMIN_URL, or a
temporary SQLite file), saves one thread of N messages (plus 100 checkpoints with pending
writes) through the services, then streams its bundle (sessions_app.export.thread_export)
to nowhere, byte by byte as a response would, under `tracemalloc`. For comparison it also
measures what reading the same messages into one list costs (what a non-streaming export
would hold at least). Prints a Markdown table; `--write` puts it into docs/benchmarks.md
between the `export:` markers.

tracemalloc sees Python allocations (rows, JSON, zip buffers), not the database driver's
C buffers; the figure is the peak above what was allocated before the export started.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import run as bench  # noqa: E402  (fresh database, Django setup, docs sections)

DB_NAME = os.environ.get("BENCH_EXPORT_DB", "memoryadmin_bench_export")
TEXT = "Could you check the itinerary again and tell me what changes if the train is late? " * 3


def fresh_database(kind: str) -> str:
    if kind == "sqlite":
        return f"sqlite:///{tempfile.mkdtemp(prefix='ma-bench-')}/export.sqlite3"
    return bench.fresh_database(DB_NAME)


def messages(count: int) -> list[dict]:
    return [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"{i}: {TEXT}", "id": f"msg-{i}"}
        for i in range(count)
    ]


def make_thread(user, thread_id: str, size: int) -> None:
    from sessions_app.checkpoints.services import checkpoint_input, checkpoint_put, checkpoint_put_writes, write_input
    from sessions_app.threads.services import thread_save_agent_state

    thread_save_agent_state(actor=user, thread_id=thread_id, agent_code="bench", context=messages(size))
    parent = None
    for i in range(100):
        data = checkpoint_input(checkpoint={"channel_values": {"step": i, "note": TEXT}}, metadata={"step": i}, parent_checkpoint_id=parent)
        parent = checkpoint_put(actor=user, thread_id=thread_id, data=data).checkpoint_id
        checkpoint_put_writes(
            actor=user, thread_id=thread_id, checkpoint_id=parent, data=write_input(task_id=f"t{i}", writes=[{"channel": "step", "value": i}])
        )


def measure_export(user, thread_id: str) -> tuple[int, int, float, dict]:
    """(peak bytes, zip bytes, seconds, manifest counts) of streaming one bundle to a file."""
    import json
    import zipfile

    from memoryadmin.operations.export import thread_export

    with tempfile.TemporaryFile() as out:
        tracemalloc.start()
        tracemalloc.reset_peak()
        base, _ = tracemalloc.get_traced_memory()
        started = time.perf_counter()
        _, chunks = thread_export(actor=user, thread_id=thread_id)
        size = 0
        for chunk in chunks:
            size += len(chunk)
            out.write(chunk)
        elapsed = time.perf_counter() - started
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        out.seek(0)
        with zipfile.ZipFile(out) as archive:
            assert archive.testzip() is None
            counts = json.loads(archive.read("manifest.json"))["counts"]
    return peak - base, size, elapsed, counts


def measure_time(user, thread_id: str) -> float:
    """Seconds to stream the bundle, without tracemalloc (which slows every allocation)."""
    from memoryadmin.operations.export import thread_export

    started = time.perf_counter()
    _, chunks = thread_export(actor=user, thread_id=thread_id)
    for _chunk in chunks:
        pass
    return time.perf_counter() - started


def measure_list(thread_id: str) -> int:
    """Peak bytes of reading every message of the thread into one list (a non-streaming floor)."""
    from sessions_app.models import Block

    tracemalloc.start()
    tracemalloc.reset_peak()
    base, _ = tracemalloc.get_traced_memory()
    rows = list(Block.objects.filter(thread__thread_id=thread_id).order_by("seq").values_list("message", flat=True))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del rows
    return peak - base


def mib(value: int) -> str:
    return f"{value / 1048576:.1f} MiB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--database", choices=["postgres", "sqlite"], default="postgres")
    parser.add_argument("--write", action="store_true", help="write the table into docs/benchmarks.md")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]

    bench.setup_django(fresh_database(args.database))
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.create_user("bench")
    rows = []
    for size in sizes:
        thread_id = f"export-{size}"
        print(f"size {size}: saving …", file=sys.stderr, flush=True)
        make_thread(user, thread_id, size)
        print(f"size {size}: exporting …", file=sys.stderr, flush=True)
        peak, zipped, _, counts = measure_export(user, thread_id)
        seconds = measure_time(user, thread_id)
        listed = measure_list(thread_id)
        assert counts.get("blocks") == size, counts
        rows.append((size, peak, listed, zipped, seconds))

    engine = "PostgreSQL 15" if args.database == "postgres" else "SQLite"
    report = (
        f"{engine}, Python {platform.python_version()}, {os.cpu_count()} cores. "
        "Each message is about 260 bytes of text; the thread also has 100 checkpoints with pending writes.\n\n"
        "| messages | export peak (tracemalloc) | messages read into one list | zip size | export time (untraced) |\n"
        "|---:|---:|---:|---:|---:|\n"
        + "".join(
            f"| {size:,} | {mib(peak)} | {mib(listed)} | {mib(zipped)} | {seconds:.1f} s |\n"
            for size, peak, listed, zipped, seconds in rows
        )
    )
    print(report)
    if args.write:
        bench.write_section("benchmarks.md", f"export-{args.database}", report)


if __name__ == "__main__":
    main()
