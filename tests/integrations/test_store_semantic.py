"""Semantic search and batches held to LangGraph's own `InMemoryStore`, against a live memoryadmin.

The same embed function (store_app.embedders.hashing at 256 dimensions, a real
feature-hashing embedder) and the same data go into `InMemoryStore(index=...)`
and into `MemoryAdminStore(index=...)` (embedding on the client) or into the
server (embedding there, through langgraph-sdk's plain text calls): every
query must come back in the same order with the same scores, within float32
rounding, prefixes and filters combined.
"""

from __future__ import annotations

import asyncio
import functools
import math
import time

import httpx
import pytest
from django.test import override_settings
from langgraph.store.base import GetOp, ListNamespacesOp, MatchCondition, PutOp, SearchOp
from langgraph.store.memory import InMemoryStore
from langgraph_sdk import get_sync_client

from memoryadmin.apikeys import apikey_create
from memoryadmin_client.langgraph import MemoryAdminStore, StoreInvalidError
from store_app.embedders import hashing
from store_app.models import StoreItem, StoreVector

pytestmark = pytest.mark.django_db(transaction=True)

DIMS = 256
embed = functools.partial(hashing, dims=DIMS)
WORDS = (
    "tea coffee water juice wine beer milk soda travel train plane walk hotel museum beach mountain "
    "chess music piano guitar book novel poem movie garden flower tree river city osaka paris rome"
).split()


def value_for(i: int) -> dict:
    """Distinct texts (the item's number is a word of it), so that no two items tie on a score."""
    words = [WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(4)]
    return {
        "text": f"item{i} likes {' '.join(words)}",
        "title": f"{words[0]} and {words[-1]} number{i}",
        "tags": [f"{words[1]} tag{i}", f"{words[2]} label{i}"],
        "kind": ("fact", "preference", "event")[i % 3],
        "n": i,
    }


def put_ops(count: int) -> list[PutOp]:
    ops = []
    for i in range(count):
        namespace = ("docs", f"u{i % 5}", f"t{i % 3}")
        if i % 11 == 0:
            ops.append(PutOp(namespace, f"k{i}", value_for(i), index=False))  # listed, never scored
        elif i % 7 == 0:
            ops.append(PutOp(namespace, f"k{i}", value_for(i), index=["title"]))
        else:
            ops.append(PutOp(namespace, f"k{i}", value_for(i)))
    return ops


INDEX = {"dims": DIMS, "embed": embed, "fields": ["text", "tags[*]"]}


def reference(ops: list[PutOp]) -> InMemoryStore:
    store = InMemoryStore(index=INDEX)
    for op in ops:  # one put at a time: InMemoryStore cannot embed two equal texts in one batch
        store.batch([op])
    return store


def assert_same(ours, theirs, *, tolerance: float = 1e-5) -> None:
    """Same items in the same order with the same scores (within float32 rounding); unscored as a set.

    Items whose scores tie may come in another order (LangGraph keeps insertion
    order among equals, memoryadmin puts the newest first), so each run of
    equal scores is compared as a set; a run cut by the page's edge may hold
    other items of that same score.
    """
    scored = [(item.namespace, item.key, item.score) for item in ours if item.score is not None]
    expected = [(item.namespace, item.key, item.score) for item in theirs if item.score is not None]
    assert len(ours) == len(theirs)
    assert len(scored) == len(expected)
    assert all(a[2] >= b[2] - tolerance for a, b in zip(scored, scored[1:]))
    for (_, key, score), (_, want_key, want_score) in zip(scored, expected, strict=True):
        assert math.isclose(score, want_score, abs_tol=tolerance), (key, score, want_key, want_score)
    runs: list[list[int]] = []
    for position, (_, _, score) in enumerate(expected):
        if runs and math.isclose(expected[runs[-1][0]][2], score, abs_tol=tolerance):
            runs[-1].append(position)
        else:
            runs.append([position])
    for number, run in enumerate(runs):
        if number in (0, len(runs) - 1):
            continue  # the page's edges may cut a run: other items of that score are outside
        assert {scored[i][:2] for i in run} == {expected[i][:2] for i in run}
    unscored = {(item.namespace, item.key) for item in ours if item.score is None}
    assert unscored == {(item.namespace, item.key) for item in theirs if item.score is None}


