"""`make loadtest`: HTTP throughput and latency of the production server on this machine.

    .venv/bin/python bench/loadtest.py [--duration 60] [--connections 8] [--write]

Creates a fresh PostgreSQL database (LOADTEST_DB, default memoryadmin_loadtest),
loads 1 000 threads (100 000 blocks, 50 000 checkpoints) and 100 000 store items
with bench/loader.py, starts gunicorn from gunicorn.conf.py on 127.0.0.1 (uvicorn's
ASGI workers, as many as the CPU count gives) and drives each scenario with wrk for
`--duration` seconds:

- agent-state save: PUT, each request appends a turn (2 messages) to one of 200
  conversations, which start again on a new thread at 100 messages;
- agent-state load: GET a loaded thread's context;
- checkpoint put: POST a new LangGraph checkpoint (a push, its own id each time, its
  messages whole) to a loaded thread;
- checkpoint get: GET the latest checkpoint of a loaded thread;
- store put: PUT an item (new keys) in one of the member's namespaces;
- store search: POST a search with a namespace prefix and a filter;
- thread list page: the dashboard's HTML page, signed in as an admin.

Then every scenario again with `--streams` (500) live-turn streams open on a fresh
server: bench/live_streams.py holds them (dashboard event streams over 50 threads
with pending turns, reopened if one ends) and appends 10 chunks a second through the
API, each stamped with its sending time, so the report also gives how long a chunk
took to reach the streams. With the streams still open, a bulk purge of `--job-threads`
(10 000) threads of their own runs on the job queue (a `manage.py jobs_worker` beside
the server) and must finish. Reports requests/s, p50/p95/p99 and errors (any non-2xx
answer or socket error counts), the server's 5xx count from /metrics, and, with the
streams open, the worker processes' threads, memory and idle CPU (what holding the
streams costs), the server's PostgreSQL connections and the job's time; `--write` puts
the table in docs/benchmarks.md. Loopback only; the file-descriptor limit is raised
to what the streams need (or the run stops, saying so).

The target (docs/scaling.md): with 500 streams open, every API scenario's p99 under
250 ms and no 5xx, and the job finished. On 2 cores the whole run takes about
2 × 7 × (60 + 5 + a few) s, plus loading (1 to 2 minutes) and the job (a purge does a
few tens of threads a second on a quiet 2-core machine, so 10 000 take several
minutes): 25 to 40 minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
os.environ.setdefault("BENCH_DB", os.environ.get("LOADTEST_DB", "memoryadmin_loadtest"))

import loader  # noqa: E402
import run as bench  # noqa: E402

THREADS = 1_000
NAMESPACES = 10_000
CONVERSATIONS = 200

# Shared by every scenario: wrk reports its summary as one JSON line.
DONE_LUA = r"""
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'RESULT {"requests": %d, "duration_us": %d, "p50": %d, "p95": %d, "p99": %d, "max": %d, '
    .. '"connect": %d, "read": %d, "write": %d, "status": %d, "timeout": %d}\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(95),
    latency:percentile(99), latency.max, e.connect, e.read, e.write, e.status, e.timeout))
end
"""


def lua_list(values) -> str:
    return "{" + ", ".join(json.dumps(v) for v in values) + "}"


def scenario_scripts(
    *, key: str, cookie: str, member_threads: list[str], orgs: list[str], checkpoint_body: str, checkpoint_id: str
) -> dict[str, str]:
    auth = f'wrk.headers["Authorization"] = "Bearer {key}"\nwrk.headers["Content-Type"] = "application/json"\n'
    text = loader.text_for(3).replace('"', "")
    return {
        "agent-state save": auth + f"""
local n = 0
local conversations = {CONVERSATIONS}
local text = "{text}"
local cache = {{}}
local function message(i)
  local m = cache[i]
  if not m then
    local role = (i % 2 == 0) and "user" or "assistant"
    m = string.format('{{"role":"%s","content":"%d: %s","id":"m-%d"}}', role, i, text, i)
    cache[i] = m
  end
  return m
