"""Benchmark: saving one new turn to a long conversation, and loading it back.

    .venv/bin/python bench/conversation.py [--sizes 10,100,1000,10000] [--write]

Creates a fresh PostgreSQL database (memoryadmin_bench by default), migrates it, and
for threads that already hold N messages measures, side by side in one run:

- memoryadmin's service (`thread_save_agent_state`), in process;
- memoryadmin over HTTP (gunicorn.conf.py with one worker on 127.0.0.1, httpx keep-alive client);
- the append-only save (`thread_append_messages`, `POST …/agent-state/append` with the
  ETag of the previous answer as If-Match), in process and over HTTP: only the turn travels;
- LangGraph's PostgresSaver on the same database, putting a checkpoint whose
  `messages` channel holds the conversation (what a LangGraph agent writes each step);
- raw psycopg: the statements our save needs, with no framework, as the floor.

Each figure is the p50 / p95 of `--rounds` saves of one turn (2 messages) at that size.
Prints a Markdown table; `--write` replaces the figures in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from contextlib import closing
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import run as bench  # noqa: E402  (the shared setup: fresh database, Django, gunicorn, percentiles)

pct = bench.pct


def fmt(samples: list[float]) -> str:
    return f"{pct(samples, 0.5) * 1000:.2f} / {pct(samples, 0.95) * 1000:.2f}"


def turns(start: int, count: int) -> list[dict]:
    text = "Could you check the itinerary again and tell me what changes if the train is late? " * 2
    return [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"{i}: {text}", "id": f"msg-{i}"}
        for i in range(start, start + count)
    ]


def bench_service(user, size: int, rounds: int) -> tuple[list[float], list[float], int]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from sessions_app.threads.selectors import thread_agent_state
    from sessions_app.threads.services import thread_save_agent_state

    thread_id = f"svc-{size}"
    context = turns(0, size)
    thread_save_agent_state(actor=user, thread_id=thread_id, agent_code="bench", context=context)
    saves = []
    for _ in range(rounds):
        context = context + turns(len(context), 2)
        started = time.perf_counter()
        result = thread_save_agent_state(actor=user, thread_id=thread_id, agent_code="bench", context=context)
        saves.append(time.perf_counter() - started)
        assert result.mode == "append" and result.appended == 2
    loads = []
    for _ in range(max(5, rounds // 3)):
        started = time.perf_counter()
        with CaptureQueriesContext(connection) as queries:
            state = thread_agent_state(actor=user, thread_id=thread_id)
        loads.append(time.perf_counter() - started)
        assert len(state.context) == len(context)
    return saves, loads, len(queries)


def bench_http(key: str, port: int, size: int, rounds: int) -> tuple[list[float], list[float]]:
    import httpx

    import orjson

    url = f"http://127.0.0.1:{port}/api/v1/threads/http-{size}/agent-state"
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    with httpx.Client(headers=headers, timeout=60) as client:
        context = turns(0, size)
        client.put(url, content=orjson.dumps({"agent_code": "bench", "context": context})).raise_for_status()
        saves = []
        for _ in range(rounds):
            context = context + turns(len(context), 2)
            # The agent's own encoding of its request is not the server's cost: done before the clock.
            body = orjson.dumps({"agent_code": "bench", "context": context})
            started = time.perf_counter()
            response = client.put(url, content=body)
            saves.append(time.perf_counter() - started)
            assert response.status_code == 200 and response.json()["appended"] == 2, response.text
        loads = []
        for _ in range(max(5, rounds // 3)):
            started = time.perf_counter()
            response = client.get(url)
            raw = response.content
            loads.append(time.perf_counter() - started)
            assert len(orjson.loads(raw)["context"]) == len(context)
    return saves, loads


def bench_append_service(user, size: int, rounds: int) -> tuple[list[float], int]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from sessions_app.threads.append import thread_append_messages

    thread_id = f"append-{size}"
    result = thread_append_messages(actor=user, thread_id=thread_id, agent_code="bench", messages=turns(0, size))
    count = size
    samples = []
    for _ in range(rounds):
        turn = turns(count, 2)
        started = time.perf_counter()
        with CaptureQueriesContext(connection) as queries:
            result = thread_append_messages(
                actor=user, thread_id=thread_id, agent_code="bench", messages=turn, if_match=result.etag
            )
        samples.append(time.perf_counter() - started)
        assert result.appended == 2 and result.active == count + 2
        count += 2
    return samples, len(queries)


def bench_append_http(key: str, port: int, size: int, rounds: int) -> tuple[list[float], int]:
    import httpx

    import orjson

    url = f"http://127.0.0.1:{port}/api/v1/threads/http-append-{size}/agent-state/append"
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    with httpx.Client(headers=headers, timeout=60) as client:
        response = client.post(url, content=orjson.dumps({"agent_code": "bench", "messages": turns(0, size)}),
                               headers={"If-None-Match": "*"})
        response.raise_for_status()
        count = size
        samples = []
        for _ in range(rounds):
            body = orjson.dumps({"agent_code": "bench", "messages": turns(count, 2)})
            started = time.perf_counter()
            response = client.post(url, content=body, headers={"If-Match": response.headers["ETag"]})
            samples.append(time.perf_counter() - started)
            assert response.status_code == 200 and response.json()["active"] == count + 2, response.text
            count += 2
    return samples, len(body)


def bench_postgres_saver(url: str, size: int, rounds: int) -> list[float]:
    from langchain_core.messages import AIMessage, HumanMessage
    from langgraph.checkpoint.base import empty_checkpoint
    from langgraph.checkpoint.postgres import PostgresSaver

    def as_messages(items):
        return [(HumanMessage if m["role"] == "user" else AIMessage)(content=m["content"], id=m["id"]) for m in items]

    with PostgresSaver.from_conn_string(url) as saver:
        saver.setup()
        config = {"configurable": {"thread_id": f"lg-{size}", "checkpoint_ns": ""}}
        messages = as_messages(turns(0, size))
        version = 1
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {"messages": messages}
        checkpoint["channel_versions"] = {"messages": version}
        config = saver.put(config, checkpoint, {"source": "loop", "step": 0}, {"messages": version})
        samples = []
        for step in range(rounds):
            messages = messages + as_messages(turns(len(messages), 2))
            version += 1
            checkpoint = empty_checkpoint()
            checkpoint["channel_values"] = {"messages": messages}
            checkpoint["channel_versions"] = {"messages": version}
            started = time.perf_counter()
            config = saver.put(config, checkpoint, {"source": "loop", "step": step + 1}, {"messages": version})
            samples.append(time.perf_counter() - started)
    return samples


def bench_raw_psycopg(url: str, thread_id: str, stored_size: int, rounds: int) -> list[float]:
    """The floor: the service's two statements sent by plain psycopg (bench/run.py raw_save_turn)."""
    import psycopg

    samples = []
    context = turns(0, stored_size)
    with closing(psycopg.connect(url, autocommit=True)) as conn:
        for _ in range(rounds):
            context = context + turns(len(context), 2)
            started = time.perf_counter()
            assert bench.raw_save_turn(conn, thread_id, "bench", context) == 2
            samples.append(time.perf_counter() - started)
    return samples


