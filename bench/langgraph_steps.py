"""LangGraph steps: InMemorySaver, PostgresSaver and MemoryAdminSaver side by side.

    .venv/bin/python bench/langgraph_steps.py [--small | --tiny] [--rounds N] [--json PATH] [--write]

`make bench` runs this after its side-by-side tables (bench/run.py, on the same
database and server); run alone it makes its own fresh database (BENCH_DB, with
`_steps` added) and gunicorn. Everything goes through the savers' and stores'
public methods, as a LangGraph application calls them: LangGraph's
`InMemorySaver`, its `PostgresSaver` on the same PostgreSQL, and
`MemoryAdminSaver` talking HTTP to gunicorn from gunicorn.conf.py on 127.0.0.1.
One process, rounds in a shuffled order of savers (fixed seed), warm-up rounds
dropped. Measured:

- invoke of a 10-node linear StateGraph (a messages channel and three plain
  channels; each node appends a message and updates the fields) and of one
  ReAct turn (`create_react_agent`, one tool, a chat model that first calls the
  tool then answers; no network): p50 / p95 per saver; for MemoryAdminSaver the
  HTTP requests and body bytes each way per step (a checkpoint written),
  counted around the saver's own transport. Each invoke continues the
  saver's thread, so round i finds the same history on every saver;
- put of one step appending one message on threads already holding 10, 1 000
  and 10 000 messages (each put's parent is the previous one);
- storage after N ReAct turns on one thread (1 000; `--small` 100): growth of
  PostgresSaver's tables and of every `sessions_app_*` table
  (pg_total_relation_size: rows, TOAST and indexes). The turns stop at a time
  budget (10 min; 3 min with `--small`) and the report then says how many were
  made: a saver whose put grows with the thread makes the turns quadratic;
- client CPU per put (time.process_time: this process only, so the server's
  work is not in it) of a 100-message checkpoint on a new thread, and of the
  next step on it;
- the largest event-loop stall while 20 tasks `aput` concurrently (a ticker
  coroutine asking for 1 ms sleeps), next to the ticker alone; one aput on its
  own comes first, and the saver's set-up on the loop it shows is reported apart.
  AsyncPostgresSaver's and MemoryAdminSaver's runs are made again with this
  process on the first core and PostgreSQL's and gunicorn's processes on the
  others (Linux, where the benchmark may move them; each thread is given its
  cores back after): the stall then left is the client's own;
- store put / get: InMemoryStore, PostgresStore, MemoryAdminStore over HTTP.
  The in-process service figures (checkpoint put, store put and get) are those
  of bench/run.py's side-by-side table, reused in the targets table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import ExitStack, closing, contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Annotated, Any, TypedDict

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "clients" / "python"))

import loader  # noqa: E402
import run as bench  # noqa: E402  (the shared setup and helpers: database, Django, gunicorn, percentiles)

import httpx  # noqa: E402
from langchain_core.language_models.chat_models import BaseChatModel  # noqa: E402
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage  # noqa: E402
from langchain_core.outputs import ChatGeneration, ChatResult  # noqa: E402
from langchain_core.tools import tool  # noqa: E402
from langgraph.checkpoint.base import create_checkpoint, empty_checkpoint  # noqa: E402
from langgraph.graph import END, START, StateGraph  # noqa: E402
from langgraph.graph.message import add_messages  # noqa: E402

SEED = 7
SAVERS = ("InMemorySaver", "PostgresSaver", "MemoryAdminSaver")
STORES = ("InMemoryStore", "PostgresStore", "MemoryAdminStore")
LANGGRAPH_TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes")
SECTION = "langgraph-steps"


@dataclass(frozen=True)
class Config:
    name: str
    rounds: int  # timed rounds of each measure (warm-up rounds come on top)
    warmup: int
    put_sizes: tuple[int, ...]
    turns: int  # ReAct turns on one thread for the storage figures
    cpu_size: int  # messages in the checkpoint whose put is timed on the CPU clock
    tasks: int  # concurrent aput tasks
    puts_per_task: int
    # Seconds the storage turns may take: past it the turns stop and the report says after how
    # many (a saver whose put grows with the thread makes 1 000 turns quadratic).
    storage_budget: float


FULL = Config("full", rounds=30, warmup=2, put_sizes=(10, 1_000, 10_000), turns=1_000, cpu_size=100, tasks=20,
              puts_per_task=10, storage_budget=600)
SMALL = Config("small", rounds=10, warmup=2, put_sizes=(10, 1_000, 10_000), turns=100, cpu_size=100, tasks=20,
               puts_per_task=5, storage_budget=180)
# The test's end-to-end run: every measure once or twice, nothing large.
TINY = Config("tiny", rounds=2, warmup=1, put_sizes=(10, 100), turns=3, cpu_size=100, tasks=4, puts_per_task=2,
              storage_budget=60)


log, pct, ms = bench.log, bench.pct, bench.ms


# --- counting what MemoryAdminSaver sends -----------------------------------------------------------


class _CountedStream(httpx.SyncByteStream):
    def __init__(self, inner: httpx.SyncByteStream, counter: CountingTransport) -> None:
        self.inner, self.counter = inner, counter

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self.inner:
            self.counter.add(down=len(chunk))
            yield chunk

    def close(self) -> None:
        self.inner.close()


class CountingTransport(httpx.BaseTransport):
    """The saver's own transport (what it sends through without a `transport=`), counting
    requests and body bytes each way (as sent: the request's body, the response's body
    before any decoding). Headers are not counted. It wraps either the client's own
    connection pool (`memoryadmin_client.wire.Pool`, its `request`) or, with a proxy in the
    environment, the httpx transport under the saver's httpx client."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.lock = threading.Lock()
        self.requests = self.up = self.down = 0

    def add(self, *, requests: int = 0, up: int = 0, down: int = 0) -> None:
        with self.lock:  # LangGraph puts checkpoints from a background thread
            self.requests += requests
            self.up += up
            self.down += down

    def snapshot(self) -> tuple[int, int, int]:
        with self.lock:
            return self.requests, self.up, self.down

    def request(self, method: bytes, target: bytes, headers: Any, body: bytes | None, *args: Any) -> Any:
        answer = self.inner.request(method, target, headers, body, *args)
        self.add(requests=1, up=len(body or b""), down=len(answer.content))
        return answer

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.add(requests=1, up=len(request.read()))
        response = self.inner.handle_request(request)
        response.stream = _CountedStream(response.stream, self)
        return response

    def close(self) -> None:
        self.inner.close()


