"""Open live-turn streams held against a server while `make loadtest` measures the API (bench/loadtest.py).

    python bench/live_streams.py --base http://127.0.0.1:PORT --cookie 'sessionid=…' --key KEY \
        --threads t1,t2 --streams 500 --seconds 600 [--chunks-per-second 10]

Opens `--streams` event streams of the dashboard (`/threads/<id>/turns/stream`, spread
over `--threads`, whose pending turns it begins through the API), keeps them open for
`--seconds` at most, and reopens one that ends (a 429 waits for its Retry-After). Tabs
open at `--open-rate` a second, not all in the same instant.
Meanwhile (with `--feed-on-signal`, once it gets SIGUSR1) it appends `--chunks-per-second` chunks through the API, round robin over the
threads, each carrying the time it was sent, so every stream of that thread receives
it and the delivery delay is measured. Stops at `--seconds` or on SIGTERM and prints
one JSON line: streams opened, refusals, chunks sent and received, delivery delay
p50/p99/max, streams that ended early. Loopback only; one asyncio process.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import resource
import signal
import time
from urllib.parse import urlsplit

import httpx


class Totals:
    def __init__(self):
        self.opened = self.refused = self.unavailable = self.ended = self.failed = self.sent = self.received = 0
        # Streams the server ended with `event: timeout`: their worker stopping (recycled) says so.
        self.timed_out = 0
        self.open_now = 0
        self.delays: list[float] = []
        self.all_open_at: float | None = None


async def hold_stream(host: str, port: int, path: str, cookie: str, totals: Totals, stop: asyncio.Event, target: int,
                      turn_of: dict[str, int], thread: str) -> None:
    """One tab following a thread's live turn; reopened when the server ends it, from the last
    chunk it received (`?turn=&after=`, as the page's panel reopens it), so that no chunk
    is received twice."""
    after = None
    while not stop.is_set():
        target_path = path if after is None or thread not in turn_of else f"{path}?turn={turn_of[thread]}&after={after}"
        try:
            reader, writer = await asyncio.open_connection(host, port)
        except OSError:
            totals.failed += 1
            await asyncio.sleep(1)
            continue
        try:
            writer.write(f"GET {target_path} HTTP/1.1\r\nHost: {host}\r\nAccept: text/event-stream\r\nCookie: {cookie}\r\n\r\n".encode())
            head = await reader.readuntil(b"\r\n\r\n")
            status = int(head.split(b" ", 2)[1])
            if status != 200:
                # 429 past a limit, 503 when the database did not answer in time: retry, as a browser does.
                if status == 429:
                    totals.refused += 1
                else:
                    totals.unavailable += 1
                retry = next((line.split(b":", 1)[1] for line in head.split(b"\r\n") if line.lower().startswith(b"retry-after:")), b"1")
                await asyncio.sleep(min(5.0, float(retry.strip() or 1)))
                continue
            totals.opened += 1
            totals.open_now += 1
            if totals.open_now >= target and totals.all_open_at is None:
                totals.all_open_at = time.time()
            try:
                buffer = b""
                while not stop.is_set():
                    piece = await reader.read(65536)
                    if not piece:
                        totals.ended += 1
                        break
                    buffer += piece
                    while b"\n\n" in buffer:
                        event, buffer = buffer.split(b"\n\n", 1)
                        # The body is chunked: an event may follow a chunk's size line.
                        if b"event: timeout" in event:
                            totals.timed_out += 1
                        found_id = event.find(b"\nid: ")
                        if found_id >= 0:
                            with contextlib.suppress(ValueError):
                                after = int(event[found_id + 5:].split(b"\n", 1)[0].strip())
                        marker = event.find(b"data: sent=")
                        if marker >= 0:
                            totals.received += 1
                            sent = float(event[marker + 11:].split(b"\n", 1)[0].split(b"\r", 1)[0])
                            totals.delays.append(time.time() - sent)
            finally:
                totals.open_now -= 1
        except (OSError, asyncio.IncompleteReadError, ValueError):
            totals.failed += 1
            await asyncio.sleep(0.5)
        finally:
            writer.close()


async def feed(base: str, key: str, threads: list[str], rate: float, totals: Totals, stop: asyncio.Event, go: asyncio.Event,
               turn_of: dict[str, int]) -> None:
    """An agent streaming its answers: chunks through the API, stamped with the time sent."""
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=30) as http:
        for thread in threads:
            (await http.post(f"/api/v1/threads/{thread}/turns", json={"question": "load"})).raise_for_status()
            pending = (await http.get(f"/api/v1/threads/{thread}/turns")).json().get("pending") or {}
            if isinstance(pending.get("id"), int):
                turn_of[thread] = pending["id"]
        await go.wait()
        n = 0
        while not stop.is_set():
            thread = threads[n % len(threads)]
            n += 1
            response = await http.post(f"/api/v1/threads/{thread}/turns/pending/chunks", json={"text": f"sent={time.time():.6f}"})
            if response.status_code == 200:
                totals.sent += 1
            await asyncio.sleep(1 / rate)


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", required=True)
    parser.add_argument("--cookie", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--threads", required=True, help="comma-separated thread ids the key's owner owns")
    parser.add_argument("--streams", type=int, default=500)
    parser.add_argument("--seconds", type=float, default=600)
    parser.add_argument("--chunks-per-second", type=float, default=10)
    parser.add_argument("--open-rate", type=float, default=50, help="streams opened per second at the start")
    parser.add_argument("--feed-on-signal", action="store_true", help="append chunks only after SIGUSR1 (heartbeats alone until then)")
    args = parser.parse_args()
    if args.streams > 5000 or args.seconds > 7200:
        raise SystemExit("bounded: at most 5000 streams for at most 2 hours")
    url = urlsplit(args.base)
    threads = args.threads.split(",")
    totals, stop = Totals(), asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    go = asyncio.Event()
    loop.add_signal_handler(signal.SIGUSR1, go.set)
    if not args.feed_on_signal:
        go.set()
    loop.call_later(args.seconds, stop.set)
    started = time.time()
    holders = []
    turn_of: dict[str, int] = {}
    for i in range(args.streams):
        thread = threads[i % len(threads)]
        path = f"/threads/{thread}/turns/stream"
        holders.append(asyncio.create_task(
            hold_stream(url.hostname, url.port, path, args.cookie, totals, stop, args.streams, turn_of, thread)
        ))
        await asyncio.sleep(1 / args.open_rate)
    feeder = asyncio.create_task(feed(args.base, args.key, threads, args.chunks_per_second, totals, stop, go, turn_of))
    await stop.wait()
    for task in [*holders, feeder]:
        task.cancel()
    await asyncio.gather(*holders, feeder, return_exceptions=True)
    print("STREAMS " + json.dumps({
        "streams": args.streams, "opened": totals.opened, "refused": totals.refused, "unavailable": totals.unavailable, "ended_early": totals.ended, "timed_out": totals.timed_out,
        "failed": totals.failed, "all_open_after_s": round(totals.all_open_at - started, 1) if totals.all_open_at else None,
        "chunks_sent": totals.sent, "chunks_received": totals.received,
        "delay_p50_ms": round(_percentile(totals.delays, 0.5) * 1000, 1),
        "delay_p99_ms": round(_percentile(totals.delays, 0.99) * 1000, 1),
        "delay_max_ms": round(max(totals.delays, default=0) * 1000, 1),
        # What holding the streams cost this client (it shares the machine with the server).
        "client_cpu_s": round(resource.getrusage(resource.RUSAGE_SELF).ru_utime + resource.getrusage(resource.RUSAGE_SELF).ru_stime, 1),
        "wall_s": round(time.time() - started, 1),
    }), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