def bench_statements_alone(url: str, thread_id: str, stored_size: int, rounds: int) -> list[float]:
    """The two statements with the chain digests computed beforehand, between rounds: the
    database's share of a save, without the prefix check's CPU work (and its trace in the caches)."""
    import psycopg

    from sessions_app.threads.messages import ContextHasher

    context = turns(0, stored_size)
    planned = []
    for _ in range(rounds):
        context = context + turns(len(context), 2)
        planned.append((context, ContextHasher(context).digests_from(len(context) - 2)))
    samples = []
    with closing(psycopg.connect(url, autocommit=True)) as conn:
        for context, digests in planned:
            started = time.perf_counter()
            assert bench.raw_save_turn(conn, thread_id, "bench", context, digests) == 2
            samples.append(time.perf_counter() - started)
    return samples


def bench_prefix_check(size: int, rounds: int) -> list[float]:
    """The CPU part that grows with the conversation: checking that the posted context
    still starts with what is stored (canonical JSON and SHA-256 of the whole prefix)."""
    from sessions_app.threads.messages import ContextHasher

    context = turns(0, size + 2)
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        ContextHasher(context).prefix_digest(size)
        samples.append(time.perf_counter() - started)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10,100,1000,5000,10000")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--write", action="store_true", help="write the table into docs/benchmarks.md")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]

    url = bench.fresh_database()
    bench.setup_django(url)
    from django.contrib.auth import get_user_model

    from memoryadmin.apikeys import apikey_create
    from sessions_app.models import Thread

    user = get_user_model().objects.create_user("bench")
    key = apikey_create(owner=user).plaintext
    port = bench.free_port()
    server = bench.start_server(url, port, workers=1)
    rows = []
    appends = []
    try:
        for size in sizes:
            print(f"size {size} …", file=sys.stderr, flush=True)
            svc_save, svc_load, load_queries = bench_service(user, size, args.rounds)
            http_save, http_load = bench_http(key, port, size, args.rounds)
            appends.append((size, *bench_append_service(user, size, args.rounds), *bench_append_http(key, port, size, args.rounds)))
            saver = bench_postgres_saver(url, size, args.rounds)
            thread = Thread.objects.get(thread_id=f"svc-{size}")
            raw = bench_raw_psycopg(url, thread.thread_id, thread.active_count, args.rounds)
            prefix = bench_prefix_check(thread.active_count, args.rounds)
            thread.refresh_from_db()
            alone = bench_statements_alone(url, thread.thread_id, thread.active_count, args.rounds)
            rows.append((size, svc_save, prefix, http_save, saver, raw, alone, svc_load, http_load, load_queries))
    finally:
        server.terminate()
        server.wait(timeout=10)

    base = pct(rows[0][1], 0.5)
    base_alone = pct(rows[0][6], 0.5)
    first = rows[0][0]
    lines = [
        "| messages in thread | service save | of which prefix check | HTTP save | PostgresSaver put "
        "| raw psycopg floor | statements alone | service ÷ floor | PostgresSaver ÷ service | service save ÷ save at "
        f"{first} | statements alone ÷ same at {first} | service load | HTTP load | load queries |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for size, svc_save, prefix, http_save, saver, raw, alone, svc_load, http_load, load_queries in rows:
        lines.append(
            f"| {size:,} | {fmt(svc_save)} | {pct(prefix, .5) * 1000:.2f} | {fmt(http_save)} | "
            f"{fmt(saver)} | {fmt(raw)} | {fmt(alone)} | "
            f"{pct(svc_save, .5) / pct(raw, .5):.2f}× | {pct(saver, .5) / pct(svc_save, .5):.1f}× | "
            f"{pct(svc_save, .5) / base:.2f}× | {pct(alone, .5) / base_alone:.2f}× | {fmt(svc_load)} | {fmt(http_load)} | {load_queries} |"
        )
    savers = {row[0]: row[4] for row in rows}
    append_base, append_http_base = pct(appends[0][1], 0.5), pct(appends[0][3], 0.5)
    append_lines = [
        f"| messages in thread | append, service | append, HTTP | request bytes | queries | service ÷ at {first} "
        f"| HTTP ÷ at {first} | PostgresSaver put | PostgresSaver ÷ append (service) |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for size, svc, queries, http, request_bytes in appends:
        append_lines.append(
            f"| {size:,} | {fmt(svc)} | {fmt(http)} | {request_bytes:,} | {queries} | {pct(svc, .5) / append_base:.2f}× "
            f"| {pct(http, .5) / append_http_base:.2f}× | {fmt(savers[size])} | {pct(savers[size], .5) / pct(svc, .5):.1f}× |"
        )
    import django
    from importlib.metadata import version

    import psycopg

    with closing(psycopg.connect(url)) as conn:
        pg_version = conn.execute("SHOW server_version").fetchone()[0]
    machine = (
        f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"PostgreSQL {pg_version}, Django {django.get_version()}, "
        f"langgraph-checkpoint-postgres {version('langgraph-checkpoint-postgres')}, psycopg {psycopg.__version__}"
    )
    table = "\n".join(lines)
    report = (
        f"Times in milliseconds, p50 / p95 of {args.rounds} saves of one turn (2 messages) per size; "
        f"messages of ~180 characters.\n\nMachine: {machine}.\n\n{table}\n\n"
        f"The append-only save of the same turn (only the 2 new messages sent, If-Match the previous ETag):\n\n"
        + "\n".join(append_lines) + "\n"
    )
    print(report)
    if args.write:
        bench.write_section("benchmarks.md", "conversation", report)


if __name__ == "__main__":
    main()