# --- the graphs --------------------------------------------------------------------------------------


class LinearState(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    step: int
    last_node: str
    visits: dict[str, int]


def linear_graph(nodes: int = 10) -> StateGraph:
    """START → n0 → … → n9 → END; each node appends a message and updates the plain channels."""
    builder = StateGraph(LinearState)

    def node_for(i: int) -> Callable[[LinearState], dict[str, Any]]:
        name = f"n{i}"

        def node(state: LinearState) -> dict[str, Any]:
            step = state.get("step", 0) + 1
            visits = dict(state.get("visits") or {})
            visits[name] = visits.get(name, 0) + 1
            message = AIMessage(content=f"{name}: {loader.text_for(step)}", id=f"{name}-{step}")
            return {"messages": [message], "step": step, "last_node": name, "visits": visits}

        return node

    previous = START
    for i in range(nodes):
        builder.add_node(f"n{i}", node_for(i))
        builder.add_edge(previous, f"n{i}")
        previous = f"n{i}"
    builder.add_edge(previous, END)
    return builder


@tool
def forecast(city: str) -> str:
    """The weather forecast for a city."""
    return f"Forecast for {city}: 18 °C, light rain after 3 pm, wind from the west at 20 km/h."


class ToolThenAnswer(BaseChatModel):
    """A chat model that asks for the forecast tool, then answers once the tool has spoken."""

    @property
    def _llm_type(self) -> str:
        return "tool-then-answer"

    def bind_tools(self, tools: Any, **kwargs: Any) -> ToolThenAnswer:
        return self

    def _generate(self, messages: list, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
        n = len(messages)
        if isinstance(messages[-1], ToolMessage):
            reply = AIMessage(content=f"{messages[-1].content} Take an umbrella. {loader.text_for(n)}", id=f"ai-{n}")
        else:
            call = {"name": "forecast", "args": {"city": "Lyon"}, "id": f"call-{n}", "type": "tool_call"}
            reply = AIMessage(content="", id=f"ai-{n}", tool_calls=[call])
        return ChatResult(generations=[ChatGeneration(message=reply)])


def react_agent(checkpointer: Any) -> Any:
    from langgraph.prebuilt import create_react_agent

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # its deprecation notice (moved to langchain.agents)
        return create_react_agent(ToolThenAnswer(), [forecast], checkpointer=checkpointer)


def question(i: int) -> dict[str, Any]:
    return {"messages": [HumanMessage(content=f"Question {i}: what is the weather in Lyon? {loader.text_for(i)}", id=f"q-{i}")]}


# --- checkpoints as LangGraph's loop writes them -----------------------------------------------------


def message(i: int) -> AnyMessage:
    kind = HumanMessage if i % 2 == 0 else AIMessage
    return kind(content=f"{i}: {loader.text_for(i)}", id=f"m-{i}")


class Chain:
    """One thread's checkpoints, each step appending one message to the messages channel
    and bumping the step channel; each put's parent is the previous put (its config)."""

    def __init__(self, saver: Any, thread_id: str, size: int) -> None:
        self.saver = saver
        self.config: dict[str, Any] = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
        self.messages = [message(i) for i in range(size)]
        self.checkpoint: dict[str, Any] | None = None
        self.step = -1

    def next(self) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        """The next (checkpoint, metadata, new_versions): the first holds the messages so far."""
        if self.checkpoint is None:
            base, changed = empty_checkpoint(), ("messages", "step", "last_node")
        else:
            self.messages = [*self.messages, message(len(self.messages))]
            base, changed = create_checkpoint(self.checkpoint, None, self.step + 1), ("messages", "step")
        self.step += 1
        versions = dict(base["channel_versions"])
        new_versions = {}
        for channel in changed:
            versions[channel] = new_versions[channel] = self.saver.get_next_version(versions.get(channel), None)
        checkpoint = dict(base)
        checkpoint["channel_values"] = {"messages": self.messages, "step": self.step, "last_node": "agent"}
        checkpoint["channel_versions"] = versions
        checkpoint["versions_seen"] = {"agent": {k: v for k, v in versions.items() if k != "last_node"}}
        self.checkpoint = checkpoint
        return checkpoint, {"source": "loop", "step": self.step, "parents": {}}, new_versions

    def put(self, planned: tuple) -> None:
        self.config = self.saver.put(self.config, *planned)

    async def aput(self, planned: tuple) -> None:
        self.config = await self.saver.aput(self.config, *planned)


# --- the measures ------------------------------------------------------------------------------------


@dataclass
class Figures:
    config: str
    rounds: int
    invoke: dict[str, dict[str, Any]] = field(default_factory=dict)  # graph -> {samples, steps, requests, up, down}
    put: dict[str, dict[str, list[float]]] = field(default_factory=dict)  # size -> saver -> samples
    storage: dict[str, Any] = field(default_factory=dict)
    cpu: dict[str, dict[str, list[float]]] = field(default_factory=dict)  # case -> saver -> process_time samples
    stalls: dict[str, dict[str, float]] = field(default_factory=dict)  # saver -> {max, p99, wall, puts}
    store: dict[str, dict[str, list[float]]] = field(default_factory=dict)  # op -> store -> samples
    seconds: dict[str, float] = field(default_factory=dict)  # wall time of each measure
    load: dict[str, float] = field(default_factory=dict)


def shuffled(rng: random.Random, names: tuple[str, ...]) -> list[str]:
    return rng.sample(names, len(names))


def side_by_side(rng: random.Random, names: tuple[str, ...], rounds: int, warmup: int,
                 one: Callable[[str, int], float]) -> dict[str, list[float]]:
    """`one(name, round)` for every name in a shuffled order, round after round; it returns
    its own time, so what it prepares stays off the clock. Warm-up rounds are dropped."""
    samples: dict[str, list[float]] = {name: [] for name in names}
    for r in range(warmup + rounds):
        for name in shuffled(rng, names):
            elapsed = one(name, r)
            if r >= warmup:
                samples[name].append(elapsed)
    return samples


def measure_invokes(fig: Figures, cfg: Config, rng: random.Random, savers: dict[str, Any], counter: CountingTransport) -> None:
    graphs = {
        "10-node linear graph": (lambda saver: linear_graph().compile(checkpointer=saver), "linear"),
        "ReAct agent turn (tool call, answer)": (react_agent, "react"),
    }
    for label, (build, tag) in graphs.items():
        started = time.perf_counter()
        fig.invoke[label] = measure_invoke(cfg, rng, {name: build(saver) for name, saver in savers.items()},
                                           savers, counter, tag)
        fig.seconds[f"invoke: {label}"] = time.perf_counter() - started
        log(f"  invoke, {label}: {time.perf_counter() - started:.1f}s")


def measure_invoke(cfg: Config, rng: random.Random, compiled: dict[str, Any], savers: dict[str, Any],
                   counter: CountingTransport, tag: str) -> dict[str, Any]:
    """One graph compiled once per saver, each invoke continuing that saver's thread. The
    checkpoints an invoke writes are counted on InMemorySaver's thread (its `list`), the HTTP
    traffic on MemoryAdminSaver's transport."""
    configs = {name: {"configurable": {"thread_id": f"lgs-{tag}-{name}"}} for name in savers}
    traffic: list[tuple[int, ...]] = []
    steps: list[int] = []

    def one(name: str, r: int) -> float:
        before_traffic = counter.snapshot()
        before = len(list(savers[name].list(configs[name]))) if name == "InMemorySaver" else 0
        started = time.perf_counter()
        compiled[name].invoke(question(r), configs[name])
        elapsed = time.perf_counter() - started
        if name == "InMemorySaver":
            steps.append(len(list(savers[name].list(configs[name]))) - before)
        elif name == "MemoryAdminSaver":
            traffic.append(tuple(b - a for a, b in zip(before_traffic, counter.snapshot(), strict=True)))
        return elapsed

    samples = side_by_side(rng, SAVERS, cfg.rounds, cfg.warmup, one)
    traffic, steps = traffic[cfg.warmup:], steps[cfg.warmup:]
    return {
        "samples": samples,
        "steps": sum(steps) / len(steps),
        "requests": sum(t[0] for t in traffic) / len(traffic),
        "up": sum(t[1] for t in traffic) / len(traffic),
        "down": sum(t[2] for t in traffic) / len(traffic),
    }


def measure_puts(fig: Figures, cfg: Config, rng: random.Random, savers: dict[str, Any]) -> None:
    for size in cfg.put_sizes:
        started = time.perf_counter()
        fig.put[str(size)] = measure_put(cfg, rng, savers, size)
        fig.seconds[f"put: {size:,} messages"] = time.perf_counter() - started
        log(f"  put on {size:,} messages: {time.perf_counter() - started:.1f}s")


def measure_put(cfg: Config, rng: random.Random, savers: dict[str, Any], size: int) -> dict[str, list[float]]:
    chains = {name: Chain(saver, f"lgs-put-{size}-{name}", size) for name, saver in savers.items()}
    for chain in chains.values():  # the thread as it stands before the timed steps
        chain.put(chain.next())

    def one(name: str, r: int) -> float:
        chain = chains[name]
        planned = chain.next()  # off the clock
        started = time.perf_counter()
        chain.put(planned)
        return time.perf_counter() - started

    return side_by_side(rng, SAVERS, cfg.rounds, cfg.warmup, one)


def table_sizes(conn) -> dict[str, int]:
    """Bytes of LangGraph's checkpoint tables and of every sessions_app_* table (with TOAST and indexes)."""
    rows = conn.execute(
        "SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c"
        " JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = current_schema() AND c.relkind = 'r'"
        "   AND (c.relname LIKE 'sessions\\_app\\_%%' OR c.relname = ANY(%s))",
        (list(LANGGRAPH_TABLES),),
    ).fetchall()
    return dict(rows)


def measure_storage(fig: Figures, cfg: Config, rng: random.Random, savers: dict[str, Any], url: str) -> None:
    import psycopg

    started = time.perf_counter()
    names = ("PostgresSaver", "MemoryAdminSaver")
    agents = {name: react_agent(savers[name]) for name in names}
    configs = {name: {"configurable": {"thread_id": f"lgs-storage-{name}"}} for name in names}
    spent = {name: 0.0 for name in names}
    deadline = started + cfg.storage_budget
    turns = 0
    with closing(psycopg.connect(url, autocommit=True)) as conn:
        before = table_sizes(conn)
        while turns < cfg.turns and time.perf_counter() < deadline:
            for name in shuffled(rng, names):
                t0 = time.perf_counter()
                agents[name].invoke(question(turns), configs[name])
                spent[name] += time.perf_counter() - t0
            turns += 1
            if turns % 100 == 0:
                log(f"    {turns} turns, {time.perf_counter() - started:.0f}s")
        after = table_sizes(conn)
    grown = {table: after[table] - before.get(table, 0) for table in after if after[table] != before.get(table, 0)}
    ours = {t: b for t, b in grown.items() if t.startswith("sessions_app_")}
    theirs = {t: b for t, b in grown.items() if t in LANGGRAPH_TABLES}
    fig.storage = {
        "turns": turns,
        "planned": cfg.turns,
        "budget": cfg.storage_budget,
        "messages": 4 * turns,
        "PostgresSaver": {"bytes": sum(theirs.values()), "tables": theirs, "seconds": spent["PostgresSaver"]},
        "MemoryAdminSaver": {"bytes": sum(ours.values()), "tables": ours, "seconds": spent["MemoryAdminSaver"]},
    }
    fig.seconds[f"storage: {turns} ReAct turns"] = time.perf_counter() - started
    log(f"  storage, {turns} turns: {time.perf_counter() - started:.1f}s")


def measure_cpu(fig: Figures, cfg: Config, rng: random.Random, savers: dict[str, Any]) -> None:
    started = time.perf_counter()
    size = cfg.cpu_size
    chains: dict[str, Chain] = {}

    def fresh(name: str, r: int) -> float:
        chain = Chain(savers[name], f"lgs-cpu-{name}-{r}", size)
        planned = chain.next()
        t0 = time.process_time()
        chain.put(planned)
        spent = time.process_time() - t0
        chains[name] = chain
        return spent

    def append(name: str, r: int) -> float:
        chain = chains[name]
        planned = chain.next()
        t0 = time.process_time()
        chain.put(planned)
        return time.process_time() - t0

    fresh_samples: dict[str, list[float]] = {name: [] for name in SAVERS}
    append_samples: dict[str, list[float]] = {name: [] for name in SAVERS}
    # Each round: a new thread of `size` messages, then one step on it, both on the CPU clock.
    for r in range(cfg.warmup + cfg.rounds):
        for name in shuffled(rng, SAVERS):
            first, second = fresh(name, r), append(name, r)
            if r >= cfg.warmup:
                fresh_samples[name].append(first)
                append_samples[name].append(second)
    fig.cpu[f"put of a new {size}-message checkpoint"] = fresh_samples
    fig.cpu["put of the next step (one message more)"] = append_samples
    fig.seconds["client CPU"] = time.perf_counter() - started
    log(f"  client CPU: {time.perf_counter() - started:.1f}s")


def _loop_thread_times() -> tuple[float, float]:
    """Seconds this thread has run on a core and waited for one (Linux's schedstat; zeros elsewhere)."""
    try:
        with open(f"/proc/self/task/{threading.get_native_id()}/schedstat") as f:
            ran, waited, _ = f.read().split()
    except (OSError, ValueError):
        return 0.0, 0.0
    return int(ran) / 1e9, int(waited) / 1e9


async def _stall_run(saver: Any, cfg: Config, tag: str) -> dict[str, float]:
    """`cfg.tasks` tasks, each on its own thread, `aput` a first checkpoint of cfg.cpu_size
    messages then cfg.puts_per_task - 1 more steps; a ticker measures how late 1 ms sleeps wake."""
    chains = [Chain(saver, f"lgs-async-{tag}-{i}", cfg.cpu_size) for i in range(cfg.tasks)] if saver is not None else []
    plans = [[chain.next() for _ in range(cfg.puts_per_task)] for chain in chains]  # built before the clock
    lags: list[float] = []
    done = asyncio.Event()

    async def ticker() -> None:
        while not done.is_set():
            t0 = time.perf_counter()
            await asyncio.sleep(0.001)
            lags.append(time.perf_counter() - t0 - 0.001)

    async def worker(chain: Chain, plan: list[tuple]) -> None:
        for planned in plan:
            await chain.aput(planned)

    ticking = asyncio.create_task(ticker())
    await asyncio.sleep(0.05)
    lags.clear()
    # One aput before the run: the saver's set-up on this loop (an HTTP client, a connection) is
    # its own figure, not the run's.
    first = 0.0
    if saver is not None:
        warm = Chain(saver, f"lgs-async-{tag}-first", cfg.cpu_size)
        await warm.aput(warm.next())
        await asyncio.sleep(0.005)
        first = max(lags, default=0.0)
        lags.clear()
    started = time.perf_counter()
    ran, waited = _loop_thread_times()
    if chains:
        await asyncio.gather(*(worker(chain, plan) for chain, plan in zip(chains, plans)))
    else:
        await asyncio.sleep(0.5)
    wall = time.perf_counter() - started
    # A stall is the loop's own work or its thread waiting for a core (the server's processes
    # share the machine's): both over the run, to tell them apart.
    ran, waited = (b - a for a, b in zip((ran, waited), _loop_thread_times()))
    done.set()
    await ticking
    puts = cfg.tasks * cfg.puts_per_task if chains else 0
    return {"max": max(lags), "p99": pct(lags, 0.99), "first": first, "wall": wall, "puts": puts,
            "ran": ran, "waited": waited}


def _server_threads(server_pid: int | None) -> list[int]:
    """The Linux thread ids of PostgreSQL's processes and of the gunicorn at `server_pid` with its workers."""
    pids: list[int] = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/comm") as f:
                    if f.read().strip() == "postgres":
                        pids.append(int(entry.name))
            except OSError:
                continue
    todo = [server_pid] if server_pid else []
    while todo:
        pid = todo.pop()
        pids.append(pid)
        try:
            with open(f"/proc/{pid}/task/{pid}/children") as f:
                todo += [int(child) for child in f.read().split()]
        except OSError:
            continue
    tids: list[int] = []
    for pid in pids:
        try:
            tids += [int(tid) for tid in os.listdir(f"/proc/{pid}/task")]
        except OSError:
            continue
    return tids


OFF_CORE = "server off the loop's core"


def _own_threads() -> list[int]:
    """The Linux thread ids of this process."""
    return [int(tid) for tid in os.listdir("/proc/self/task")]


@contextmanager
def _server_on_other_cores(server_pid: int | None) -> Iterator[bool]:
    """While open, this process's threads (and those they start) run on the first core, PostgreSQL
    and the gunicorn at `server_pid` on the others; yields False, changing nothing, where that
    cannot be done (not Linux, one core, not allowed). Every thread found is given back the cores
    it had, and one started meanwhile (a PostgreSQL backend, an executor's thread here) the cores
    the machine gave this process."""
    if not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2 or not server_pid:
        yield False
        return
    mine = sorted(os.sched_getaffinity(0))
    client, server = {mine[0]}, set(mine[1:])
    before: dict[int, set[int]] = {}
    try:
        for tid in _server_threads(server_pid):
            try:
                before[tid] = os.sched_getaffinity(tid)
                os.sched_setaffinity(tid, server)
            except OSError:  # gone meanwhile, or not ours to move
                continue
        if not before:
            yield False
            return
        for tid in _own_threads():
            try:
                before[tid] = os.sched_getaffinity(tid)
                os.sched_setaffinity(tid, client)
            except OSError:
                continue
        yield True
    finally:
        for tid in [*_own_threads(), *_server_threads(server_pid)] if before else []:
            try:
                os.sched_setaffinity(tid, before.get(tid, set(mine)))
            except OSError:
                continue


def measure_stalls(fig: Figures, cfg: Config, url: str, base_url: str, api_key: str, server_pid: int | None = None) -> None:
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    from memoryadmin_client.langgraph import MemoryAdminSaver

    async def one(name: str, tag: str) -> dict[str, float]:
        if name == "InMemorySaver":
            return await _stall_run(InMemorySaver(), cfg, tag)
        if name == "AsyncPostgresSaver":
            async with AsyncPostgresSaver.from_conn_string(url) as saver:
                return await _stall_run(saver, cfg, tag)
        async with MemoryAdminSaver(base_url, api_key) as saver:
            return await _stall_run(saver, cfg, tag)

    async def run_all() -> dict[str, dict[str, float]]:
        out = {"ticker alone": await _stall_run(None, cfg, "none")}
        order = shuffled(random.Random(SEED), ("InMemorySaver", "AsyncPostgresSaver", "MemoryAdminSaver"))
        for name in order:
            out[name] = await one(name, name)
        # The same two servers' runs again with the server's processes off the loop's core: what
        # is left of a stall is then the client's own work (its loop and its threads, on one core).
        with _server_on_other_cores(server_pid) as pinned:
            if pinned:
                for name in shuffled(random.Random(SEED), ("AsyncPostgresSaver", "MemoryAdminSaver")):
                    out[f"{name}, {OFF_CORE}"] = await one(name, f"{name}-pinned")
        return out

    started = time.perf_counter()
    fig.stalls = asyncio.run(run_all())
    fig.seconds["event loop"] = time.perf_counter() - started
    log(f"  event loop, {cfg.tasks} tasks: {time.perf_counter() - started:.1f}s")


def measure_store(fig: Figures, cfg: Config, rng: random.Random, stores: dict[str, Any]) -> None:
    started = time.perf_counter()
    namespace = ("lgs", "users", "u-1", "memories")
    keys = {name: 0 for name in stores}
    for store in stores.values():
        store.put(namespace, "read-me", loader.item_value(1, 1))

    def put(name: str, r: int) -> float:
        keys[name] += 1
        key, value = f"k-{keys[name]}", loader.item_value(r, keys[name] % 10)
        t0 = time.perf_counter()
        stores[name].put(namespace, key, value)
        return time.perf_counter() - t0

    def get(name: str, r: int) -> float:
        t0 = time.perf_counter()
        item = stores[name].get(namespace, "read-me")
        elapsed = time.perf_counter() - t0
        assert item is not None and item.value["topic"], item
        return elapsed

    fig.store["put"] = side_by_side(rng, STORES, cfg.rounds, cfg.warmup, put)
    fig.store["get"] = side_by_side(rng, STORES, cfg.rounds, cfg.warmup, get)
    fig.seconds["store"] = time.perf_counter() - started
    log(f"  store put / get: {time.perf_counter() - started:.1f}s")


def run(*, url: str, base_url: str, api_key: str, cfg: Config, seed: int = SEED, server_pid: int | None = None) -> Figures:
    """Every measure against the server at `base_url` (its database at `url`) with `api_key`; `server_pid`,
    its gunicorn's, lets the event-loop measure run a second time with the server off the loop's core."""
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.store.memory import InMemoryStore
    from langgraph.store.postgres import PostgresStore

    from memoryadmin_client.langgraph import MemoryAdminSaver, MemoryAdminStore

    rng = random.Random(seed)
    fig = Figures(config=cfg.name, rounds=cfg.rounds)
    fig.load["start"] = os.getloadavg()[0]
    started = time.perf_counter()
    with ExitStack() as stack:
        postgres = stack.enter_context(PostgresSaver.from_conn_string(url))
        postgres.setup()
        ours = stack.enter_context(MemoryAdminSaver(base_url, api_key))
        # Counted on the saver's own path: its transport wrapped where it hands requests over.
        if ours.http._direct is not None:
            counter = ours.http._direct = CountingTransport(ours.http._direct)
        else:  # a proxy in the environment: the saver goes through httpx's client
            counter = ours.http._client._transport = CountingTransport(ours.http._client._transport)
        savers = {"InMemorySaver": InMemorySaver(), "PostgresSaver": postgres, "MemoryAdminSaver": ours}
        pg_store = stack.enter_context(PostgresStore.from_conn_string(url))
        pg_store.setup()
        our_store = stack.enter_context(MemoryAdminStore(base_url, api_key))
        stores = {"InMemoryStore": InMemoryStore(), "PostgresStore": pg_store, "MemoryAdminStore": our_store}

        measure_invokes(fig, cfg, rng, savers, counter)
        measure_puts(fig, cfg, rng, savers)
        measure_cpu(fig, cfg, rng, savers)
        measure_stalls(fig, cfg, url, base_url, api_key, server_pid)
        measure_store(fig, cfg, rng, stores)
        measure_storage(fig, cfg, rng, savers, url)
    fig.seconds["total"] = time.perf_counter() - started
    fig.load["end"] = os.getloadavg()[0]
    return fig


# --- the report --------------------------------------------------------------------------------------


def p50_95(samples: list[float]) -> str:
    return f"{ms(pct(samples, .5))} / {ms(pct(samples, .95))}"


def size_text(n: float) -> str:
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("kB", 1 << 10)):
        if abs(n) >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n:.0f} B"