@pytest.fixture
def key_for(db):
    def make(user):
        return apikey_create(owner=user).plaintext

    return make


@pytest.fixture
def indexed_store(live_server, alice, key_for):
    store = MemoryAdminStore(live_server.url, key_for(alice), index=INDEX)
    yield store
    store.close()


QUERIES = [
    (("docs",), "item5 likes tea coffee water", None, 10, 0),
    (("docs",), "item40 a train to the mountain hotel", None, 25, 5),
    (("docs", "u1"), "item21 piano music guitar", None, 10, 0),
    (("docs",), "item300 osaka city river", {"kind": "fact"}, 10, 0),
    (("docs", "u2"), "garden flower tree number702", {"n": {"$gte": 500}}, 15, 3),
    (("docs", "u3", "t1"), "novel poem book item828", {"kind": {"$ne": "event"}}, 10, 0),
    (("docs",), "item123 likes", None, 5, 0),
]


def test_semantic_search_ranks_as_langgraphs_in_memory_store_over_a_thousand_items(indexed_store):
    ops = put_ops(1000)
    for start in range(0, len(ops), 100):
        indexed_store.batch(ops[start : start + 100])
    theirs = reference(ops)
    # Every indexed field path of LangGraph's, one vector each: text and the two tags, or the title alone.
    expected_vectors = sum(0 if op.index is False else 1 if op.index else 3 for op in ops)
    assert StoreVector.objects.count() == expected_vectors
    for prefix, query, flt, limit, offset in QUERIES:
        ours = indexed_store.search(prefix, query=query, filter=flt, limit=limit, offset=offset)
        want = theirs.search(prefix, query=query, filter=flt, limit=limit, offset=offset)
        assert ours, (prefix, query)
        assert_same(ours, want)


def test_items_without_a_vector_follow_the_scored_ones_as_in_langgraph(indexed_store):
    ops = put_ops(40)
    indexed_store.batch(ops)
    theirs = reference(ops)
    # u0/t0 holds items 0 (index=False), 15 and 30: all of them fit on one page.
    ours = indexed_store.search(("docs", "u0", "t0"), query="tea", limit=10)
    want = theirs.search(("docs", "u0", "t0"), query="tea", limit=10)
    assert_same(ours, want)
    assert [item.key for item in ours if item.score is None] == ["k0"]
    assert ours[-1].key == "k0"


def test_async_puts_embed_in_one_call_per_batch_and_search_the_same(live_server, alice, key_for):
    calls = []

    async def aembed(texts):
        calls.append(len(texts))
        return embed(texts)

    store = MemoryAdminStore(live_server.url, key_for(alice), index={**INDEX, "embed": aembed})
    ops = put_ops(30)

    async def run():
        try:
            await store.abatch(ops)
            return await store.asearch(("docs",), query="walk to the beach", limit=12)
        finally:
            await store.aclose()

    from tests.integrations.test_store_graph import run_in_new_loop

    ours = run_in_new_loop(run)
    assert calls[0] == len({text for op in ops if op.index is not False for text in _texts(op)})
    assert_same(ours, reference(ops).search(("docs",), query="walk to the beach", limit=12))


def _texts(op: PutOp) -> list[str]:
    from langgraph.store.base import get_text_at_path

    paths = op.index or INDEX["fields"]
    return [text for path in paths for text in get_text_at_path(op.value, path)]


