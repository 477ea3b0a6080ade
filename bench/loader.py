"""Bulk loader for the benchmark: realistic data at scale, valid for the services.

COPY through psycopg into memoryadmin's tables and, side by side, into the tables
of LangGraph's PostgresSaver and PostgresStore (made by their own `setup()`):

- threads with blocks and a compaction history: each thread holds 100 blocks,
  a third of them with one compaction (60 archived, then a summary and 39
  messages), a third with two (40 + 30 archived, then 30); seq continues across
  rewrites, `archived_by` names the rewrite, and every block's `chain_hash` is
  the running hash of its own context computed by `ContextHasher`, so the
  service appends to a loaded thread instead of rewriting it;
- 50 checkpoints per thread, each a LangGraph checkpoint (a window of the last
  messages, a step counter, channel versions) in memoryadmin's wire format
  (LangChain's serialised messages) and, for PostgresSaver, in its
  own format (made by its own serializer, blobs in checkpoint_blobs);
- store items: namespaces (org, user, kind), 10 items each, a JSON value with a
  text, a topic and a score; the same items in LangGraph's `store` table.

Loading is incremental (`load_range`): the benchmark loads 1x, measures, tops
up to 10x, measures, tops up to 100x. Secondary indexes are dropped before a
COPY and built again after it (PRIMARY KEY and UNIQUE constraints stay), which
is how PostgreSQL loads fastest; `VACUUM ANALYZE` follows so the planner and
index-only scans see the data as a live database would.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

import orjson

BLOCKS_PER_THREAD = 100
CHECKPOINTS_PER_THREAD = 50
ITEMS_PER_NAMESPACE = 10
USERS_PER_ORG = 10
KINDS = ("memories", "preferences", "facts", "episodes")
TOPICS = ("travel", "food", "work", "health", "music", "family", "finance", "sport")
AGENTS = ("planner", "support", "coder", "researcher", "tutor", "concierge", "analyst")
WINDOW = 4  # messages a loaded checkpoint's state holds
EPOCH = datetime(2026, 1, 1, tzinfo=timezone.utc)

SENTENCES = (
    "Could you check the itinerary again and tell me what changes if the train is late?",
    "The connection in Basel leaves at 14:32; if the first train is late you take the 15:02 instead.",
    "Please remember that I prefer aisle seats and vegetarian meals on long flights.",
    "Summarising the ticket: the customer was charged twice and the refund is pending approval.",
    "Here is the refactored function with the loop replaced by a single aggregated query.",
    "The paper reports a 12% improvement, but the baseline was trained for fewer steps.",
    "Tomorrow's plan: review chapter four, then practise the exercises on derivatives.",
    "I booked the table for four at eight; they asked whether anyone has allergies.",
)


def text_for(seed: int, length: int = 2) -> str:
    return " ".join(SENTENCES[(seed + j) % len(SENTENCES)] for j in range(length))


@dataclass
class Loaded:
    """What has been loaded so far (the benchmark tops it up stage by stage)."""

    threads: int = 0
    namespaces: int = 0
    block_id: int = 0
    checkpoint_id: int = 0
    item_id: int = 0
    timings: dict[str, float] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)

    def add_time(self, name: str, seconds: float) -> None:
        self.timings[name] = self.timings.get(name, 0.0) + seconds

    def add_count(self, name: str, n: int) -> None:
        self.counts[name] = self.counts.get(name, 0) + n


def thread_key(index: int) -> str:
    return f"t-{index:06d}"


def org_key(index: int) -> str:
    return f"org-{index:05d}"


# --- conversation store ---------------------------------------------------------------------------


def _message(thread: int, position: int, generation: int) -> dict[str, Any]:
    role = "user" if position % 2 == 0 else "assistant"
    return {
        "role": role,
        "content": f"[{thread}.{generation}.{position}] {text_for(thread + position)}",
        "id": f"m-{thread}-{generation}-{position}",
    }


def _summary(thread: int, generation: int) -> dict[str, Any]:
    return {
        "role": "system",
        "name": "__compaction_summary__",
        "content": f"Summary of the conversation so far ({generation} compactions): {text_for(thread, 3)}",
        "id": f"s-{thread}-{generation}",
    }


def thread_generations(index: int) -> list[list[dict[str, Any]]]:
    """The contexts a thread went through: archived ones first, the active one last (100 blocks)."""
    compactions = index % 3
    if compactions == 0:
        return [[_message(index, p, 0) for p in range(BLOCKS_PER_THREAD)]]
    sizes = [60, 40] if compactions == 1 else [40, 30, 30]
    generations = []
    for g, size in enumerate(sizes):
        head = [_summary(index, g)] if g else []
        generations.append(head + [_message(index, p, g) for p in range(len(head), size)])
    return generations


def block_type_of(message: dict[str, Any]) -> str:
    from sessions_app.threads.messages import parse_message

    parsed, errors = parse_message(message, "context[0]")
    assert not errors, errors
    return parsed.block_type


def thread_rows(index: int, owner_id: int, block_id: int, thread_pk: int):
    """(thread row, block rows) exactly as the service would have written them."""
    from sessions_app.threads.messages import ContextHasher, content_text

    generations = thread_generations(index)
    agent = AGENTS[index % len(AGENTS)]
    created = EPOCH + timedelta(seconds=index * 60)
    updated = created + timedelta(minutes=30)
    seq = 0
    blocks = []
    for g, context in enumerate(generations):
        digests = ContextHasher(context).digests_from(0)
        archived = g < len(generations) - 1
        at = created + timedelta(minutes=10 * (g + 1))
        for position, message in enumerate(context):
            seq += 1
            block_id += 1
            role = message["role"]
            blocks.append(
                (
                    block_id, thread_pk, agent, seq, position, role, content_text(message["content"]),
                    orjson.dumps(message).decode(), "summary" if message.get("name") else "message",
                    archived, g + 1 if archived else None, at if archived else None, digests[position],
                    created + timedelta(minutes=10 * g, seconds=position),
                )
            )
    active = len(generations[-1])
    title = " ".join(generations[0][0]["content"].split())[:50].rstrip()
    thread = (
        thread_pk, thread_key(index), owner_id, agent, title, None, orjson.dumps({"agent": agent, "bench": True}).decode(),
        seq, len(generations) - 1, active, seq - active, created, updated,
    )
    return thread, blocks, block_id


BLOCK_COLUMNS = (
    "id", "thread_id", "agent_code", "seq", "position", "role", "content", "message", "block_type",
    "archived", "archived_by", "archived_at", "chain_hash", "created_at",
)
THREAD_COLUMNS = (
    "id", "thread_id", "owner_id", "agent_code", "title", "extra_state", "metadata", "last_seq",
    "rewrite_count", "active_count", "archived_count", "created_at", "updated_at",
)


# --- checkpoints ----------------------------------------------------------------------------------


def checkpoint_wire(checkpoint) -> dict[str, Any]:
    """A LangGraph checkpoint in memoryadmin's wire format (docs/checkpoints.md).

    Plain JSON stays JSON; LangChain messages travel in LangChain's own serialised
    form (what memoryadmin's LangGraph saver sends for them).
    """
    from langchain_core.load import dumpd

    body = {key: value for key, value in checkpoint.items() if key != "channel_values"}
    body["channel_values"] = {
        name: [dumpd(m) for m in value] if name == "messages" else value
        for name, value in checkpoint["channel_values"].items()
    }
    return orjson.loads(orjson.dumps(body))


def langgraph_tables(url: str, *, checkpoints: bool = True) -> CheckpointTemplates | None:
    """LangGraph's own tables in the benchmark database, made by PostgresSaver.setup() and
    PostgresStore.setup() (the loader fills them beside memoryadmin's), and the checkpoint
    templates when checkpoints are loaded too."""
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.store.postgres import PostgresStore

    templates = None
    if checkpoints:
        with PostgresSaver.from_conn_string(url) as saver:
            saver.setup()
            templates = CheckpointTemplates(saver)
    with PostgresStore.from_conn_string(url) as store:
        store.setup()
    return templates


class CheckpointTemplates:
    """Per step k: the LangGraph checkpoint, its memoryadmin JSON and its PostgresSaver rows.

    Every thread's k-th checkpoint has the same state shape (a window of the last
    messages and a step counter); ids, parents and times differ per thread. The
    serialised forms come from the real serializers, computed once per step.
    """

    def __init__(self, saver) -> None:
        from langchain_core.messages import AIMessage, HumanMessage
        from langgraph.checkpoint.base import empty_checkpoint
        from sessions_app.checkpoints.langgraph import next_nodes, nodes_run
        pool = [
            (HumanMessage if i % 2 == 0 else AIMessage)(content=text_for(i), id=f"lc-{i}")
            for i in range(CHECKPOINTS_PER_THREAD + WINDOW)
        ]
        self.steps = []
        version = None
        versions = []
        for k in range(CHECKPOINTS_PER_THREAD):
            version = saver.get_next_version(version, None)
            versions.append(version)
            window = pool[max(0, k + 1 - WINDOW) : k + 1]
            checkpoint = empty_checkpoint()
            checkpoint["channel_values"] = {"messages": window, "step": k}
            checkpoint["channel_versions"] = {
                "__start__": versions[0], "messages": version, "step": version, "branch:to:agent": version,
            }
            checkpoint["versions_seen"] = {
                "__input__": {}, "__start__": {"__start__": versions[0]},
                "agent": {"branch:to:agent": versions[k - 1] if k else versions[0]},
            }
            checkpoint["updated_channels"] = ["messages", "step"]
            ours = checkpoint_wire(checkpoint)
            # PostgresSaver.put: primitives stay inline, the rest go to checkpoint_blobs.
            inline = dict(checkpoint)
            inline["channel_values"] = {"step": k}
            blob_type, blob = saver.serde.dumps_typed(window)
            parent_seen = None if k == 0 else self.steps[k - 1]["ours"]["versions_seen"]
            self.steps.append(
                {
                    "checkpoint": checkpoint,
                    "ours": ours,
                    "metadata": {"source": "loop", "step": k, "parents": {}},
                    "inline": inline,
                    "blob": (blob_type, blob),
                    "version": version,
                    "start_version": versions[0],
                    "node_id": ",".join(nodes_run(ours["versions_seen"], parent_seen))[:255],
                    "next_node_id": ",".join(next_nodes(ours))[:255],
                }
            )


def checkpoint_id_of(index: int, k: int) -> str:
    # Lexicographic order is creation order, as LangGraph's uuid6 ids are.
    return f"1f0{k:05x}-0000-6000-8000-{index:012x}"


CHECKPOINT_COLUMNS = (
    "id", "thread_id", "checkpoint_ns", "checkpoint_id", "parent_checkpoint_id", "checkpoint", "metadata",
    "run_id", "node_id", "next_node_id", "created_at", "updated_at",
)


def checkpoint_rows(index: int, thread_pk: int, first_id: int, templates: CheckpointTemplates):
    ours, theirs, blobs = [], [], []
    created = EPOCH + timedelta(seconds=index * 60)
    tid = thread_key(index)
    for k, step in enumerate(templates.steps):
        cid = checkpoint_id_of(index, k)
        parent = checkpoint_id_of(index, k - 1) if k else ""
        body = dict(step["ours"], id=cid, ts=(created + timedelta(seconds=k)).isoformat())
        at = created + timedelta(seconds=k)
        meta = orjson.dumps(step["metadata"]).decode()
        ours.append(
            (first_id + k, thread_pk, "", cid, parent, orjson.dumps(body).decode(), meta, "",
             step["node_id"], step["next_node_id"], at, at)
        )
        inline = dict(step["inline"], id=cid, ts=body["ts"])
        theirs.append((tid, "", cid, parent or None, None, orjson.dumps(inline).decode(), meta))
        blob_type, blob = step["blob"]
        blobs.append((tid, "", "messages", step["version"], blob_type, blob))
        if k == 0:
            blobs.append((tid, "", "__start__", step["start_version"], "empty", None))
    return ours, theirs, blobs


# --- store ----------------------------------------------------------------------------------------


def namespace_of(n: int) -> tuple[str, str, str]:
    org, rest = divmod(n, USERS_PER_ORG * len(KINDS))
    user, kind = divmod(rest, len(KINDS))
    return (org_key(org), f"user-{org}-{user}", KINDS[kind])


def item_value(n: int, j: int) -> dict[str, Any]:
    return {
        "text": text_for(n * 7 + j),
        "kind": KINDS[n % len(KINDS)],
        "topic": TOPICS[(n + j) % len(TOPICS)],
        "score": (n * 31 + j * 17) % 100,
        "tags": [TOPICS[j % len(TOPICS)], f"batch-{n % 13}"],
    }


ITEM_COLUMNS = ("id", "owner_id", "namespace_path", "depth", "key", "value", "ttl", "expires_at", "created_at", "updated_at")
LG_STORE_COLUMNS = ("prefix", "key", "value", "created_at", "updated_at", "expires_at", "ttl_minutes")


# --- loading --------------------------------------------------------------------------------------


def copy_rows(conn, table: str, columns: Iterable[str], rows: Iterable[tuple]) -> int:
    n = 0
    with conn.cursor() as cur, cur.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)
            n += 1
    return n


@contextmanager
def indexes_dropped(conn, tables: Iterable[str]):
    """Drop the plain secondary indexes of `tables` (constraints stay) and build them again after."""
    tables = list(tables)
    rows = conn.execute(
        """
        SELECT i.indexname, i.indexdef FROM pg_indexes i
        WHERE i.schemaname = 'public' AND i.tablename = ANY(%s)
          AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conname = i.indexname)
        """,
        (tables,),
    ).fetchall()
    for name, _ in rows:
        conn.execute(f'DROP INDEX IF EXISTS "{name}"')
    conn.commit()
    try:
        yield
    except BaseException:
        conn.rollback()
        raise
    finally:
        for _, definition in rows:
            conn.execute(definition.replace("CREATE INDEX ", "CREATE INDEX IF NOT EXISTS ", 1))
        conn.commit()


def _reset_sequence(conn, table: str) -> None:
    conn.execute(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), GREATEST((SELECT max(id) FROM {table}), 1))")


def load_range(
    conn,
    loaded: Loaded,
    *,
    threads: int,
    namespaces: int,
    owners: list[int],
    templates: CheckpointTemplates,
    log: Callable[[str], None] = print,
) -> None:
    """Top the database up to `threads` threads and `namespaces` store namespaces."""
    conn.execute("SET synchronous_commit = off")
    conn.execute("SET maintenance_work_mem = '512MB'")
    # The rows are consistent by construction: skip the per-row foreign-key triggers
    # (needs a superuser; a plain user loads the same rows, only slower).
    try:
        with conn.transaction():
            conn.execute("SET session_replication_role = replica")
    except Exception:
        pass
    first, last = loaded.threads, threads
    # Rows written since the last stage (the benchmark's own saves) took ids from the sequences.
    for attr, table in (("block_id", "sessions_app_block"), ("checkpoint_id", "sessions_app_checkpoint"),
                        ("item_id", "store_app_storeitem")):
        top = conn.execute(f"SELECT coalesce(max(id), 0) FROM {table}").fetchone()[0]
        setattr(loaded, attr, max(getattr(loaded, attr), top))
    conn.commit()

    def thread_pk(index: int) -> int:
        return index + 1

    if last > first:
        started = time.perf_counter()
        with indexes_dropped(conn, ["sessions_app_thread", "sessions_app_block"]):
            threads_chunk: list[tuple] = []
            blocks_chunk: list[tuple] = []
            block_id = loaded.block_id

            def flush_threads():
                # Threads first: the blocks' foreign key points at them.
                copy_rows(conn, "sessions_app_thread", THREAD_COLUMNS, threads_chunk)
                copy_rows(conn, "sessions_app_block", BLOCK_COLUMNS, blocks_chunk)
                threads_chunk.clear(), blocks_chunk.clear()

            for index in range(first, last):
                thread, blocks, block_id = thread_rows(index, owners[index % len(owners)], block_id, thread_pk(index))
                threads_chunk.append(thread)
                blocks_chunk.extend(blocks)
                if len(blocks_chunk) >= 50_000:
                    flush_threads()
            flush_threads()
            loaded.add_count("blocks", block_id - loaded.block_id)
            loaded.add_count("threads", last - first)
            loaded.block_id = block_id
            conn.commit()
        loaded.add_time("threads+blocks", time.perf_counter() - started)
        log(f"  threads {first:,}..{last:,}: {block_id:,} blocks in total, {time.perf_counter() - started:.1f}s")

        started = time.perf_counter()
        tables = ["sessions_app_checkpoint", "checkpoints", "checkpoint_blobs"]
        with indexes_dropped(conn, tables):
            ours_all, theirs_all, blobs_all = [], [], []
            cid = loaded.checkpoint_id

            def flush():
                copy_rows(conn, "sessions_app_checkpoint", CHECKPOINT_COLUMNS, ours_all)
                copy_rows(conn, "checkpoints", ("thread_id", "checkpoint_ns", "checkpoint_id", "parent_checkpoint_id",
                                                "type", "checkpoint", "metadata"), theirs_all)
                copy_rows(conn, "checkpoint_blobs", ("thread_id", "checkpoint_ns", "channel", "version", "type", "blob"),
                          blobs_all)
                ours_all.clear(), theirs_all.clear(), blobs_all.clear()

            for index in range(first, last):
                ours, theirs, blobs = checkpoint_rows(index, thread_pk(index), cid + 1, templates)
                cid += len(ours)
                ours_all.extend(ours), theirs_all.extend(theirs), blobs_all.extend(blobs)
                if len(ours_all) >= 20_000:
                    flush()
            flush()
            loaded.add_count("checkpoints", cid - loaded.checkpoint_id)
            loaded.checkpoint_id = cid
            conn.commit()
        # Each thread's status on its row, as the checkpoints' writes keep it (COPY leaves the default).
        from sessions_app.checkpoints.status import status_refresh

        status_refresh(thread_pk(index) for index in range(first, last))
        loaded.add_time("checkpoints", time.perf_counter() - started)
        log(f"  checkpoints: {cid:,} in total (and as many in PostgresSaver), {time.perf_counter() - started:.1f}s")
        loaded.threads = last

    if namespaces > loaded.namespaces:
        started = time.perf_counter()
        with indexes_dropped(conn, ["store_app_storeitem", "store"]):
            ours, theirs = [], []
            item_id = loaded.item_id
            for n in range(loaded.namespaces, namespaces):
                namespace = namespace_of(n)
                path = ".".join(namespace)
                owner = owners[n // (USERS_PER_ORG * len(KINDS)) % len(owners)]
                for j in range(ITEMS_PER_NAMESPACE):
                    item_id += 1
                    value = orjson.dumps(item_value(n, j)).decode()
                    at = EPOCH + timedelta(seconds=n * 10 + j)
                    key = f"k-{j:02d}"
                    ours.append((item_id, owner, path, len(namespace), key, value, None, None, at, at))
                    theirs.append((path, key, value, at, at, None, None))
                if len(ours) >= 50_000:
                    copy_rows(conn, "store_app_storeitem", ITEM_COLUMNS, ours)
                    copy_rows(conn, "store", LG_STORE_COLUMNS, theirs)
                    ours, theirs = [], []
            copy_rows(conn, "store_app_storeitem", ITEM_COLUMNS, ours)
            copy_rows(conn, "store", LG_STORE_COLUMNS, theirs)
            loaded.add_count("store items", item_id - loaded.item_id)
            loaded.add_count("namespaces", namespaces - loaded.namespaces)
            loaded.item_id = item_id
            conn.commit()
        loaded.add_time("store", time.perf_counter() - started)
        log(f"  store: {item_id:,} items in {namespaces:,} namespaces (and in PostgresStore), "
            f"{time.perf_counter() - started:.1f}s")
        loaded.namespaces = namespaces

    started = time.perf_counter()
    for table in ("sessions_app_thread", "sessions_app_block", "sessions_app_checkpoint", "store_app_storeitem"):
        _reset_sequence(conn, table)
    conn.commit()
    conn.autocommit = True
    try:
        conn.execute("VACUUM ANALYZE")
    finally:
        conn.autocommit = False
    loaded.add_time("vacuum analyze", time.perf_counter() - started)
    log(f"  vacuum analyze: {time.perf_counter() - started:.1f}s")


def seed_users(count: int) -> tuple[list, Any]:
    """`count` members who own the data, and an admin (who reads everything)."""
    from django.contrib.auth import get_user_model

    from memoryadmin import roles

    User = get_user_model()
    members = []
    for i in range(count):
        user = User.objects.create_user(username=f"member-{i:03d}")
        roles.role_set(user, "member")
        members.append(user)
    admin = User.objects.create_user(username="bench-admin")
    roles.role_set(admin, "admin")
    return members, admin


def rng(seed: int = 7) -> random.Random:
    return random.Random(seed)
