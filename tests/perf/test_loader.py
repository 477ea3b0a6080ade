"""The benchmark's bulk loader writes data the services accept as their own.

COPYed threads carry valid hash chains (a save appends, it does not rewrite),
consistent counters and compaction history; COPYed checkpoints read back through
memoryadmin and through LangGraph's PostgresSaver; store items through both stores.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import psycopg
import pytest
from django.db import connection

from sessions_app.checkpoints.langgraph import thread_state
from sessions_app.checkpoints.selectors import checkpoint_get
from sessions_app.models import Block, Thread
from sessions_app.threads.selectors import thread_agent_state
from sessions_app.threads.services import thread_save_agent_state
from store_app.selectors import store_item_search, store_namespace_children, store_search_validate

from ..conftest import IS_POSTGRES

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import loader  # noqa: E402

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif(not IS_POSTGRES, reason="the loader COPYs into PostgreSQL"),
    pytest.mark.django_db(transaction=True),
]
THREADS = 6
NAMESPACES = 40  # one org: 10 users x 4 kinds


def _url() -> str:
    """The test database's URL for LangGraph's own savers. Behind a transaction pooler they
    go to PostgreSQL itself (POSTGRES_DIRECT_PORT, set by .ci/pgbouncer.sh): they prepare
    statements, which PgBouncer's transaction mode does not carry from one server
    connection to the next."""
    db = connection.settings_dict
    auth = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
    port = os.environ.get("POSTGRES_DIRECT_PORT") or db["PORT"] or 5432
    return f"postgresql://{auth}@{db['HOST'] or '127.0.0.1'}:{port}/{db['NAME']}"


@pytest.fixture
def loaded():
    postgres = pytest.importorskip("langgraph.checkpoint.postgres")
    store_mod = pytest.importorskip("langgraph.store.postgres")
    url = _url()
    with postgres.PostgresSaver.from_conn_string(url) as saver:
        saver.setup()
        templates = loader.CheckpointTemplates(saver)
    with store_mod.PostgresStore.from_conn_string(url) as store:
        store.setup()
    members, admin = loader.seed_users(2)
    with psycopg.connect(url) as conn:
        for table in ("checkpoints", "checkpoint_blobs", "checkpoint_writes", "store"):
            conn.execute(f"TRUNCATE {table}")
        conn.commit()
        state = loader.Loaded()
        loader.load_range(conn, state, threads=THREADS, namespaces=NAMESPACES, owners=[u.pk for u in members],
                          templates=templates, log=lambda _: None)
    return {"members": members, "admin": admin, "url": url, "state": state}


def owner_of(loaded, index):
    return loaded["members"][index % len(loaded["members"])]


def test_loaded_threads_have_consistent_counters_and_history(loaded):
    assert Thread.objects.count() == THREADS
    assert Block.objects.count() == THREADS * loader.BLOCKS_PER_THREAD
    for thread in Thread.objects.all():
        blocks = Block.objects.filter(thread=thread)
        assert thread.last_seq == max(blocks.values_list("seq", flat=True))
        assert thread.active_count == blocks.filter(archived=False).count()
        assert thread.archived_count == blocks.filter(archived=True).count()
        assert sorted(set(blocks.filter(archived=True).values_list("archived_by", flat=True))) == list(
            range(1, thread.rewrite_count + 1)
        )
        positions = list(blocks.filter(archived=False).order_by("seq").values_list("position", flat=True))
        assert positions == list(range(thread.active_count))


@pytest.mark.parametrize("index", [0, 1, 2])  # no compaction, one, two
def test_a_save_appends_to_a_loaded_thread(loaded, index):
    owner = owner_of(loaded, index)
    thread_id = loader.thread_key(index)
    context = loader.thread_generations(index)[-1]
    assert thread_agent_state(actor=owner, thread_id=thread_id).context == context
    turn = [{"role": "user", "content": "and now?"}, {"role": "assistant", "content": "now this."}]
    agent = loader.AGENTS[index % len(loader.AGENTS)]
    result = thread_save_agent_state(actor=owner, thread_id=thread_id, agent_code=agent, context=context + turn)
    assert (result.mode, result.appended, result.archived) == ("append", 2, 0)
    assert result.max_seq == loader.BLOCKS_PER_THREAD + 2


def test_saving_an_archived_context_again_is_a_rewrite(loaded):
    owner = owner_of(loaded, 2)
    first = loader.thread_generations(2)[0]
    agent = loader.AGENTS[2]
    result = thread_save_agent_state(actor=owner, thread_id=loader.thread_key(2), agent_code=agent, context=first)
    assert result.mode == "rewrite" and result.archived == 30
    assert Thread.objects.get(thread_id=loader.thread_key(2)).rewrite_count == 3


def test_loaded_checkpoints_read_back_in_memoryadmin_and_in_postgres_saver(loaded):
    from langgraph.checkpoint.postgres import PostgresSaver

    owner = owner_of(loaded, 3)
    thread_id = loader.thread_key(3)
    latest = checkpoint_get(actor=owner, thread_id=thread_id)
    last = loader.CHECKPOINTS_PER_THREAD - 1
    assert latest.checkpoint_id == loader.checkpoint_id_of(3, last)
    assert latest.parent_checkpoint_id == loader.checkpoint_id_of(3, last - 1)
    state = thread_state(actor=owner, thread_id=thread_id)
    assert state["values"]["step"] == last
    assert len(state["values"]["messages"]) == loader.WINDOW
    with PostgresSaver.from_conn_string(loaded["url"]) as saver:
        found = saver.get_tuple({"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}})
        assert found.checkpoint["id"] == latest.checkpoint_id
        assert found.checkpoint["channel_values"]["step"] == last
        assert [m.content for m in found.checkpoint["channel_values"]["messages"]] == [
            m["kwargs"]["content"] for m in latest.checkpoint["channel_values"]["messages"]
        ]
        history = list(saver.list({"configurable": {"thread_id": thread_id}}))
        assert len(history) == loader.CHECKPOINTS_PER_THREAD


def test_loaded_store_items_read_back_in_both_stores(loaded):
    from langgraph.store.postgres import PostgresStore

    owner = owner_of(loaded, 0)
    org = loader.org_key(0)
    request = store_search_validate(namespace_prefix=[org], filter={"topic": "travel"}, limit=100)
    ours = store_item_search(actor=owner, request=request)
    nodes, more = store_namespace_children(actor=loaded["admin"], namespace=(org,))
    assert [n.items for n in nodes] == [len(loader.KINDS) * loader.ITEMS_PER_NAMESPACE] * loader.USERS_PER_ORG
    assert not more and all(n.has_children for n in nodes)
    with PostgresStore.from_conn_string(loaded["url"]) as store:
        theirs = store.search((org,), filter={"topic": "travel"}, limit=100)
        assert {(i.namespace, i.key) for i in theirs} == {(i.namespace, i.key) for i in ours}
        assert len(ours) == NAMESPACES * loader.ITEMS_PER_NAMESPACE // len(loader.TOPICS)