def test_a_put_replaces_the_items_vectors_and_index_false_removes_them(indexed_store):
    namespace = ("docs", "one")
    indexed_store.put(namespace, "k", {"text": "green tea", "tags": ["a", "b"]})
    assert sorted(StoreVector.objects.values_list("path", flat=True)) == ["tags[*].0", "tags[*].1", "text"]
    indexed_store.put(namespace, "k", {"text": "black coffee"}, index=["text"])
    assert list(StoreVector.objects.values_list("path", flat=True)) == ["text"]
    indexed_store.put(namespace, "k", {"text": "no vector now"}, index=False)
    assert not StoreVector.objects.exists()
    [found] = indexed_store.search(namespace, query="coffee")
    assert found.key == "k" and found.score is None
    indexed_store.put(namespace, "k", {"text": "again"})
    indexed_store.delete(namespace, "k")
    assert not StoreVector.objects.exists()


def test_without_an_index_a_query_still_lists_every_item_under_the_prefix(live_server, alice, key_for):
    plain = MemoryAdminStore(live_server.url, key_for(alice))
    theirs = InMemoryStore()
    try:
        for key, text in (("tea", "likes green tea"), ("car", "drives a blue car"), ("walk", "walks to work")):
            plain.put(("prefs",), key, {"text": text})
            theirs.put(("prefs",), key, {"text": text})
        ours = plain.search(("prefs",), query="beverage preferences")
        assert {item.key for item in ours} == {item.key for item in theirs.search(("prefs",), query="beverage preferences")}
        ranked = plain.search(("prefs",), query="green tea")
        assert [item.key for item in ranked][0] == "tea" and ranked[0].score > 0
        assert [item.score for item in ranked[1:]] == [0.0, 0.0]
    finally:
        plain.close()


@override_settings(
    MEMORYADMIN_STORE_EMBEDDER="store_app.embedders.hashing", MEMORYADMIN_STORE_EMBED_DIMS=DIMS,
    MEMORYADMIN_STORE_EMBED_FIELDS=["text"],
)
def test_the_server_embeds_for_clients_that_send_text_only(live_server, alice, key_for):
    """langgraph-sdk's put_item(index=...) and search_items(query=...), as against LangGraph's Agent Server."""
    client = get_sync_client(url=live_server.url + "/api/v1", api_key=key_for(alice))
    theirs = InMemoryStore(index={"dims": DIMS, "embed": embed, "fields": ["text"]})
    try:
        for i in range(60):
            namespace = ["notes", f"g{i % 3}"]
            value = value_for(i)
            index = False if i % 13 == 0 else (["title"] if i % 5 == 0 else None)
            client.store.put_item(namespace, key=f"k{i}", value=value, index=index)
            theirs.put(tuple(namespace), f"k{i}", value, index=index)
        for prefix, query, flt in ((["notes"], "tea and travel", None), (["notes", "g1"], "chess", {"kind": "fact"})):
            ours = client.store.search_items(prefix, query=query, filter=flt, limit=20)["items"]
            want = theirs.search(tuple(prefix), query=query, filter=flt, limit=20)
            as_items = [
                type("Found", (), {"namespace": tuple(row["namespace"]), "key": row["key"], "score": row["score"]})
                for row in ours
            ]
            assert_same(as_items, want)
        # A text-only MemoryAdminStore gets the server's ranking too.
        plain = MemoryAdminStore(live_server.url, key_for(alice))
        try:
            assert_same(plain.search(("notes",), query="tea and travel", limit=20), theirs.search(("notes",), query="tea and travel", limit=20))
        finally:
            plain.close()
    finally:
        client.close()