def ratio(a: float, b: float) -> float:
    return a / b if b else float("inf")


def targets(fig: Figures, reused: dict[str, dict[str, list[float]]] | None) -> list[tuple[str, str, str, bool | None]]:
    """(measure, this run's figure, target, within it): computed from the figures above only."""
    rows: list[tuple[str, str, str, bool | None]] = []
    p50 = lambda s: pct(s, .5)  # noqa: E731
    for label, data in fig.invoke.items():
        r = ratio(p50(data["samples"]["MemoryAdminSaver"]), p50(data["samples"]["PostgresSaver"]))
        rows.append((f"invoke, {label}: MemoryAdminSaver ÷ PostgresSaver (p50)", f"{r:.2f}×", "≤ 2×", r <= 2))
    small, large = str(min(fig.put, key=int)), str(max(fig.put, key=int))
    ours = fig.put[large]["MemoryAdminSaver"]
    flat = ratio(p50(ours), p50(fig.put[small]["MemoryAdminSaver"]))
    rows.append((f"put, MemoryAdminSaver: {int(large):,} ÷ {int(small):,} messages (p50)", f"{flat:.2f}×", "≤ 1.5×", flat <= 1.5))
    faster = ratio(p50(fig.put[large]["PostgresSaver"]), p50(ours))
    rows.append((f"put at {int(large):,} messages: PostgresSaver ÷ MemoryAdminSaver (p50)", f"{faster:.2f}×", "≥ 10×", faster >= 10))
    if fig.storage:
        share = ratio(fig.storage["MemoryAdminSaver"]["bytes"], fig.storage["PostgresSaver"]["bytes"])
        rows.append((f"storage after {fig.storage['turns']:,} ReAct turns: memoryadmin ÷ PostgresSaver",
                     f"{share:.3f}", "≤ 0.050 (1/20)", share <= 0.05))
    cpu_case = next(iter(fig.cpu))
    cpu = p50(fig.cpu[cpu_case]["MemoryAdminSaver"])
    rows.append((f"client CPU, MemoryAdminSaver {cpu_case} (p50)", f"{cpu * 1000:.2f} ms", "≤ 1 ms", cpu <= 0.001))
    ours = fig.stalls["MemoryAdminSaver"]
    rows.append((f"largest event-loop stall, MemoryAdminSaver ({ours['puts']:g} aputs from concurrent tasks)",
                 f"{ours['max'] * 1000:.2f} ms", "≤ 5 ms", ours["max"] <= 0.005))
    pinned = fig.stalls.get(f"MemoryAdminSaver, {OFF_CORE}")
    if pinned:
        rows.append((f"largest event-loop stall, MemoryAdminSaver, {OFF_CORE} (the client's own work)", f"{pinned['max'] * 1000:.2f} ms", "≤ 5 ms",
                     pinned["max"] <= 0.005))
    rows.append(("largest event-loop stall, MemoryAdminSaver's first aput on a new loop",
                 f"{ours['first'] * 1000:.2f} ms", "≤ 5 ms", ours["first"] <= 0.005))
    if reused:
        for key, label in (("checkpoint_put", "checkpoint put in process (service) ÷ PostgresSaver put"),
                           ("store_put", "store put in process (service) ÷ PostgresStore"),
                           ("store_get", "store get in process (service) ÷ PostgresStore")):
            if key in reused:
                ours_ms, theirs_ms = p50(reused[key]["service"]), p50(reused[key]["langgraph"])
                r = ratio(ours_ms, theirs_ms)
                rows.append((f"{label} (side-by-side table, p50)", f"{r:.2f}× ({ms(ours_ms)} vs {ms(theirs_ms)} ms)",
                             "≤ 1.5×", r <= 1.5))
    else:
        rows.append(("checkpoint put, store put / get in process ÷ LangGraph's", "— (make bench's side-by-side table)", "≤ 1.5×", None))
    for op in ("put", "get"):
        r = ratio(p50(fig.store[op]["MemoryAdminStore"]), p50(fig.store[op]["PostgresStore"]))
        rows.append((f"store {op} over HTTP (MemoryAdminStore) ÷ PostgresStore", f"{r:.2f}×", "≤ 3×", r <= 3))
    return rows


