"""Search under a prefix and the tree's levels answer as the rules say, whatever the plan.

On PostgreSQL a search with a prefix and a filter or a query reads the subtree
first, and a tree level walks the namespace index from one child to the next
and counts the items of one page of children only. These tests hold both to
a plain-Python reading of the rules (visibility, TTL, whole-label prefixes,
code point order) on a store with several owners, expired items and labels
whose dotted paths sort differently from the labels themselves ("a-b.x" sorts
before "a.x", "a" before both). They run on SQLite and on PostgreSQL.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from memoryadmin import policy
from store_app import matching, selectors
from store_app.expressions import TextMatch, TextScore, ValueFilter
from store_app.models import StoreItem

from tests.conftest import make_user

TOPICS = ("travel", "food", "work")
# Root labels: "a", "a b", "a-b", "a!" and "a+c" sort around "a." in paths;
# upper case, digits and non-ASCII test code point order; "user_1" and
# "userX1" test that "_" is no wildcard.
ROOTS = ("a", "a b", "a-b", "a!", "a+c", "B", "b", "org-1", "org-10", "org-1-x", "user_1", "userX1", "é", "日本")
CHILDREN = ("x", "x-y", "x y", "y")


@pytest.fixture
def carol(db):
    return make_user("carol")


@pytest.fixture
def store(alice, bob, carol):
    """Items over every root: some at the root label itself, some two or three labels down, a third with a TTL."""
    owners = (alice, bob, carol)
    t0 = timezone.now() - timedelta(hours=1)
    items = []
    n = 0
    for r, root in enumerate(ROOTS):
        namespaces = [(root,)] + [(root, child) for child in CHILDREN] + [(root, "x", "deep"), (root, "x-y", "z", "w")]
        for namespace in namespaces:
            for k in range(2):
                n += 1
                owner = owners[(r + len(namespace) + k) % len(owners)]
                ttl = 5 if n % 4 == 1 else None
                at = t0 + timedelta(seconds=n * 7 % 301)  # not in insertion order; some ties
                items.append(
                    StoreItem(
                        owner=owner,
                        namespace_path=".".join(namespace),
                        depth=len(namespace),
                        key=f"k{k}",
                        value={"topic": TOPICS[n % len(TOPICS)], "n": n, "text": f"note {TOPICS[n % 2]} number {n}"},
                        ttl=timedelta(minutes=ttl) if ttl else None,
                        expires_at=t0 + timedelta(hours=1, minutes=ttl) if ttl else None,
                        created_at=at,
                        updated_at=at,
                    )
                )
    StoreItem.objects.bulk_create(items)
    return list(StoreItem.objects.all())


# Now, when every item is live, and ten minutes on, when a third has expired.
NOW_OFFSETS = (timedelta(0), timedelta(minutes=10))


def _actors(request):
    return [request.getfixturevalue(name) for name in ("alice", "bob", "operator", "admin_user")]


def _seen(items, actor, now, namespace=()):
    path = ".".join(namespace)
    return [
        item
        for item in items
        if policy.may_read(actor, item.owner_id, "store.read")
        and (item.expires_at is None or item.expires_at > now)
        and (not namespace or item.namespace_path == path or item.namespace_path.startswith(path + "."))
    ]


def _expected_children(items, actor, now, namespace):
    depth = len(namespace)
    groups: dict[str, tuple[int, int]] = {}
    for item in _seen(items, actor, now, namespace):
        if item.depth > depth:
            label = item.namespace_path.split(".")[depth]
            count, deepest = groups.get(label, (0, 0))
            groups[label] = (count + 1, max(deepest, item.depth))
    return [((*namespace, label), count, deepest > depth + 1) for label, (count, deepest) in sorted(groups.items())]


def _children(actor, namespace, now, **page):
    nodes, more = selectors.store_namespace_children(actor=actor, namespace=namespace, now=now, **page)
    return [(node.namespace, node.items, node.has_children) for node in nodes], more


@pytest.mark.parametrize("namespace", [(), ("a",), ("a-b",), ("a", "x-y"), ("org-1",), ("missing",)])
def test_tree_levels_follow_the_rules(request, store, namespace):
    base = timezone.now()
    for actor in _actors(request):
        for offset in NOW_OFFSETS:
            now = base + offset
            expected = _expected_children(store, actor, now, namespace)
            assert _children(actor, namespace, now) == (expected, False), (actor.username, offset)


def test_tree_levels_page_in_label_order(request, store):
    now = timezone.now() + timedelta(minutes=10)
    for actor in _actors(request):
        expected = _expected_children(store, actor, now, ())
        assert len(expected) == len(ROOTS)  # every root keeps a live, visible item for each actor
        for limit in (1, 3, 5):
            for offset in range(0, len(expected) + 2, limit):
                page = expected[offset : offset + limit]
                more = len(expected) > offset + limit
                assert _children(actor, (), now, limit=limit, offset=offset) == (page, more)


def test_a_root_label_is_ordered_by_code_point_not_by_path():
    # What the fixture relies on: paths and labels sort differently around ".".
    assert sorted(["a.x", "a-b.x", "a"]) == ["a", "a-b.x", "a.x"]
    assert sorted(["a", "a-b"]) == ["a", "a-b"]


def test_a_member_tree_shows_only_their_own_labels(alice, bob):
    StoreItem.objects.bulk_create(
        [
            StoreItem(owner=alice, namespace_path="mine.x", depth=2, key="k", value={}),
            StoreItem(owner=bob, namespace_path="theirs.x", depth=2, key="k", value={}),
            StoreItem(owner=bob, namespace_path="mine.y", depth=2, key="k", value={}),
        ]
    )
    assert _children(alice, (), None) == ([(("mine",), 1, True)], False)
    assert _children(bob, (), None) == ([(("mine",), 1, True), (("theirs",), 1, True)], False)
    assert _children(alice, ("mine",), None) == ([(("mine", "x"), 1, False)], False)


def test_a_label_whose_items_have_all_expired_disappears(alice):
    past = timezone.now() - timedelta(minutes=1)
    StoreItem.objects.bulk_create(
        [
            StoreItem(owner=alice, namespace_path="gone.x", depth=2, key=f"k{i}", value={}, expires_at=past)
            for i in range(5)
        ]
        + [StoreItem(owner=alice, namespace_path="kept", depth=1, key="k", value={})]
    )
    assert _children(alice, (), None) == ([(("kept",), 1, False)], False)


def _search(actor, prefix, now, **kwargs):
    request = selectors.store_search_validate(namespace_prefix=list(prefix), **kwargs)
    return selectors.store_item_search(actor=actor, request=request, now=now)


@pytest.mark.parametrize("prefix", [("a",), ("a-b",), ("a", "x"), ("org-1",), ("user_1",), ("日本", "x-y")])
@pytest.mark.parametrize("flt", [{"topic": "travel"}, {"topic": {"$ne": "food"}, "n": {"$gt": 5}}])
def test_a_search_under_a_prefix_with_a_filter_follows_the_rules(request, store, prefix, flt):
    conditions = matching.filter_validate(flt)
    base = timezone.now()
    for actor in _actors(request):
        for offset in NOW_OFFSETS:
            now = base + offset
            seen = _seen(store, actor, now, prefix)
            matched = [item for item in seen if matching.conditions_hold(item.value, conditions)]
            expected = [item.pk for item in sorted(matched, key=lambda item: (item.updated_at, item.pk), reverse=True)]
            assert expected or not policy.may_administer(actor), "the fixture must give every search something to find"
            for limit, skip in ((1000, 0), (3, 0), (3, 2)):
                found = _search(actor, prefix, now, filter=flt, limit=limit, offset=skip)
                assert [item.pk for item in found] == expected[skip : skip + limit], (actor.username, offset)
                assert all(item.score is None for item in found)


@pytest.mark.parametrize("prefix", [("a",), ("a", "x-y"), ("org-10",)])
def test_a_search_under_a_prefix_with_a_query_answers_as_the_plain_query(request, store, prefix):
    """Same items, scores and order as the query without the subtree read first."""
    search = selectors.store_search_validate(
        namespace_prefix=list(prefix), filter={"topic": "work"}, query="travel number", limit=1000
    )
    for actor in _actors(request):
        for offset in NOW_OFFSETS:
            now = timezone.now() + offset
            plain = list(
                StoreItem.objects.visible_to(actor)
                .live(now)
                .under(prefix)
                .filter(ValueFilter(search.filter_spec))
                .annotate(score=TextScore(search.terms))
                .filter(TextMatch(search.terms))
                .order_by("-score", "-updated_at", "-id")[:1000]
            )
            found = selectors.store_item_search(actor=actor, request=search, now=now)
            assert found or not policy.may_administer(actor), "the fixture must give every search something to find"
            assert [(item.pk, item.score) for item in found] == [(item.pk, item.score) for item in plain]


def test_search_and_tree_levels_cost_the_same_number_of_queries_as_the_store_grows(
    alice, admin_user, django_assert_num_queries
):
    def grow(start, count):
        StoreItem.objects.bulk_create(
            [
                StoreItem(
                    owner=alice, namespace_path=f"org-{i % 7}.u-{i}.k", depth=3, key="k", value={"topic": "travel"}
                )
                for i in range(start, start + count)
            ]
        )

    def operations():
        for actor in (alice, admin_user):
            _search(actor, ("org-1",), None, filter={"topic": "travel"}, limit=5)
            _search(actor, ("org-1",), None, query="travel", limit=5)
            selectors.store_namespace_children(actor=actor, namespace=())
            selectors.store_namespace_children(actor=actor, namespace=("org-1",), limit=3)

    grow(0, 20)
    operations()
    with CaptureQueriesContext(connection) as small:
        operations()
    store_queries = [q for q in small.captured_queries if "store_app_storeitem" in q["sql"]]
    assert len(store_queries) == 8  # one statement per call
    grow(20, 400)
    with django_assert_num_queries(len(small)):
        operations()


def _expected_listing(items, actor, now, prefix, depth):
    heads = {".".join(item.namespace_path.split(".")[:depth]) for item in _seen(items, actor, now, prefix)}
    return [tuple(path.split(".")) for path in sorted(heads)]


@pytest.mark.parametrize("prefix", [(), ("a",), ("a-b",), ("a", "x-y"), ("org-1",), ("missing",)])
def test_listing_one_level_below_a_prefix_follows_the_rules(request, store, prefix):
    """list_namespaces with max_depth one past the prefix: the prefix itself too when it holds items."""
    base = timezone.now()
    for actor in _actors(request):
        for offset in NOW_OFFSETS:
            now = base + offset
            expected = _expected_listing(store, actor, now, prefix, len(prefix) + 1)
            listed = selectors.store_namespace_list(
                actor=actor, prefix=list(prefix), max_depth=len(prefix) + 1, limit=1000, now=now
            )
            assert listed == expected, (actor.username, offset)
            for limit in (1, 4):
                for skip in range(0, len(expected) + 2, limit):
                    page = selectors.store_namespace_list(
                        actor=actor, prefix=list(prefix), max_depth=len(prefix) + 1, limit=limit, offset=skip, now=now
                    )
                    assert page == expected[skip : skip + limit]


def test_listing_one_level_below_a_prefix_costs_one_query_as_the_store_grows(alice, admin_user):
    def grow(start, count):
        StoreItem.objects.bulk_create(
            [
                StoreItem(owner=alice, namespace_path=f"org-{i}.u.k", depth=3, key="k", value={})
                for i in range(start, start + count)
            ]
        )

    def listing():
        for actor in (alice, admin_user):
            selectors.store_namespace_list(actor=actor, max_depth=1, limit=1000)
            selectors.store_namespace_list(actor=actor, prefix=["org-1"], max_depth=2)

    grow(0, 10)
    listing()
    with CaptureQueriesContext(connection) as small:
        listing()
    grow(10, 300)
    with CaptureQueriesContext(connection) as big:
        listing()
    assert len([q for q in small.captured_queries if "store_app_storeitem" in q["sql"]]) == 4
    assert len(big.captured_queries) == len(small.captured_queries)