end
request = function()
  local slot = n % conversations
  local round = math.floor(n / conversations)
  n = n + 1
  local generation = math.floor(round / 50)
  local size = 2 * (round % 50 + 1)
  local parts = {{}}
  for i = 0, size - 1 do parts[#parts + 1] = message(i) end
  local body = '{{"agent_code":"loadtest","context":[' .. table.concat(parts, ",") .. ']}}'
  return wrk.format("PUT", string.format("/api/v1/threads/lt-%d-%d/agent-state", generation, slot), nil, body)
end
""",
        "agent-state load": auth + f"""
local threads = {lua_list(member_threads)}
local n = 0
request = function()
  n = n + 1
  return wrk.format("GET", "/api/v1/threads/" .. threads[n % #threads + 1] .. "/agent-state")
end
""",
        "checkpoint put": auth + f"""
local threads = {lua_list(member_threads)}
local body = {json.dumps(checkpoint_body)}
local id = ({json.dumps(checkpoint_id)}):gsub("%-", "%%-")  -- a Lua pattern matching the id as written
local n = 0
request = function()
  n = n + 1
  -- A new checkpoint each time (its own id), as each step of an agent puts one.
  local fresh = string.format("%08x-0000-6000-8000-%012x", math.random(0, 0x7fffffff), n)
  return wrk.format("POST", "/api/v1/threads/" .. threads[n % #threads + 1] .. "/checkpoints", nil,
    (string.gsub(body, id, fresh)))
end
""",
        "checkpoint get latest": auth + f"""
local threads = {lua_list(member_threads)}
local n = 0
request = function()
  n = n + 1
  return wrk.format("GET", "/api/v1/threads/" .. threads[n % #threads + 1] .. "/checkpoints/latest")
end
""",
        "store put": auth + f"""
local orgs = {lua_list(orgs)}
local n = 0
request = function()
  n = n + 1
  local org = orgs[n % #orgs + 1]
  local user = "user-" .. tonumber(string.sub(org, 5)) .. "-" .. (n % 10)
  local body = string.format('{{"namespace":["%s","%s","memories"],"key":"lt-%d","value":{{"text":"%s","topic":"travel","score":%d}}}}',
    org, user, n, "{text}", n % 100)
  return wrk.format("PUT", "/api/v1/store/items", nil, body)
end
""",
        "store search (prefix + filter)": auth + f"""
local orgs = {lua_list(orgs)}
local topics = {lua_list(loader.TOPICS)}
local n = 0
request = function()
  n = n + 1
  local body = string.format('{{"namespace_prefix":["%s"],"filter":{{"topic":"%s"}},"limit":10}}',
    orgs[n % #orgs + 1], topics[n % #topics + 1])
  return wrk.format("POST", "/api/v1/store/items/search", nil, body)
end
""",
        "thread list page": f"""
wrk.headers["Cookie"] = "{cookie}"
request = function()
  return wrk.format("GET", "/threads/")
end
""",
    }


def run_wrk(base: str, script: str, *, duration: int, connections: int, threads: int) -> dict:
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as handle:
        handle.write(script + DONE_LUA)
        path = handle.name
    try:
        out = subprocess.run(
            ["wrk", f"-t{threads}", f"-c{connections}", f"-d{duration}s", "--timeout", "10s", "-s", path, base],
            capture_output=True, text=True, timeout=duration + 60,
        )
    finally:
        os.unlink(path)
    line = next((line for line in out.stdout.splitlines() if line.startswith("RESULT ")), None)
    if line is None:
        raise RuntimeError(f"wrk failed: {out.stdout}\n{out.stderr}")
    result = json.loads(line[len("RESULT "):])
    result["rps"] = result["requests"] / (result["duration_us"] / 1e6)
    result["errors"] = sum(result[k] for k in ("connect", "read", "write", "status", "timeout"))
    return result


def worker_cpu_seconds(master: int) -> float:
    """User + system CPU time of the gunicorn master's workers, from /proc: the live ones,
    plus those already replaced (max_requests), which the master has reaped and whose
    time the kernel has added to its cutime and cstime."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            pid = int(stat.parent.name)
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, ValueError):
            continue
        if int(fields[1]) == master:  # ppid
            total += int(fields[11]) + int(fields[12])  # utime, stime
        elif pid == master:
            total += int(fields[13]) + int(fields[14])  # cutime, cstime: reaped workers
    return total / ticks


def server_errors(base: str) -> tuple[int, int]:
    """Requests and 5xx answers as /metrics counts them (summed over every worker)."""
    import httpx
    from prometheus_client.parser import text_string_to_metric_families

    total = errors = 0
    for family in text_string_to_metric_families(httpx.get(f"{base}/metrics", timeout=10).text):
        if family.name == "http_requests":
            for sample in family.samples:
                if sample.name == "http_requests_total":
                    total += int(sample.value)
                    errors += int(sample.value) if sample.labels["status"].startswith("5") else 0
    return total, errors


def start(url: str, port: int, extra_env: dict[str, str]) -> subprocess.Popen:
    import httpx

    env = {
        **os.environ,
        "DATABASE_URL": url,
        "DJANGO_DEBUG": "0",
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
        "GUNICORN_BIND": f"127.0.0.1:{port}",
        "GUNICORN_ACCESS_LOG": "",
        "GUNICORN_LOG_LEVEL": "warning",
        **extra_env,
    }
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    proc = subprocess.Popen([sys.executable, "-m", "gunicorn", "-c", "gunicorn.conf.py"], cwd=ROOT, env=env)
    for _ in range(300):
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("gunicorn did not start")


def hold_streams(base: str, cookie: str, key: str, threads: list[str], streams: int, args) -> subprocess.Popen:
    """bench/live_streams.py holding `streams` open, once they all are (or after 120 s)."""
    from sessions_app.turns.models import TurnStreamLease

    scenarios = 7 if not args.only else len(args.only.split(","))
    seconds = scenarios * (args.duration + args.warmup + 30) + 300 + (JOB_SECONDS_MAX if args.job_threads else 0)
    holder = subprocess.Popen(
        [sys.executable, str(ROOT / "bench" / "live_streams.py"), "--base", base, "--cookie", cookie, "--key", key,
         "--threads", ",".join(threads), "--streams", str(streams), "--seconds", str(seconds),
         "--chunks-per-second", str(args.chunks_per_second), "--feed-on-signal"],
        cwd=ROOT, stdout=subprocess.PIPE, text=True,
    )
    deadline = time.monotonic() + 120
    while TurnStreamLease.objects.count() < streams and time.monotonic() < deadline and holder.poll() is None:
        time.sleep(0.5)
    bench.log(f"{TurnStreamLease.objects.count()} live streams open")
    return holder


def appends_cost(base: str, cookie: str, key: str, threads: list[str], args, master: int) -> float:
    """The workers' CPU (share of one core) while bench/live_streams.py appends its chunks with no
    stream open: what the appends cost alone, to tell it from what delivering them costs."""
    feeder = subprocess.Popen(
        [sys.executable, str(ROOT / "bench" / "live_streams.py"), "--base", base, "--cookie", cookie, "--key", key,
         "--threads", ",".join(threads), "--streams", "0", "--seconds", "15", "--chunks-per-second", str(args.chunks_per_second)],
        cwd=ROOT, stdout=subprocess.DEVNULL,
    )
    try:
        time.sleep(3)
        cpu, _ = idle_cost(master)
    finally:
        feeder.terminate()
        feeder.wait(timeout=60)
    return cpu


def worker_pids(master: int) -> list[int]:
    return [int(stat.parent.name) for stat in Path("/proc").glob("[0-9]*/stat") if _ppid(stat) == master]


def workers_rss_mb(master: int) -> float:
    """Resident memory of the master's workers, summed (MiB)."""
    total = 0
    for pid in worker_pids(master):
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        total += next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")), 0)
    return total / 1024


def idle_cost(master: int, seconds: float = 10) -> tuple[float, float]:
    """The workers' CPU (share of one core) over `seconds` with no client but the streams, and their memory (MiB)."""
    before, at = worker_cpu_seconds(master), time.monotonic()
    time.sleep(seconds)
    return (worker_cpu_seconds(master) - before) / (time.monotonic() - at), workers_rss_mb(master)


def raise_file_limit(streams: int) -> None:
    """Each stream is a socket in the client and one in a worker: lift the soft limit to the hard
    one if the streams need it (children inherit it), or stop, saying what to run."""
    need = streams + 1024
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= need:
        return
    if hard != resource.RLIM_INFINITY and hard < need:
        raise SystemExit(f"{streams} streams need {need} open files; the hard limit is {hard} (raise it: ulimit -Hn {need})")
    resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))


JOB_AGENT = "loadtest-job"
JOB_SECONDS_MAX = 3600


def bulk_job_with_streams(url: str, admin, owner, count: int) -> str:
    """A bulk purge of `count` threads made for it, run by the job queue's worker while the streams stay open."""
    from memoryadmin.operations import bulk
    from memoryadmin.operations.models import BulkJob
    from sessions_app.threads.models import Thread

    Thread.objects.bulk_create(
        [Thread(thread_id=f"lt-job-{i}", owner=owner, agent_code=JOB_AGENT, title=f"job {i}") for i in range(count)],
        batch_size=2000,
    )
    env = {**os.environ, "DATABASE_URL": url, "DJANGO_DEBUG": "0"}
    worker = subprocess.Popen([sys.executable, "manage.py", "jobs_worker"], cwd=ROOT, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        started = time.monotonic()
        job = bulk.bulk_start(actor=admin, action="purge", selection=bulk.Selection.from_data({"all": "1", "agent": JOB_AGENT}))
        while time.monotonic() - started < JOB_SECONDS_MAX and worker.poll() is None:
            job.refresh_from_db()
            if job.is_finished:
                break
            time.sleep(1)
        took = time.monotonic() - started
    finally:
        worker.terminate()
        try:
            _, errors = worker.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            worker.kill()
            _, errors = worker.communicate()
    job.refresh_from_db()
    left = Thread.objects.filter(agent_code=JOB_AGENT).count()
    if job.status != BulkJob.Status.DONE:
        bench.log(f"the job did not finish ({job.status}); worker said: {(errors or '')[-2000:]}")
    return (
        f"A bulk purge of {count:,} threads on the job queue (one `manage.py jobs_worker`) with the streams open: "
        f"{job.status} after {took:.0f} s ({job.processed:,} threads processed, {left:,} left, "
        f"{job.processed / took:.0f} threads/s)."
    )


def stream_report(holder: subprocess.Popen, master: int, url: str, streams: int, cost: dict, args) -> str:
    """What the streams saw, and what holding them cost the server (threads, connections)."""
    import psycopg

    from sessions_app.turns.models import TurnStreamLease

    open_now = TurnStreamLease.objects.count()
    threads = sorted(len(list(Path(f"/proc/{pid}/task").iterdir())) for pid in worker_pids(master))
    with psycopg.connect(url) as conn:
        (connections,) = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchone()
    holder.terminate()
    out, _ = holder.communicate(timeout=60)
    line = next((line for line in out.splitlines() if line.startswith("STREAMS ")), None)
    seen = json.loads(line[len("STREAMS "):]) if line else {}
    return (
        f"{streams} live streams: {open_now} open at the end of the scenarios (leases), opened {seen.get('opened')} times "
        f"(all {streams} open after {seen.get('all_open_after_s')} s, opened at 50 a second), {seen.get('refused')} refusals "
        f"(429), {seen.get('unavailable')} opens answered 503 (the database did not answer in time; the client retried), "
        f"{seen.get('ended_early')} ended by the server ({seen.get('timed_out')} of them with `event: timeout`, which a worker "
        f"that stops sends: gunicorn recycles each after max_requests), {seen.get('failed')} failed; {seen.get('chunks_sent'):,} chunks "
        f"appended through the API, {seen.get('chunks_received'):,} chunk events received by the streams, delivered in "
        f"p50 {seen.get('delay_p50_ms')} ms, p99 {seen.get('delay_p99_ms')} ms, max {seen.get('delay_max_ms')} ms after "
        f"they were sent (the client used {seen.get('client_cpu_s')} s of CPU in {seen.get('wall_s')} s). "
        f"Threads per worker process: {threads}; PostgreSQL connections of the server (pools, "
        f"listeners and the streams' reading connections): {connections - 1}. What holding them costs (10 s windows, no other client): the workers' CPU "
        f"{cost['cpu_before'] * 100:.1f} % of one core with no stream, {cost['cpu_beats'] * 100:.1f} % with the streams "
        f"open and only their heartbeats ({cost['beats_per_s']:.0f} a second: "
        f"{(cost['cpu_beats'] - cost['cpu_before']) * 1e6 / cost['beats_per_s']:.0f} µs of CPU per heartbeat), "
        f"{cost['cpu_chunks'] * 100:.1f} % with {args.chunks_per_second:g} chunks a second too ({cost['events_per_s']:.0f} "
        f"chunk events a second: {(cost['cpu_chunks'] - cost['cpu_beats']) * 1e6 / cost['events_per_s']:.0f} µs per event, "
        f"the chunk's append included; the appends alone, no stream open: {(cost['cpu_appends'] - cost['cpu_before']) * 100:.1f} %, "
        f"so {(cost['cpu_chunks'] - cost['cpu_beats'] - cost['cpu_appends'] + cost['cpu_before']) * 1e6 / cost['events_per_s']:.0f} µs "
        f"per event delivered); the workers' memory went from {cost['rss_before']:.0f} MiB to "
        f"{cost['rss_with']:.0f} MiB ({(cost['rss_with'] - cost['rss_before']) * 1024 / max(1, streams):.0f} KiB per stream)."
    )


def _ppid(stat: Path) -> int:
    try:
        return int(stat.read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return -1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=int, default=60, help="seconds per scenario")
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=5, help="seconds of each scenario run first and not counted")
    parser.add_argument("--wrk-threads", type=int, default=1)
    parser.add_argument("--only", default="", help="comma-separated scenario names (default: all)")
    parser.add_argument("--streams", type=int, default=500, help="live streams held open in the second pass (0: none)")
    parser.add_argument("--stream-threads", type=int, default=50, help="threads the streams follow")
    parser.add_argument("--chunks-per-second", type=float, default=10)
    parser.add_argument("--job-threads", type=int, default=10_000, help="threads of the bulk job run with the streams open (0: none)")
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    if not shutil.which("wrk"):
        raise SystemExit("wrk is not installed (apt-get install wrk); `make loadtest` installs it.")

    if args.streams > 5000 or args.job_threads > 100_000:
        raise SystemExit("bounded: at most 5000 streams and a job of at most 100 000 threads")
    raise_file_limit(args.streams)
    os.environ.setdefault("MEMORYADMIN_THROTTLE_RATE", "1000000/min")
    load_start = os.getloadavg()[0]
    url = bench.fresh_database()
    bench.setup_django(url)
    import orjson
    import psycopg

    from memoryadmin.apikeys import apikey_create

    templates = loader.langgraph_tables(url)
    members, admin = loader.seed_users(10)
    owners = [user.pk for user in members]
    started = time.perf_counter()
    with psycopg.connect(url) as conn:
        loader.load_range(conn, loader.Loaded(), threads=THREADS, namespaces=NAMESPACES, owners=owners,
                          templates=templates, log=bench.log)
    bench.log(f"loaded in {time.perf_counter() - started:.0f}s")
    member = members[0]
    key = apikey_create(owner=member).plaintext
    cookie = bench.session_cookie(admin)
    member_threads = [loader.thread_key(i) for i in range(THREADS) if i % len(owners) == 0]
    per_org = loader.USERS_PER_ORG * len(loader.KINDS)
    orgs = [loader.org_key(o) for o in range(NAMESPACES // per_org) if o % len(owners) == 0]
    step = templates.steps[-1]
    checkpoint_body = orjson.dumps({"checkpoint": step["ours"], "metadata": step["metadata"]}).decode()
    scripts = scenario_scripts(
        key=key, cookie=cookie, member_threads=member_threads, orgs=orgs, checkpoint_body=checkpoint_body,
        checkpoint_id=step["ours"]["id"],
    )
    if args.only:
        wanted = {name.strip() for name in args.only.split(",")}
        scripts = {name: script for name, script in scripts.items() if name in wanted}

    import multiprocessing

    rows = []
    configs = [("no streams", {}, 0)]
    if args.streams:
        # The user the streams belong to may hold them all; none of them ends during the run.
        stream_env = {
            "MEMORYADMIN_TURN_STREAMS_PER_USER": str(args.streams + 100),
            "MEMORYADMIN_TURN_STREAMS_PER_SERVER": str(args.streams + 100),
            "MEMORYADMIN_TURN_SSE_MAX_SECONDS": "7200",
        }
        configs.append((f"{args.streams} live streams open", stream_env, args.streams))
    stream_notes = []
    for label, extra, streams in configs:
        port = bench.free_port()
        server = start(url, port, extra)
        base = f"http://127.0.0.1:{port}"
        holder = None
        cost = {}
        try:
            if streams:
                cost["cpu_before"], cost["rss_before"] = idle_cost(server.pid)
                # On other threads than the streams': their old chunks would reach the streams as they open.
                others = member_threads[args.stream_threads : 2 * args.stream_threads] or member_threads[-1:]
                cost["cpu_appends"] = appends_cost(base, cookie, key, others, args, server.pid)
                holder = hold_streams(base, cookie, key, member_threads[: args.stream_threads], streams, args)
                # Heartbeats alone (once the last opens and first reads are done), then with the
                # chunks flowing; no other client meanwhile.
                time.sleep(5)
                cost["cpu_beats"], cost["rss_with"] = idle_cost(server.pid)
                holder.send_signal(signal.SIGUSR1)
                time.sleep(3)
                cost["cpu_chunks"], _ = idle_cost(server.pid)
                cost["beats_per_s"] = streams / float(os.environ.get("MEMORYADMIN_TURN_SSE_HEARTBEAT_SECONDS") or 5)
                cost["events_per_s"] = args.chunks_per_second * streams / min(streams, args.stream_threads)
            for name, script in scripts.items():
                bench.log(f"{label}: {name} for {args.duration}s …")
                if args.warmup:
                    # Workers open their connections and fill their caches; not counted.
                    run_wrk(base, script, duration=args.warmup, connections=args.connections, threads=args.wrk_threads)
                cpu_before = worker_cpu_seconds(server.pid)
                result = run_wrk(base, script, duration=args.duration, connections=args.connections, threads=args.wrk_threads)
                # CPU the app server spent per request: unlike latency, barely moved by other
                # work on the machine, and what sizing an app tier needs.
                result["cpu_ms"] = (worker_cpu_seconds(server.pid) - cpu_before) * 1000 / max(1, result["requests"])
                rows.append((label, name, result))
                bench.log(f"  {result['rps']:.0f} req/s, p50 {result['p50'] / 1000:.1f} ms, p99 {result['p99'] / 1000:.1f} ms, "
                          f"errors {result['errors']}")
            if holder is not None:
                if args.job_threads:
                    bench.log(f"{label}: a bulk purge of {args.job_threads:,} threads …")
                    stream_notes.append(bulk_job_with_streams(url, admin, members[1], args.job_threads))
                stream_notes.append(stream_report(holder, server.pid, url, streams, cost, args))
                holder = None
            served, failed = server_errors(base)
        finally:
            if holder is not None:
                holder.kill()
            server.terminate()
            server.wait(timeout=60)
        rows.append((label, "__server__", {"served": served, "5xx": failed}))

    workers = int(os.environ.get("GUNICORN_WORKERS") or multiprocessing.cpu_count() * 2 + 1)
    lines = [
        "| connections | scenario | requests | req/s | p50 ms | p95 ms | p99 ms | max ms | errors | app CPU ms / request |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    notes = []
    for label, name, r in rows:
        if name == "__server__":
            notes.append(f"{label}: the server's /metrics counted {r['served']:,} requests over all workers, {r['5xx']} with a 5xx status.")
            continue
        lines.append(
            f"| {label} | {name} | {r['requests']:,} | {r['rps']:.0f} | {r['p50'] / 1000:.1f} | {r['p95'] / 1000:.1f} | "
            f"{r['p99'] / 1000:.1f} | {r['max'] / 1000:.0f} | {r['errors']} | {r['cpu_ms']:.1f} |"
        )
    import django
    import platform
    from importlib.metadata import version

    report = (
        f"Command: `make loadtest` (wrk {args.wrk_threads} thread, {args.connections} connections, {args.duration} s per scenario "
        f"after {args.warmup} s not counted, "
        f"all on 127.0.0.1). Server: gunicorn {version('gunicorn')} from gunicorn.conf.py, {workers} uvicorn {version('uvicorn')} "
        f"ASGI workers, a psycopg pool each, "
        f"on the same {os.cpu_count()}-core machine as wrk and PostgreSQL {psycopg.connect(url).info.server_version // 10000} "
        f"(CPython {platform.python_version()}, Django {django.get_version()}). Data: {THREADS:,} threads, "
        f"{THREADS * loader.BLOCKS_PER_THREAD:,} blocks, {THREADS * loader.CHECKPOINTS_PER_THREAD:,} checkpoints, "
        f"{NAMESPACES * loader.ITEMS_PER_NAMESPACE:,} store items. Load average {load_start:.1f} at the start, "
        f"{os.getloadavg()[0]:.1f} at the end.\n\n"
        + "\n".join(lines) + "\n\n" + "\n".join(f"- {note}" for note in [*notes, *stream_notes]) + "\n"
    )
    print(report)
    if args.write:
        bench.write_section("benchmarks.md", "loadtest", report)


if __name__ == "__main__":
    main()