def test_a_mixed_batch_answers_as_langgraphs_in_memory_store(indexed_store):
    before = put_ops(12)
    indexed_store.batch(before)
    theirs = reference(before)
    namespace = ("docs", "u1", "t1")
    ops = [
        GetOp(namespace, "k1"),
        PutOp(namespace, "k1", {"text": "rewritten once"}),
        GetOp(namespace, "k1"),
        PutOp(namespace, "fresh", {"text": "a new item about chess"}),
        SearchOp(("docs",), query="chess", limit=5),
        PutOp(namespace, "k1", {"text": "rewritten twice, the last put of k1"}),
        ListNamespacesOp(match_conditions=(MatchCondition("prefix", ("docs",)),), max_depth=2),
        PutOp(("docs", "u2", "t2"), "k2", None),
        GetOp(("docs", "u2", "t2"), "k2"),
        SearchOp(("docs", "u2"), filter={"kind": "event"}),
    ]
    ours, want = indexed_store.batch(ops), theirs.batch(ops)
    for op, mine, expected in zip(ops, ours, want, strict=True):
        if isinstance(op, GetOp):
            assert (mine.value if mine else None) == (expected.value if expected else None)
        elif isinstance(op, SearchOp) and op.query:
            assert_same(mine, expected)
        elif isinstance(op, SearchOp):
            assert {(i.namespace, i.key) for i in mine} == {(i.namespace, i.key) for i in expected}
        else:
            assert mine == expected
    # After the batch, both stores hold the same items with the same values.
    after = [GetOp(namespace, "k1"), GetOp(namespace, "fresh"), GetOp(("docs", "u2", "t2"), "k2")]
    assert [i.value if i else None for i in indexed_store.batch(after)] == [i.value if i else None for i in theirs.batch(after)]
    assert_same(indexed_store.search(("docs",), query="last put", limit=20), theirs.search(("docs",), query="last put", limit=20))


def test_an_atomic_batch_with_a_refused_operation_writes_nothing(indexed_store, live_server, bob, key_for):
    bobs = MemoryAdminStore(live_server.url, key_for(bob))
    try:
        bobs.put(("users", "bob"), "pin", {"pin": "1234"})
    finally:
        bobs.close()
    from memoryadmin_client.langgraph import StoreForbiddenError

    with pytest.raises(StoreForbiddenError):
        indexed_store.batch([PutOp(("docs",), "mine", {"text": "x"}), PutOp(("users", "bob"), "pin", {"pin": "0"})])
    assert indexed_store.get(("docs",), "mine") is None
    with pytest.raises(StoreInvalidError) as invalid:
        indexed_store.batch([PutOp(("docs",), "mine", {"text": "x"}), SearchOp(("docs",), filter={"n": {"$regex": "1"}})])
    assert "ops[1].filter" in invalid.value.errors
    assert indexed_store.get(("docs",), "mine") is None


def test_a_nan_filter_is_the_clients_invalid_input_error(indexed_store):
    for bad in (float("nan"), float("inf"), -float("inf")):
        with pytest.raises(StoreInvalidError) as refused:
            indexed_store.search(("docs",), filter={"n": {"$gt": bad}})
        assert "filter" in refused.value.errors


class CountingTransport(httpx.AsyncHTTPTransport):
    def __init__(self) -> None:
        super().__init__()
        self.requests = 0

    async def handle_async_request(self, request):
        self.requests += 1
        return await super().handle_async_request(request)


def test_ten_thousand_concurrent_async_calls_finish_in_few_requests(live_server, alice, key_for):
    """As LangGraph's async stores do: concurrent calls are queued and sent together, with bounded connections."""
    transport = CountingTransport()
    store = MemoryAdminStore(live_server.url, key_for(alice), async_transport=transport)
    calls = 10_000

    async def one(i):
        namespace = ("load", f"n{i % 10}")
        if i % 5 in (0, 1):
            return await store.aput(namespace, f"k{i}", {"i": i})
        if i % 5 in (2, 3):
            return await store.aget(namespace, f"k{i - 2}")
        return await store.asearch(namespace, limit=2)

    async def run():
        try:
            return await asyncio.wait_for(asyncio.gather(*(one(i) for i in range(calls)), return_exceptions=True), 240)
        finally:
            await store.aclose()

    from tests.integrations.test_store_graph import run_in_new_loop

    started = time.monotonic()
    answers = run_in_new_loop(run)
    elapsed = time.monotonic() - started
    assert [a for a in answers if isinstance(a, BaseException)] == []
    assert len(answers) == calls
    assert StoreItem.objects.filter(namespace_path__startswith="load.").count() == calls * 2 // 5
    # 100 operations a request: a hundred requests or so, never one per call.
    assert transport.requests <= calls // 100 + 10, transport.requests
    assert elapsed < 240
