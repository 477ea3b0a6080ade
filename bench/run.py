"""`make bench`: memoryadmin against LangGraph's PostgresSaver / PostgresStore and raw psycopg.

    .venv/bin/python bench/run.py [--small] [--rounds 30] [--write]

One run, one fresh PostgreSQL database (BENCH_DB, default memoryadmin_bench, made
through BENCH_ADMIN_URL). bench/loader.py loads the data by COPY in three
stages, 1x, 10x and 100x, where 100x is the full size:

    10 000 threads, 1 000 000 blocks with compaction history (+ one 10 000-message
    thread), 500 000 checkpoints, 1 000 000 store items over 100 000 namespaces

and the same checkpoints and items into LangGraph's own tables. `--small`
divides every size by 10. After each stage every operation is timed `--rounds`
times through memoryadmin's service layer (in process), its HTTP API (gunicorn
from gunicorn.conf.py, 2 workers, on 127.0.0.1; keep-alive client), LangGraph's
PostgresSaver / PostgresStore, and raw psycopg running the statements the
operation needs (the floor). Prints two Markdown tables (side by side at 100x;
p50 at 1x / 10x / 100x) and the load times, then, on the same database and
server, LangGraph's InMemorySaver / PostgresSaver against MemoryAdminSaver per
graph step (bench/langgraph_steps.py); `--write` puts both in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import platform
import socket
import subprocess
import sys
import time
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import loader  # noqa: E402

ADMIN_URL = os.environ.get("BENCH_ADMIN_URL", "postgres://postgres@127.0.0.1:5432/postgres")
DB_NAME = os.environ.get("BENCH_DB", "memoryadmin_bench")
FULL_THREADS = 10_000
FULL_NAMESPACES = 100_000
BIG_THREAD_MESSAGES = 10_000
IMPLS = ("service", "http", "langgraph", "raw")


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def ms(value: float) -> str:
    return f"{value * 1000:.2f}" if value < 0.1 else f"{value * 1000:.0f}"


def write_section(doc_name: str, section: str, report: str) -> None:
    """Replace what lies between `<!-- {section}:start -->` and `<!-- {section}:end -->` in
    docs/{doc_name} with `report` (appending the markers when the document has none)."""
    doc = ROOT / "docs" / doc_name
    text = doc.read_text()
    start, end = f"<!-- {section}:start -->", f"<!-- {section}:end -->"
    if start not in text:
        text += f"\n{start}\n{end}\n"
    head, _, rest = text.partition(start)
    _, _, tail = rest.partition(end)
    doc.write_text(f"{head}{start}\n{report}{end}{tail}")
    log(f"wrote {doc}")


def raw_save_turn(conn, thread_id: str, agent_code: str, context: list[dict], digests: list[str] | None = None) -> int:
    """The floor of a save: the service's own two statements (the thread with its chain
    head, then the conditional update-and-insert) sent by plain psycopg on an autocommit
    connection, with the same prefix check. Returns the number of blocks inserted.

    With `digests` (the chain digests of the new messages, computed beforehand) the
    prefix check is skipped: the database statements alone."""
    import datetime

    import orjson

    from sessions_app.threads.messages import ContextHasher
    from sessions_app.threads.services import thread_append_sql, thread_head_sql

    pk, owner, agent, last_seq, rewrites, active, updated_at, _untitled, position, head = conn.execute(
        thread_head_sql(), (agent_code, thread_id)
    ).fetchone()
    stored = position + 1
    if digests is None:
        hasher = ContextHasher(context)
        assert hasher.prefix_digest(stored) == head, "the stored chain does not match"
        digests = hasher.digests_from(stored)
    now = datetime.datetime.now(datetime.UTC)
    new = context[stored:]
    params = [last_seq + len(new), len(new), agent_code, now, "", pk, owner, last_seq, rewrites, active, updated_at, agent_code, now]
    for i, message in enumerate(new):
        params += [last_seq + 1 + i, stored + i, message["role"], message["content"], orjson.dumps(message).decode(), "message", digests[i]]
    sql = thread_append_sql(rows=len(new))
    return conn.execute(sql, params).rowcount


# --- setup ----------------------------------------------------------------------------------------


def database_url(name: str = DB_NAME) -> str:
    base, _, _ = ADMIN_URL.rpartition("/")
    return f"{base}/{name}"


def drop_database(name: str = DB_NAME) -> None:
    import psycopg

    with closing(psycopg.connect(ADMIN_URL, autocommit=True)) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def fresh_database(name: str = DB_NAME) -> str:
    import psycopg

    drop_database(name)
    with closing(psycopg.connect(ADMIN_URL, autocommit=True)) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return database_url(name)


def setup_django(url: str) -> None:
    os.environ["DATABASE_URL"] = url
    os.environ["DJANGO_SETTINGS_MODULE"] = "memoryadmin.settings"
    os.environ.setdefault("DJANGO_SECRET_KEY", "bench-" + hashlib.sha256(os.urandom(16)).hexdigest())
    os.environ["DJANGO_DEBUG"] = "0"
    os.environ["DJANGO_LOG_LEVEL"] = "WARNING"
    # The benchmark's client makes hundreds of requests a second with one key: the
    # throttle stays on (its cost is part of a request) with a budget it never meets.
    os.environ.setdefault("MEMORYADMIN_THROTTLE_RATE", "1000000/min")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    call_command("collectstatic", "--noinput", verbosity=0)


def free_port() -> int:
    with closing(socket.socket()) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(url: str, port: int, workers: int = 2) -> subprocess.Popen:
    import httpx

    env = {
        **os.environ,
        "DATABASE_URL": url,
        "DJANGO_DEBUG": "0",
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
        "GUNICORN_BIND": f"127.0.0.1:{port}",
        "GUNICORN_WORKERS": str(workers),
        "GUNICORN_ACCESS_LOG": "",
        "GUNICORN_LOG_LEVEL": "warning",
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


def session_cookie(user) -> str:
    """A logged-in session for the dashboard pages, made the way login() makes one."""
    from django.conf import settings
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
    from django.contrib.sessions.backends.db import SessionStore

    session = SessionStore()
    session[SESSION_KEY] = str(user.pk)
    session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
    session[HASH_SESSION_KEY] = user.get_session_auth_hash()
    session.save()
    return f"{settings.SESSION_COOKIE_NAME}={session.session_key}"


# --- the operations -------------------------------------------------------------------------------


@dataclass
class Result:
    samples: dict[str, list[float]] = field(default_factory=dict)
    queries: int | None = None


SLOW = 1.0  # seconds: an operation this slow is timed 5 times, not `rounds` times


def timed(fn: Callable[[], Any], rounds: int, warmup: int = 2) -> list[float]:
    for _ in range(warmup):
        started = time.perf_counter()
        fn()
        if time.perf_counter() - started > SLOW:
            # Whole-table operations at 100x (LangGraph's namespace listing at the root
            # takes seconds): five rounds tell as much and keep the run near 30 minutes.
            rounds = min(rounds, 5)
            break
    out = []
    for _ in range(rounds):
        started = time.perf_counter()
        fn()
        out.append(time.perf_counter() - started)
    return out


def count_queries(fn: Callable[[], Any]) -> int:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured:
        fn()
    return len(captured)


def new_turn(start: int) -> list[dict]:
    return [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}: {loader.text_for(i)}", "id": f"new-{i}"}
        for i in range(start, start + 2)
    ]


class Bench:
    def __init__(self, *, url: str, port: int, rounds: int, owners: list, admin, keys: dict[int, str], cookie: str):
        import httpx
        import psycopg
        from langgraph.checkpoint.postgres import PostgresSaver
        from langgraph.store.postgres import PostgresStore

        self.url, self.rounds, self.owners, self.admin, self.keys = url, rounds, owners, admin, keys
        self.base = f"http://127.0.0.1:{port}"
        self.http = httpx.Client(timeout=120)
        self.cookie = cookie
        self.raw = psycopg.connect(url)
        self.raw_autocommit = psycopg.connect(url, autocommit=True)
        self._saver_cm = PostgresSaver.from_conn_string(url)
        self.saver = self._saver_cm.__enter__()
        self._store_cm = PostgresStore.from_conn_string(url)
        self.store = self._store_cm.__enter__()
        self.seq = 0

    def close(self) -> None:
        self.http.close()
        self.raw.close()
        self.raw_autocommit.close()
        self._saver_cm.__exit__(None, None, None)
        self._store_cm.__exit__(None, None, None)

    def owner_of(self, index: int):
        return self.owners[index % len(self.owners)]

    def headers(self, user) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.keys[user.pk]}", "Content-Type": "application/json"}

    def unique(self) -> int:
        self.seq += 1
        return self.seq

    # each returns {impl: samples} and the service's query count

    def save_turn(self, index: int) -> Result:
        import orjson

        from sessions_app.threads.services import thread_save_agent_state

        res = Result()
        user = self.owner_of(index)
        # Four threads of the same shape (100 active messages): one per implementation.
        ids = [loader.thread_key(index + 3 * k) for k in range(3)]
        contexts = [list(loader.thread_generations(index + 3 * k)[-1]) for k in range(3)]
        agents = [loader.AGENTS[(index + 3 * k) % len(loader.AGENTS)] for k in range(3)]
        agent = agents[0]

        def service():
            contexts[0] += new_turn(len(contexts[0]))
            result = thread_save_agent_state(actor=user, thread_id=ids[0], agent_code=agent, context=contexts[0])
            assert result.mode == "append" and result.appended == 2, result

        res.samples["service"] = timed(service, self.rounds)
        contexts[0] += new_turn(len(contexts[0]))
        res.queries = count_queries(
            lambda: thread_save_agent_state(actor=user, thread_id=ids[0], agent_code=agent, context=contexts[0])
        )

        samples = []
        for _ in range(self.rounds + 2):
            contexts[1] += new_turn(len(contexts[1]))
            body = orjson.dumps({"agent_code": agents[1], "context": contexts[1]})
            started = time.perf_counter()
            response = self.http.put(
                f"{self.base}/api/v1/threads/{ids[1]}/agent-state", content=body, headers=self.headers(self.owner_of(index + 3))
            )
            samples.append(time.perf_counter() - started)
            assert response.status_code == 200 and response.json()["appended"] == 2, response.text
        res.samples["http"] = samples[2:]

        res.samples["langgraph"] = self._saver_conversation_puts(f"lg-save-{index}", len(contexts[0]))

        thread_pk = index + 6 + 1  # the loader's primary keys: index + 1
        raw_context = contexts[2]
        agent = agents[2]
        raw_thread_id = ids[2]

        def raw():
            raw_context.extend(new_turn(len(raw_context)))
            assert raw_save_turn(self.raw_autocommit, raw_thread_id, agent, raw_context) == 2

        res.samples["raw"] = timed(raw, self.rounds)
        self.lg_conversation = f"lg-save-{index}"
        self.svc_thread = ids[0]
        self.svc_user = user
        self.http_thread = ids[1]
        self.raw_thread_pk = thread_pk
        self.raw_agent = agent
        return res

    def _saver_conversation_puts(self, thread_id: str, size: int) -> list[float]:
        """PostgresSaver.put of a checkpoint whose messages channel holds the conversation."""
        from langchain_core.messages import AIMessage, HumanMessage
        from langgraph.checkpoint.base import create_checkpoint, empty_checkpoint

        def as_messages(items):
            return [(HumanMessage if m["role"] == "user" else AIMessage)(content=m["content"], id=m["id"]) for m in items]

        messages = as_messages(new_turn(0) * 0 + [
            {"role": "user" if i % 2 == 0 else "assistant", "content": f"{i}: {loader.text_for(i)}", "id": f"c-{i}"}
            for i in range(size)
        ])
        config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
        version = self.saver.get_next_version(None, None)
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {"messages": messages}
        checkpoint["channel_versions"] = {"messages": version}
        config = self.saver.put(config, checkpoint, {"source": "loop", "step": 0}, {"messages": version})
        samples = []
        for step in range(self.rounds + 2):
            messages = messages + as_messages(new_turn(len(messages)))
            version = self.saver.get_next_version(version, None)
            checkpoint = create_checkpoint(checkpoint, None, step + 1)
            checkpoint["channel_values"] = {"messages": messages}
            checkpoint["channel_versions"] = {"messages": version}
            started = time.perf_counter()
            config = self.saver.put(config, checkpoint, {"source": "loop", "step": step + 1}, {"messages": version})
            samples.append(time.perf_counter() - started)
        return samples[2:]

    def load_thread(self, thread_id: str | None = None, lg_thread: str | None = None, raw_pk: int | None = None,
                    agent: str | None = None, user=None) -> Result:
        import orjson

        from sessions_app.threads.selectors import thread_agent_state

        res = Result()
        thread_id = thread_id or self.svc_thread
        user = user or self.svc_user
        res.samples["service"] = timed(lambda: thread_agent_state(actor=user, thread_id=thread_id), self.rounds)
        res.queries = count_queries(lambda: thread_agent_state(actor=user, thread_id=thread_id))

        def http():
            response = self.http.get(f"{self.base}/api/v1/threads/{thread_id}/agent-state", headers=self.headers(user))
            assert response.status_code == 200
            orjson.loads(response.content)

        res.samples["http"] = timed(http, self.rounds)
        lg_config = {"configurable": {"thread_id": lg_thread or self.lg_conversation, "checkpoint_ns": ""}}
        res.samples["langgraph"] = timed(lambda: self.saver.get_tuple(lg_config), self.rounds)
        pk, agent_code = raw_pk or self.raw_thread_pk, agent or self.raw_agent

        def raw():
            row = self.raw.execute(
                "SELECT coalesce(json_agg(message ORDER BY seq), '[]'::json)::text FROM sessions_app_block"
                " WHERE thread_id = %s AND agent_code = %s AND NOT archived", (pk, agent_code),
            ).fetchone()
            orjson.loads(row[0])
            self.raw.commit()

        res.samples["raw"] = timed(raw, self.rounds)
        return res

    def thread_list_page(self) -> Result:
        from sessions_app.checkpoints import search
        from sessions_app.threads import selectors

        res = Result()
        admin = self.admin

        def service():
            query = search.thread_list_query_parse({})
            list(search.thread_list_queryset(actor=admin, query=query)[:51])
            selectors.thread_agent_codes(actor=admin)

        res.samples["service"] = timed(service, self.rounds)
        res.queries = count_queries(service)

        def http():
            response = self.http.get(f"{self.base}/threads/", headers={"Cookie": self.cookie})
            assert response.status_code == 200 and "t-" in response.text, response.status_code

        res.samples["http"] = timed(http, self.rounds)

        def raw():
            self.raw.execute(
                "SELECT t.id, t.thread_id, t.title, t.agent_code, t.active_count, t.archived_count, t.updated_at, u.username"
                " FROM sessions_app_thread t JOIN auth_user u ON u.id = t.owner_id"
                " ORDER BY t.updated_at DESC, t.id DESC LIMIT 51"
            ).fetchall()
            self.raw.commit()

        res.samples["raw"] = timed(raw, self.rounds)
        return res

    def checkpoint_get_latest(self, index: int) -> Result:
        from sessions_app.checkpoints import selectors as cs
        from sessions_app.checkpoints.latest import checkpoint_latest

        res = Result()
        user, thread_id = self.owner_of(index), loader.thread_key(index)

        def service():
            # What GET …/checkpoints/latest runs (the general path's checkpoint_get where it declines).
            cs.checkpoint_as_dict(checkpoint_latest(actor=user, thread_id=thread_id))

        res.samples["service"] = timed(service, self.rounds)
        res.queries = count_queries(service)

        def http():
            response = self.http.get(f"{self.base}/api/v1/threads/{thread_id}/checkpoints/latest", headers=self.headers(user))
            assert response.status_code == 200, response.text

        res.samples["http"] = timed(http, self.rounds)
        config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}

        def langgraph():
            found = self.saver.get_tuple(config)
            assert found is not None and len(found.checkpoint["channel_values"]["messages"]) > 0

        res.samples["langgraph"] = timed(langgraph, self.rounds)

        # Pending writes are keyed by the checkpoint's row, or (in later schemas) by its ids.
        by_ids = self.raw.execute(
            "SELECT count(*) FROM information_schema.columns WHERE table_name = 'sessions_app_checkpointwrite'"
            " AND column_name = 'checkpoint_ns'"
        ).fetchone()[0]
        self.raw.commit()

        def raw():
            row = self.raw.execute(
                "SELECT id, checkpoint_id, parent_checkpoint_id, checkpoint, metadata FROM sessions_app_checkpoint"
                " WHERE thread_id = %s AND checkpoint_ns = '' ORDER BY id DESC LIMIT 1", (index + 1,),
            ).fetchone()
            if by_ids:
                self.raw.execute(
                    "SELECT task_id, idx, channel, value FROM sessions_app_checkpointwrite"
                    " WHERE thread_id = %s AND checkpoint_ns = '' AND checkpoint_id = %s", (index + 1, row[1]),
                ).fetchall()
            else:
                self.raw.execute(
                    "SELECT task_id, idx, channel, value FROM sessions_app_checkpointwrite WHERE checkpoint_id = %s",
                    (row[0],),
                ).fetchall()
            self.raw.commit()

        res.samples["raw"] = timed(raw, self.rounds)
        return res

    def checkpoint_put(self, index: int) -> Result:
        import orjson
        from langgraph.checkpoint.base import create_checkpoint

        from sessions_app.checkpoints import services as svc

        res = Result()
        user, thread_id = self.owner_of(index), loader.thread_key(index)
        config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
        latest = self.saver.get_tuple(config)
        lg_checkpoint = latest.checkpoint
        lg_config = latest.config
        ours = loader.checkpoint_wire(latest.checkpoint)

        def fresh_id() -> str:
            return f"1f1{self.unique():05x}-0000-6000-8000-{index:012x}"

        # The step as MemoryAdminSaver sends it once the thread's messages are its blocks (one
        # whole put first, off the clock): the other channels, and the messages as a delta
        # against the chain head the whole put answered (none added: PostgresSaver's put
        # below stores the same messages under a new version).
        cid = fresh_id()
        whole = svc.checkpoint_input(checkpoint=dict(ours, id=cid), metadata={"source": "loop", "step": 98},
                                     parent_checkpoint_id=lg_config["configurable"]["checkpoint_id"])
        held = svc.checkpoint_put(actor=user, thread_id=thread_id, data=whole, checkpoint_id=cid).messages
        delta = {"head": held["head"], "append": []} if held else None
        step = dict(ours, channel_values={k: v for k, v in ours["channel_values"].items() if k != "messages"}) if held else ours

        def service():
            cid = fresh_id()
            data = svc.checkpoint_input(checkpoint=dict(step, id=cid), metadata={"source": "loop", "step": 99},
                                        parent_checkpoint_id=lg_config["configurable"]["checkpoint_id"], messages=delta)
            assert svc.checkpoint_put(actor=user, thread_id=thread_id, data=data, checkpoint_id=cid).created

        res.samples["service"] = timed(service, self.rounds)
        res.queries = count_queries(service)

        def http():
            cid = fresh_id()
            body = {"checkpoint_id": cid, "checkpoint": dict(step, id=cid), "metadata": {"source": "loop", "step": 99},
                    "parent_checkpoint_id": lg_config["configurable"]["checkpoint_id"]}
            if delta is not None:
                body["messages"] = delta
            payload = orjson.dumps(body)
            response = self.http.post(f"{self.base}/api/v1/threads/{thread_id}/checkpoints", content=payload, headers=self.headers(user))
            assert response.status_code == 201, response.text

        res.samples["http"] = timed(http, self.rounds)
        state = {"checkpoint": lg_checkpoint, "config": lg_config}

        def langgraph():
            checkpoint = create_checkpoint(state["checkpoint"], None, 99)
            version = self.saver.get_next_version(checkpoint["channel_versions"].get("messages"), None)
            checkpoint["channel_versions"] = dict(checkpoint["channel_versions"], messages=version)
            state["config"] = self.saver.put(state["config"], checkpoint, {"source": "loop", "step": 99}, {"messages": version})
            state["checkpoint"] = checkpoint

        res.samples["langgraph"] = timed(langgraph, self.rounds)
        text = orjson.dumps(ours).decode()

        def raw():
            with self.raw.transaction():
                self.raw.execute("SELECT id FROM sessions_app_thread WHERE id = %s FOR UPDATE", (index + 1,))
                self.raw.execute(
                    "INSERT INTO sessions_app_checkpoint (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id,"
                    " checkpoint, metadata, run_id, node_id, next_node_id, created_at, updated_at)"
                    " VALUES (%s, '', %s, %s, %s::jsonb, '{}'::jsonb, '', '', '', now(), now())",
                    (index + 1, fresh_id(), lg_config["configurable"]["checkpoint_id"], text),
                )
                self.raw.execute("UPDATE sessions_app_thread SET updated_at = now() WHERE id = %s", (index + 1,))

        res.samples["raw"] = timed(raw, self.rounds)
        return res

    def store_put(self, n: int) -> Result:
        import orjson

        from store_app.services import store_item_put

        res = Result()
        namespace = loader.namespace_of(n)
        user = self.owners[n // (loader.USERS_PER_ORG * len(loader.KINDS)) % len(self.owners)]
        value = loader.item_value(n, 3)

        def key() -> str:
            return f"new-{self.unique()}"

        res.samples["service"] = timed(lambda: store_item_put(actor=user, namespace=list(namespace), key=key(), value=value), self.rounds)
        res.queries = count_queries(lambda: store_item_put(actor=user, namespace=list(namespace), key=key(), value=value))

        def http():
            payload = orjson.dumps({"namespace": list(namespace), "key": key(), "value": value})
            response = self.http.put(f"{self.base}/api/v1/store/items", content=payload, headers=self.headers(user))
            assert response.status_code in (200, 201, 204), response.text

        res.samples["http"] = timed(http, self.rounds)
        res.samples["langgraph"] = timed(lambda: self.store.put(namespace, key(), value), self.rounds)
        path, text = ".".join(namespace), orjson.dumps(value).decode()

        def raw():
            self.raw.execute(
                "INSERT INTO store_app_storeitem (owner_id, namespace_path, depth, key, value, created_at, updated_at)"
                " VALUES (%s, %s, %s, %s, %s::jsonb, now(), now()) ON CONFLICT (namespace_path, key)"
                " DO UPDATE SET value = EXCLUDED.value, updated_at = EXCLUDED.updated_at",
                (user.pk, path, len(namespace), key(), text),
            )
            self.raw.commit()

        res.samples["raw"] = timed(raw, self.rounds)
        return res

    def store_get(self, n: int) -> Result:
        from store_app.api.views import item_as_dict
        from store_app.selectors import store_item_get_for_read

        res = Result()
        namespace = loader.namespace_of(n)
        user = self.owners[n // (loader.USERS_PER_ORG * len(loader.KINDS)) % len(self.owners)]
        key = f"k-{loader.ITEMS_PER_NAMESPACE // 2:02d}"  # a loaded item

        def service():
            item = store_item_get_for_read(actor=user, namespace=list(namespace), key=key)
            assert item is not None
            item_as_dict(item)

        res.samples["service"] = timed(service, self.rounds)
        res.queries = count_queries(service)
        params = {"namespace": ".".join(namespace), "key": key}

        def http():
            response = self.http.get(f"{self.base}/api/v1/store/items", params=params, headers=self.headers(user))
            assert response.status_code == 200 and response.json()["key"] == key, response.text

        res.samples["http"] = timed(http, self.rounds)

        def langgraph():
            assert self.store.get(namespace, key) is not None

        res.samples["langgraph"] = timed(langgraph, self.rounds)
        path = ".".join(namespace)

        def raw():
            row = self.raw.execute(
                "SELECT id, namespace_path, key, value, created_at, updated_at, owner_id FROM store_app_storeitem"
                " WHERE namespace_path = %s AND key = %s AND (expires_at IS NULL OR expires_at > now())", (path, key),
            ).fetchone()
            assert row is not None
            self.raw.commit()

        res.samples["raw"] = timed(raw, self.rounds)
        return res

    def store_search(self, org: int | None, user=None) -> Result:
        import orjson

        from store_app.selectors import store_item_search, store_search_validate

        res = Result()
        prefix = [loader.org_key(org)] if org is not None else []
        flt = {"topic": "travel"}
        user = user or self.owners[org % len(self.owners)]

        def service():
            request = store_search_validate(namespace_prefix=prefix, filter=flt, limit=10)
            items = store_item_search(actor=user, request=request)
            assert len(items) == 10, len(items)

        res.samples["service"] = timed(service, self.rounds)
        res.queries = count_queries(service)
        payload = orjson.dumps({"namespace_prefix": prefix, "filter": flt, "limit": 10})

        def http():
            response = self.http.post(f"{self.base}/api/v1/store/items/search", content=payload, headers=self.headers(user))
            assert response.status_code == 200 and len(response.json()["items"]) == 10, response.text

        res.samples["http"] = timed(http, self.rounds)

        def langgraph():
            assert len(self.store.search(tuple(prefix), filter=flt, limit=10)) == 10

        res.samples["langgraph"] = timed(langgraph, self.rounds)
        visible = "" if user.pk == self.admin.pk else f" AND owner_id = {int(user.pk)}"
        where = "(namespace_path = %s OR namespace_path LIKE %s) AND " if prefix else ""
        params = (prefix[0], prefix[0] + ".%") if prefix else ()

        def raw():
            rows = self.raw.execute(
                "SELECT id, namespace_path, key, value, created_at, updated_at FROM store_app_storeitem"
                f" WHERE {where}value @> %s::jsonb AND (expires_at IS NULL OR expires_at > now()){visible}"
                " ORDER BY updated_at DESC, id DESC LIMIT 10", (*params, orjson.dumps(flt).decode()),
            ).fetchall()
            assert len(rows) == 10
            self.raw.commit()

        res.samples["raw"] = timed(raw, self.rounds)
        return res

    def namespace_expand(self, org: int | None) -> Result:
        import orjson

        from store_app.selectors import store_namespace_children

        res = Result()
        admin = self.admin
        namespace = (loader.org_key(org),) if org is not None else ()

        def service():
            nodes, _ = store_namespace_children(actor=admin, namespace=namespace)
            assert nodes

        res.samples["service"] = timed(service, self.rounds)
        res.queries = count_queries(service)
        payload = orjson.dumps({"prefix": list(namespace), "max_depth": len(namespace) + 1, "limit": 1000})
        admin_key_user = admin

        def http():
            response = self.http.post(f"{self.base}/api/v1/store/namespaces", content=payload, headers=self.headers(admin_key_user))
            assert response.status_code == 200, response.text

        res.samples["http"] = timed(http, self.rounds)
        res.samples["langgraph"] = timed(
            lambda: self.store.list_namespaces(prefix=namespace or None, max_depth=len(namespace) + 1, limit=1000), self.rounds
        )
        depth = len(namespace) + 1

        def raw():
            if namespace:
                sql = ("SELECT split_part(namespace_path, '.', %s) AS head, count(*), max(depth) FROM store_app_storeitem"
                       " WHERE namespace_path LIKE %s AND (expires_at IS NULL OR expires_at > now()) GROUP BY 1 ORDER BY 1")
                self.raw.execute(sql, (depth, namespace[0] + ".%")).fetchall()
            else:
                self.raw.execute(
                    "SELECT split_part(namespace_path, '.', 1) AS head, count(*), max(depth) FROM store_app_storeitem"
                    " WHERE expires_at IS NULL OR expires_at > now() GROUP BY 1 ORDER BY 1 LIMIT 501"
                ).fetchall()
            self.raw.commit()

        res.samples["raw"] = timed(raw, self.rounds)
        return res


# --- the run --------------------------------------------------------------------------------------

OPS = (
    ("save turn (100-message thread)", "save_turn"),
    ("load thread (100 messages)", "load_thread"),
    ("thread list page (admin, 50 rows)", "thread_list_page"),
    ("checkpoint get latest", "checkpoint_get_latest"),
    ("checkpoint put", "checkpoint_put"),
    ("store put", "store_put"),
    ("store get", "store_get"),
    ("store search, prefix + filter", "store_search"),
    ("store search, filter over the whole store", "store_search_all"),
    ("namespace expansion (one org)", "namespace_expand"),
    ("namespace expansion (root)", "namespace_root"),
)


def measure(bench: Bench, threads: int, namespaces: int) -> dict[str, Result]:
    # The newest thread of the stage with no compaction (100 active messages), and
    # the newest whole org of the store.
    index = max(i for i in range(max(0, threads - 12), threads - 6) if i % 3 == 0)
    org = namespaces // (loader.USERS_PER_ORG * len(loader.KINDS)) - 1
    out = {}
    out["save_turn"] = bench.save_turn(index)
    out["load_thread"] = bench.load_thread()
    out["thread_list_page"] = bench.thread_list_page()
    out["checkpoint_get_latest"] = bench.checkpoint_get_latest(index + 1)
    out["checkpoint_put"] = bench.checkpoint_put(index + 2)
    out["store_put"] = bench.store_put(namespaces - 1)
    out["store_get"] = bench.store_get(namespaces - 2)
    out["store_search"] = bench.store_search(org)
    out["store_search_all"] = bench.store_search(None, user=bench.admin)
    out["namespace_expand"] = bench.namespace_expand(org)
    out["namespace_root"] = bench.namespace_expand(None)
    return out


def side_by_side(results: dict[str, Result], extra: list[tuple[str, Result]]) -> str:
    lines = [
        "| operation | service p50 / p95 | HTTP p50 / p95 | LangGraph p50 / p95 | raw psycopg p50 / p95 "
        "| service ÷ raw | HTTP ÷ service | LangGraph ÷ service | service queries |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    rows = [(label, results[key]) for label, key in OPS] + extra
    for label, res in rows:
        s = res.samples
        cells = []
        for impl in IMPLS:
            cells.append(f"{ms(pct(s[impl], .5))} / {ms(pct(s[impl], .95))}" if impl in s else "—")
        svc = pct(s["service"], .5)
        ratio = lambda impl, den: f"{pct(s[impl], .5) / den:.2f}×" if impl in s else "—"  # noqa: E731
        lines.append(
            f"| {label} | {' | '.join(cells)} | {ratio('service', pct(s['raw'], .5))} | {ratio('http', svc)} | "
            f"{ratio('langgraph', svc)} | {res.queries} |"
        )
    return "\n".join(lines)


def growth(by_scale: dict[int, dict[str, Result]]) -> str:
    scales = sorted(by_scale)
    head = " | ".join(f"service {s}×" for s in scales) + " | " + " | ".join(f"LangGraph {s}×" for s in scales)
    lines = [
        f"| operation (p50, ms) | {head} | service {scales[-1]}× ÷ {scales[0]}× | LangGraph {scales[-1]}× ÷ {scales[0]}× |",
        "|---|" + "---:|" * (2 * len(scales) + 2),
    ]
    for label, key in OPS:
        svc = [pct(by_scale[s][key].samples["service"], .5) for s in scales]
        lg = [pct(by_scale[s][key].samples["langgraph"], .5) if "langgraph" in by_scale[s][key].samples else None for s in scales]
        lg_cells = " | ".join(ms(v) if v is not None else "—" for v in lg)
        lg_ratio = f"{lg[-1] / lg[0]:.2f}×" if lg[0] else "—"
        lines.append(f"| {label} | {' | '.join(ms(v) for v in svc)} | {lg_cells} | {svc[-1] / svc[0]:.2f}× | {lg_ratio} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", action="store_true", help="every size divided by 10, for a quick run")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--scales", default="1,10,100")
    parser.add_argument("--write", action="store_true", help="write the tables into docs/benchmarks.md")
    args = parser.parse_args()
    divisor = 10 if args.small else 1
    scales = [int(s) for s in args.scales.split(",")]
    run_started = time.perf_counter()
    load_before = os.getloadavg()

    url = fresh_database()
    setup_django(url)
    import psycopg

    from memoryadmin.apikeys import apikey_create
    from sessions_app.threads.services import thread_save_agent_state

    templates = loader.langgraph_tables(url)

    members, admin = loader.seed_users(max(2, 100 // divisor))
    keys = {user.pk: apikey_create(owner=user).plaintext for user in [*members, admin]}
    cookie = session_cookie(admin)
    owners = [user.pk for user in members]

    port = free_port()
    server = start_server(url, port)
    loaded = loader.Loaded()
    by_scale: dict[int, dict[str, Result]] = {}
    big: Result | None = None
    big_size = 0
    conn = psycopg.connect(url)
    bench = Bench(url=url, port=port, rounds=args.rounds, owners=members, admin=admin, keys=keys, cookie=cookie)
    try:
        for scale in scales:
            threads = FULL_THREADS * scale // 100 // divisor
            namespaces = FULL_NAMESPACES * scale // 100 // divisor
            log(f"loading {scale}× ({threads:,} threads, {namespaces:,} namespaces) …")
            loader.load_range(conn, loaded, threads=threads, namespaces=namespaces, owners=owners, templates=templates, log=log)
            log(f"measuring at {scale}× …")
            by_scale[scale] = measure(bench, threads, namespaces)
        from sessions_app.models import Thread

        # One long thread (the "load thread (10,000 messages)" row of docs/benchmarks.md), written by the service.
        big_size = BIG_THREAD_MESSAGES // divisor
        big_context = [
            {"role": "user" if i % 2 == 0 else "assistant", "content": f"{i}: {loader.text_for(i)}", "id": f"big-{i}"}
            for i in range(big_size)
        ]
        thread_save_agent_state(actor=members[0], thread_id="big-thread", agent_code="planner", context=big_context)
        big_thread = Thread.objects.get(thread_id="big-thread")
        bench._saver_conversation_puts("lg-big-thread", big_size)
        big = bench.load_thread(thread_id="big-thread", lg_thread="lg-big-thread", raw_pk=big_thread.pk,
                                agent="planner", user=members[0])
        sizes = conn.execute(
            "SELECT pg_size_pretty(pg_database_size(current_database())), "
            "(SELECT count(*) FROM sessions_app_block), (SELECT count(*) FROM sessions_app_checkpoint),"
            " (SELECT count(*) FROM store_app_storeitem), (SELECT count(*) FROM checkpoints), (SELECT count(*) FROM store)"
        ).fetchone()
        pg_version = conn.execute("SHOW server_version").fetchone()[0]

        # LangGraph's savers and stores against MemoryAdminSaver / MemoryAdminStore, on the same
        # database and server (bench/langgraph_steps.py).
        import langgraph_steps

        log("LangGraph steps …")
        steps = langgraph_steps.run(url=url, base_url=bench.base, api_key=keys[members[0].pk],
                                    cfg=langgraph_steps.SMALL if args.small else langgraph_steps.FULL,
                                    server_pid=server.pid)
        steps_machine = langgraph_steps.machine_line(url)
    finally:
        bench.close()
        conn.close()
        server.terminate()
        server.wait(timeout=30)

    top = max(scales)
    import django
    from importlib.metadata import version

    machine = (
        f"{platform.machine()}, {os.cpu_count()} cores, {platform.python_implementation()} {platform.python_version()}, "
        f"PostgreSQL {pg_version} (default configuration), Django {django.get_version()}, psycopg {psycopg.__version__}, "
        f"gunicorn {version('gunicorn')}, langgraph-checkpoint-postgres {version('langgraph-checkpoint-postgres')}"
    )
    load_lines = "\n".join(f"| {name} | {seconds:.0f} s |" for name, seconds in loaded.timings.items())
    total = time.perf_counter() - run_started
    command = "make bench" + (" BENCH_ARGS=--small" if args.small else "")
    report = (
        f"Command: `{command}` ({'small: every size ÷ 10' if args.small else 'full size'}). Machine: {machine}.\n\n"
        f"Data at {top}×: {sizes[1]:,} blocks, {sizes[2]:,} checkpoints, {sizes[3]:,} store items in memoryadmin's tables; "
        f"{sizes[4]:,} checkpoints and {sizes[5]:,} items in LangGraph's; database {sizes[0]}. "
        f"Whole run {total / 60:.1f} min; load average {load_before[0]:.1f} at the start, "
        f"{os.getloadavg()[0]:.1f} at the end (other work on the machine shows here).\n\n"
        f"### Side by side at {top}× (ms, {args.rounds} rounds each)\n\n"
        + side_by_side(by_scale[top], [(f"load thread ({big_size:,} messages)", big)])
        + f"\n\n### Cost as data grows: p50 at {', '.join(f'{s}×' for s in scales)}\n\n"
        + growth(by_scale)
        + "\n\n### Load times (COPY, indexes rebuilt, VACUUM ANALYZE; all stages)\n\n| step | time |\n|---|---:|\n"
        + load_lines
        + "\n"
    )
    print(report)
    top_results = by_scale[top]
    reused = {key: top_results[key].samples for key in ("checkpoint_put", "store_put", "store_get")}
    steps_report = langgraph_steps.report(steps, command=command, machine=steps_machine, reused=reused)
    print(steps_report)
    if args.write:
        write_section("benchmarks.md", "bench", report)
        write_section("benchmarks.md", langgraph_steps.SECTION, steps_report)


if __name__ == "__main__":
    main()