def report(fig: Figures, *, command: str, machine: str, reused: dict[str, dict[str, list[float]]] | None = None) -> str:
    n = fig.rounds
    out = [
        f"Command: `{command}` ({fig.config} configuration). Machine: {machine}. "
        f"This section took {fig.seconds['total'] / 60:.1f} min; load average {fig.load['start']:.1f} at its start, "
        f"{fig.load['end']:.1f} at its end. Times in ms, p50 / p95 of {n} rounds after warm-up, savers in a shuffled "
        f"order each round.",
        "",
        "### Invoke",
        "",
        "| graph | InMemorySaver | PostgresSaver | MemoryAdminSaver | MemoryAdminSaver ÷ PostgresSaver (p50) "
        "| checkpoints per invoke | MemoryAdminSaver HTTP requests per step | bytes up / down per step |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for label, data in fig.invoke.items():
        s, steps = data["samples"], data["steps"]
        out.append(
            f"| {label} | {p50_95(s['InMemorySaver'])} | {p50_95(s['PostgresSaver'])} | {p50_95(s['MemoryAdminSaver'])} "
            f"| {ratio(pct(s['MemoryAdminSaver'], .5), pct(s['PostgresSaver'], .5)):.2f}× | {steps:g} "
            f"| {data['requests'] / steps:.2f} | {size_text(data['up'] / steps)} / {size_text(data['down'] / steps)} |"
        )
    sizes = sorted(fig.put, key=int)
    out += [
        "",
        "A step is one checkpoint written (LangGraph's input, its `__start__`, then each super-step); "
        "bytes are HTTP bodies as sent, headers not counted.",
        "",
        "### Checkpoint put: one step appending one message (p50 / p95)",
        "",
        "| messages in thread | InMemorySaver | PostgresSaver | MemoryAdminSaver | PostgresSaver ÷ MemoryAdminSaver (p50) |",
        "|---:|---:|---:|---:|---:|",
    ]
    for size in sizes:
        s = fig.put[size]
        out.append(
            f"| {int(size):,} | {p50_95(s['InMemorySaver'])} | {p50_95(s['PostgresSaver'])} | {p50_95(s['MemoryAdminSaver'])} "
            f"| {ratio(pct(s['PostgresSaver'], .5), pct(s['MemoryAdminSaver'], .5)):.2f}× |"
        )
    flat = " | ".join(f"{ratio(pct(fig.put[sizes[-1]][name], .5), pct(fig.put[sizes[0]][name], .5)):.2f}×" for name in SAVERS)
    out.append(f"| {int(sizes[-1]):,} ÷ {int(sizes[0]):,} (p50) | {flat} | |")
    if fig.storage:
        st = fig.storage
        out += [
            "",
            f"### Storage after {st['turns']:,} ReAct turns on one thread ({st['messages']:,} messages)",
            "",
            *([f"The run planned {st['planned']:,} turns and stopped at its budget of {st['budget'] / 60:g} min; "
               "the figures are those after the turns it made, on both savers.", ""]
              if st["turns"] < st["planned"] else []),
            "| saver | bytes written (tables, TOAST, indexes) | per turn | by table | time for the turns |",
            "|---|---:|---:|---|---:|",
        ]
        for name in ("PostgresSaver", "MemoryAdminSaver"):
            tables = ", ".join(f"{t} {size_text(b)}" for t, b in sorted(st[name]["tables"].items(), key=lambda kv: -kv[1]))
            out.append(f"| {name} | {size_text(st[name]['bytes'])} | {size_text(st[name]['bytes'] / st['turns'])} "
                       f"| {tables} | {st[name]['seconds']:.1f} s |")
        out.append(f"| memoryadmin ÷ PostgresSaver | {ratio(st['MemoryAdminSaver']['bytes'], st['PostgresSaver']['bytes']):.3f} | | | |")
    out += [
        "",
        "### Client CPU per put (time.process_time of this process, ms p50 / p95)",
        "",
        "| put | InMemorySaver | PostgresSaver | MemoryAdminSaver |",
        "|---|---:|---:|---:|",
    ]
    for case, s in fig.cpu.items():
        out.append(f"| {case} | {p50_95(s['InMemorySaver'])} | {p50_95(s['PostgresSaver'])} | {p50_95(s['MemoryAdminSaver'])} |")
    out += [
        "",
        "PostgresSaver's and MemoryAdminSaver's servers (PostgreSQL, gunicorn) are other processes: "
        "their work is not in these figures; InMemorySaver does all of its work here.",
        "",
        "### Event loop: concurrent `aput` (ms)",
        "",
        "| run | largest stall | p99 stall | wall time | aputs | largest stall during the first aput on the loop "
        "| the loop's thread: on a core / waiting for one |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, s in fig.stalls.items():
        first = f"{s['first'] * 1000:.2f}" if s["puts"] else "—"
        out.append(f"| {name} | {s['max'] * 1000:.2f} | {s['p99'] * 1000:.2f} | {ms(s['wall'])} | {s['puts']:g} | {first} "
                   f"| {ms(s['ran'])} / {ms(s['waited'])} |")
    stall_tasks = fig.stalls["MemoryAdminSaver"]["puts"]
    out += [
        "",
        f"A stall is how much later than asked a 1 ms `asyncio.sleep` woke; each task puts a first checkpoint of "
        f"100 messages then the next steps on its own thread ({stall_tasks:g} aputs in all). Before the run one "
        "aput on its own: the saver's set-up on a new loop (MemoryAdminSaver makes a connection pool per loop) "
        "shows in the last column, not in the run's. AsyncPostgresSaver stands for PostgresSaver here (its async "
        "twin, one connection); \"ticker alone\" is the machine's own noise. The last column is the loop thread's time "
        "on a core and waiting for one during the run (Linux's schedstat): a stall is the loop's own work or that wait, "
        "the server's processes sharing the machine's cores. The runs marked \"server off the loop's core\" are "
        "the two servers' again with this process held to the first core and PostgreSQL's and gunicorn's processes "
        "to the others (where Linux lets the benchmark move them): what is left of a stall is the client's own "
        "work, its loop and its threads on one core.",
        "",
        "### Store (p50 / p95)",
        "",
        "| operation | InMemoryStore | PostgresStore | MemoryAdminStore | MemoryAdminStore ÷ PostgresStore (p50) |",
        "|---|---:|---:|---:|---:|",
    ]
    for op, s in fig.store.items():
        out.append(f"| {op} | {p50_95(s['InMemoryStore'])} | {p50_95(s['PostgresStore'])} | {p50_95(s['MemoryAdminStore'])} "
                   f"| {ratio(pct(s['MemoryAdminStore'], .5), pct(s['PostgresStore'], .5)):.2f}× |")
    out += [
        "",
        "### Against the targets",
        "",
        "| measure | this run | target | within the target in this run |",
        "|---|---:|---:|---|",
    ]
    for measure, figure, target, within in targets(fig, reused):
        out.append(f"| {measure} | {figure} | {target} | {'—' if within is None else 'yes' if within else 'no'} |")
    out += ["", "| measure | wall time |", "|---|---:|"]
    out += [f"| {name} | {seconds:.1f} s |" for name, seconds in fig.seconds.items()]
    return "\n".join(out) + "\n"


def machine_line(url: str) -> str:
    from importlib.metadata import version

    import psycopg

    with closing(psycopg.connect(url)) as conn:
        pg = conn.execute("SHOW server_version").fetchone()[0]
    return (
        f"{platform.machine()}, {os.cpu_count()} cores, {platform.python_implementation()} {platform.python_version()}, "
        f"PostgreSQL {pg}, langgraph {version('langgraph')}, langgraph-checkpoint-postgres "
        f"{version('langgraph-checkpoint-postgres')}, gunicorn {version('gunicorn')} (2 workers)"
    )


def as_json(fig: Figures, reused: dict | None = None) -> dict[str, Any]:
    data = asdict(fig)
    data["targets"] = [
        {"measure": m, "figure": f, "target": t, "within": w} for m, f, t, w in targets(fig, reused)
    ]
    return data


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", action="store_true", help="fewer rounds, 100 turns for the storage figures")
    parser.add_argument("--tiny", action="store_true", help="every measure once or twice (the test's run)")
    parser.add_argument("--rounds", type=int, help="timed rounds of each measure")
    parser.add_argument("--json", type=Path, help="also write every figure as JSON to this file")
    parser.add_argument("--write", action="store_true", help="write the tables into docs/benchmarks.md")
    args = parser.parse_args()
    cfg = TINY if args.tiny else SMALL if args.small else FULL
    if args.rounds:
        cfg = Config(**{**asdict(cfg), "rounds": args.rounds})

    name = f"{bench.DB_NAME}_steps"
    url = bench.fresh_database(name)
    try:
        bench.setup_django(url)
        from django.contrib.auth import get_user_model

        from memoryadmin.apikeys import apikey_create

        user = get_user_model().objects.create_user("lgs-bench")
        key = apikey_create(owner=user).plaintext
        port = bench.free_port()
        server = bench.start_server(url, port)
        try:
            fig = run(url=url, base_url=f"http://127.0.0.1:{port}", api_key=key, cfg=cfg, server_pid=server.pid)
        finally:
            server.terminate()
            server.wait(timeout=30)
        flags = {"small": " --small", "tiny": " --tiny"}.get(cfg.name, "")
        text = report(fig, command=f"bench/langgraph_steps.py{flags}", machine=machine_line(url))
        print(text)
        if args.json:
            args.json.write_text(json.dumps(as_json(fig), indent=1))
        if args.write:
            bench.write_section("benchmarks.md", SECTION, text)
    finally:
        from django.db import connections

        connections.close_all()
        bench.drop_database(name)


if __name__ == "__main__":
    main()
