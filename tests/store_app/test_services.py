"""The store's rules, on the services and selectors directly (docs/store.md, rules ST1-ST9)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from memoryadmin.errors import Forbidden, InvalidInput
from memoryadmin.models import AuditEvent
from store_app import selectors, services
from store_app.models import StoreItem


def put(actor, namespace, key, value, **kwargs):
    return services.store_item_put(actor=actor, namespace=list(namespace), key=key, value=value, **kwargs)


def search(actor, prefix=(), **kwargs):
    now = kwargs.pop("now", None)
    request = selectors.store_search_validate(namespace_prefix=list(prefix), **kwargs)
    return selectors.store_item_search(actor=actor, request=request, now=now)


def keys(items):
    return [item.key for item in items]


# put / get / delete


def test_put_creates_an_item_owned_by_its_writer(alice):
    put(alice, ["users", "alice", "preferences"], "language", {"language": "zh-CN"})
    item = StoreItem.objects.get()
    assert item.owner == alice
    assert item.namespace == ("users", "alice", "preferences")
    assert item.namespace_path == "users.alice.preferences"
    assert item.depth == 3
    assert item.value == {"language": "zh-CN"}
    assert item.expires_at is None


def test_upsert_replaces_the_value_and_keeps_created_at(alice):
    t0 = timezone.now() - timedelta(hours=2)
    put(alice, ["prefs"], "theme", {"theme": "dark"}, now=t0)
    put(alice, ["prefs"], "theme", {"theme": "light"}, now=t0 + timedelta(hours=1))
    item = StoreItem.objects.get()
    assert item.value == {"theme": "light"}
    assert item.created_at == t0
    assert item.updated_at == t0 + timedelta(hours=1)
    assert StoreItem.objects.count() == 1


def test_get_returns_none_for_a_missing_item(alice):
    assert selectors.store_item_get_for_read(actor=alice, namespace=["nothing"], key="here") is None
    assert selectors.store_item_get_for_read(actor=alice, namespace=[], key="here") is None


def test_delete_removes_the_item_and_is_a_no_op_when_missing(alice):
    put(alice, ["a"], "k", {"v": 1})
    assert services.store_item_delete(actor=alice, namespace=["a"], key="k") is True
    assert not StoreItem.objects.exists()
    assert services.store_item_delete(actor=alice, namespace=["a"], key="k") is False
    assert AuditEvent.objects.filter(action="store.delete", target="store:a/k").count() == 1


def test_the_same_key_in_two_namespaces_is_two_items(alice):
    put(alice, ["a"], "k", {"v": 1})
    put(alice, ["a", "b"], "k", {"v": 2})
    assert selectors.store_item_get_for_read(actor=alice, namespace=["a"], key="k").value == {"v": 1}
    assert selectors.store_item_get_for_read(actor=alice, namespace=["a", "b"], key="k").value == {"v": 2}


# namespace rules (LangGraph's)


@pytest.mark.parametrize(
    ("namespace", "reason"),
    [
        ([], "cannot be empty"),
        (["users", ""], "empty"),
        (["users", "a.b"], "'.'"),
        (["users", "a\x00b"], "NUL"),
        (["langgraph", "x"], "reserved"),
        (["users", 7], "string"),
        ("users.alice", "list"),
    ],
)
def test_put_refuses_a_bad_namespace_and_writes_nothing(alice, namespace, reason):
    with pytest.raises(InvalidInput) as caught:
        services.store_item_put(actor=alice, namespace=namespace, key="k", value={"v": 1})
    assert "namespace" in caught.value.fields
    assert reason in caught.value.message
    assert not StoreItem.objects.exists()


def test_langgraph_is_reserved_only_as_the_root_label(alice):
    put(alice, ["users", "langgraph"], "k", {"v": 1})
    assert StoreItem.objects.count() == 1


@pytest.mark.parametrize("value", [[1, 2], "text", 3, None, {"x": float("nan")}, {"x": "a\x00b"}, {"x": "\ud800"}])
def test_put_refuses_a_value_that_is_not_a_storable_json_object(alice, value):
    with pytest.raises(InvalidInput) as caught:
        put(alice, ["a"], "k", value)
    assert "value" in caught.value.fields
    assert not StoreItem.objects.exists()


@pytest.mark.parametrize("key", ["", None, 5, "a\x00", "k" * 1025])
def test_put_refuses_a_bad_key(alice, key):
    with pytest.raises(InvalidInput) as caught:
        put(alice, ["a"], key, {"v": 1})
    assert "key" in caught.value.fields


@pytest.mark.parametrize("ttl", [0, -5, "10", True, 10**9])
def test_put_refuses_a_bad_ttl(alice, ttl):
    with pytest.raises(InvalidInput) as caught:
        put(alice, ["a"], "k", {"v": 1}, ttl=ttl)
    assert "ttl" in caught.value.fields
    assert not StoreItem.objects.exists()


# Unicode: one spelling per label and key


NFC_E = "caf\u00e9"  # "café" with é as one code point
NFD_E = "cafe\u0301"  # "café" with e and a combining acute accent


def test_nfc_and_nfd_spellings_are_one_item_on_every_path(alice, bob):
    put(alice, ["users", NFD_E], NFD_E, {"v": 1})
    put(alice, ["users", NFC_E], NFC_E, {"v": 2})  # the same item: an upsert, not a second one
    item = StoreItem.objects.get()
    assert (item.namespace_path, item.key, item.value) == (f"users.{NFC_E}", NFC_E, {"v": 2})
    for spelling in (NFC_E, NFD_E):
        found = selectors.store_item_get_for_read(actor=alice, namespace=["users", spelling], key=spelling)
        assert found is not None and found.pk == item.pk
        assert keys(search(alice, ["users", spelling])) == [NFC_E]
        assert selectors.store_namespace_list(actor=alice, prefix=["users", spelling]) == [("users", NFC_E)]
        assert [n.label for n in selectors.store_namespace_children(actor=alice, namespace=("users",))[0]] == [NFC_E]
    # Another user cannot take the same key by spelling it the other way.
    with pytest.raises(Forbidden):
        put(bob, ["users", NFD_E], NFC_E, {"v": "bob"})
    assert services.store_item_delete(actor=alice, namespace=["users", NFD_E], key=NFD_E) is True
    assert not StoreItem.objects.exists()


def test_the_dotted_path_form_is_normalised_too(alice):
    from store_app.namespaces import namespace_from_path

    assert namespace_from_path(f"users.{NFD_E}") == ("users", NFC_E)


def test_cyrillic_look_alikes_are_distinct_labels_each_normalised(alice, bob):
    latin, cyrillic = "admin", "\u0430dmin"  # the second starts with CYRILLIC SMALL LETTER A
    put(alice, ["teams", latin], "k", {"by": "alice"})
    put(bob, ["teams", cyrillic], "k", {"by": "bob"})  # another label, so another item, bob's own
    # Normalisation applies within a script: "й" spelt as и + combining breve is "й".
    put(bob, ["teams", "\u0438\u0306"], "k", {"short i": True})
    assert selectors.store_item_get_for_read(actor=bob, namespace=["teams", "\u0439"], key="k").value == {"short i": True}
    StoreItem.objects.filter(namespace_path="teams.\u0439").delete()
    assert sorted(StoreItem.objects.values_list("namespace_path", "owner__username")) == [
        ("teams.admin", "alice"),
        ("teams.\u0430dmin", "bob"),
    ]
    assert selectors.store_item_get_for_read(actor=bob, namespace=["teams", cyrillic], key="k").value == {"by": "bob"}
    with pytest.raises(Forbidden):
        selectors.store_item_get_for_read(actor=bob, namespace=["teams", latin], key="k")


# search: prefix by whole labels


def test_prefix_matches_whole_labels_only(alice):
    put(alice, ["a", "b"], "exact", {})
    put(alice, ["a", "b", "c"], "deeper", {})
    put(alice, ["a", "bc"], "sibling", {})
    put(alice, ["ab"], "other", {})
    assert sorted(keys(search(alice, ["a", "b"]))) == ["deeper", "exact"]
    assert sorted(keys(search(alice, ["a"]))) == ["deeper", "exact", "sibling"]
    assert len(search(alice, [])) == 4


def test_prefix_treats_like_wildcards_literally(alice):
    put(alice, ["user_1"], "mine", {})
    put(alice, ["userX1"], "not-mine", {})
    put(alice, ["50%"], "percent", {})
    put(alice, ["50abc"], "not-percent", {})
    put(alice, ["back\\slash"], "slash", {})
    assert keys(search(alice, ["user_1"])) == ["mine"]
    assert keys(search(alice, ["50%"])) == ["percent"]
    assert keys(search(alice, ["back\\slash"])) == ["slash"]


def test_prefix_is_case_sensitive(alice):
    put(alice, ["Users", "x"], "upper", {})
    put(alice, ["users", "x"], "lower", {})
    assert keys(search(alice, ["users"])) == ["lower"]
    assert keys(search(alice, ["Users"])) == ["upper"]


# search: filters


@pytest.fixture
def scored(alice):
    put(alice, ["m"], "nine", {"n": 9, "name": "nine", "tags": ["a", "b"], "meta": {"lang": "en"}})
    put(alice, ["m"], "ten", {"n": 10, "name": "ten", "tags": ["a"], "meta": {"lang": "en", "x": 1}})
    put(alice, ["m"], "hundred", {"n": 100, "name": "hundred"})
    put(alice, ["m"], "text-ten", {"n": "10", "name": "text"})
    put(alice, ["m"], "float", {"n": 9.5, "name": "float"})
    put(alice, ["m"], "flag", {"n": True, "name": "flag"})
    put(alice, ["m"], "none", {"name": "none"})
    return alice


@pytest.mark.parametrize(
    ("flt", "expected"),
    [
        ({"n": 10}, ["ten"]),
        ({"n": 10.0}, ["ten"]),
        ({"n": "10"}, ["text-ten"]),
        ({"n": {"$eq": 9}}, ["nine"]),
        ({"n": {"$gt": 9}}, ["float", "hundred", "ten"]),
        ({"n": {"$gte": 10}}, ["hundred", "ten"]),
        ({"n": {"$lt": 10}}, ["float", "nine"]),
        ({"n": {"$lte": 9.5}}, ["float", "nine"]),
        ({"n": {"$gt": 9, "$lt": 100}}, ["float", "ten"]),
        ({"n": True}, ["flag"]),
        ({"n": 1}, []),
        ({"n": {"$ne": 10}}, ["flag", "float", "hundred", "nine", "none", "text-ten"]),
        ({"name": {"$gt": "s"}}, ["ten", "text-ten"]),
        ({"tags": ["a"]}, ["ten"]),
        ({"meta": {"lang": "en"}}, ["nine"]),
        ({"n": {"$gt": 9}, "name": "ten"}, ["ten"]),
        ({"missing": None}, []),
    ],
)
def test_filters_compare_numbers_as_numbers_and_match_exactly(scored, flt, expected):
    assert sorted(keys(search(scored, ["m"], filter=flt, limit=50))) == expected


def test_numeric_comparison_is_not_textual(alice):
    put(alice, ["m"], "nine", {"n": 9})
    put(alice, ["m"], "ten", {"n": 10})
    # As text "9" > "10"; as numbers it is not.
    assert keys(search(alice, ["m"], filter={"n": {"$gt": 9}})) == ["ten"]
    assert keys(search(alice, ["m"], filter={"n": {"$lt": 10}})) == ["nine"]


@pytest.mark.parametrize(
    "flt",
    [
        [1],
        "n=1",
        {"n": {"$regex": "x"}},
        {"n": {"$gt": True}},
        {"n": {"$gt": None}},
        {"n": {"$lt": [1]}},
        {"n": {"$gt": 1, "plain": 2}},
        {"x" * 300: 1},
        {"n": "a\x00"},
    ],
)
def test_search_refuses_a_bad_filter(alice, flt):
    with pytest.raises(InvalidInput) as caught:
        search(alice, ["m"], filter=flt)
    assert "filter" in caught.value.fields


# search: query, order, paging


def test_query_ranks_relevant_items_first_with_a_score(alice):
    put(alice, ["notes"], "tea", {"text": "likes green tea and oolong tea"})
    put(alice, ["notes"], "coffee", {"text": "drinks coffee, sometimes tea"})
    put(alice, ["notes"], "walk", {"text": "walks to work"})
    found = search(alice, ["notes"], query="tea")
    # Every item under the prefix, as LangGraph's stores answer: those sharing no word last, score 0.
    assert keys(found) == ["tea", "coffee", "walk"]
    assert found[0].score > found[1].score > 0
    assert found[2].score == 0


def test_query_prefers_items_matching_more_words(alice):
    put(alice, ["notes"], "one", {"text": "green apples"})
    put(alice, ["notes"], "both", {"text": "green tea"})
    found = search(alice, ["notes"], query="green tea")
    assert keys(found) == ["both", "one"]


def test_query_reads_nested_string_values_but_not_keys(alice):
    put(alice, ["notes"], "nested", {"trip": {"city": ["Osaka", "Kyoto"]}})
    put(alice, ["notes"], "keyonly", {"osaka": 1})
    found = search(alice, ["notes"], query="osaka")
    assert [(item.key, item.score > 0) for item in found] == [("nested", True), ("keyonly", False)]


def test_search_without_query_is_newest_first_with_no_score(alice):
    t0 = timezone.now() - timedelta(hours=1)
    for minute, key in enumerate(["old", "mid", "new"]):
        put(alice, ["n"], key, {}, now=t0 + timedelta(minutes=minute))
    found = search(alice, ["n"])
    assert keys(found) == ["new", "mid", "old"]
    assert [item.score for item in found] == [None, None, None]


def test_search_pages_with_limit_and_offset(alice):
    t0 = timezone.now() - timedelta(hours=1)
    for index in range(7):
        put(alice, ["p"], f"k{index}", {}, now=t0 + timedelta(minutes=index))
    assert keys(search(alice, ["p"], limit=3)) == ["k6", "k5", "k4"]
    assert keys(search(alice, ["p"], limit=3, offset=3)) == ["k3", "k2", "k1"]
    assert keys(search(alice, ["p"], limit=3, offset=6)) == ["k0"]
    assert search(alice, ["p"], limit=0) == []


@pytest.mark.parametrize(("limit", "offset"), [(-1, 0), (1001, 0), ("x", 0), (True, 0), (10, -1)])
def test_search_refuses_bad_paging(alice, limit, offset):
    with pytest.raises(InvalidInput) as caught:
        search(alice, [], limit=limit, offset=offset)
    assert set(caught.value.fields) & {"limit", "offset"}


# list_namespaces


@pytest.fixture
def tree(alice):
    for namespace in [
        ("a", "b", "c"),
        ("a", "b", "d", "e"),
        ("a", "b", "d", "i"),
        ("a", "b", "f"),
        ("a", "c", "f"),
        ("users", "alice", "preferences"),
        ("users", "bob", "preferences"),
        ("users", "bob", "profile"),
    ]:
        put(alice, namespace, "k", {})
    return alice


def namespaces(actor, **kwargs):
    return selectors.store_namespace_list(actor=actor, **kwargs)


def test_list_namespaces_returns_every_namespace_sorted(tree):
    assert namespaces(tree) == [
        ("a", "b", "c"),
        ("a", "b", "d", "e"),
        ("a", "b", "d", "i"),
        ("a", "b", "f"),
        ("a", "c", "f"),
        ("users", "alice", "preferences"),
        ("users", "bob", "preferences"),
        ("users", "bob", "profile"),
    ]


def test_list_namespaces_truncates_to_max_depth(tree):
    # LangGraph's own example for max_depth.
    assert namespaces(tree, prefix=["a", "b"], max_depth=3) == [("a", "b", "c"), ("a", "b", "d"), ("a", "b", "f")]
    assert namespaces(tree, max_depth=1) == [("a",), ("users",)]


def test_list_namespaces_matches_prefix_and_suffix_by_whole_labels(tree):
    assert namespaces(tree, prefix=["users", "bob"]) == [("users", "bob", "preferences"), ("users", "bob", "profile")]
    assert namespaces(tree, suffix=["preferences"]) == [("users", "alice", "preferences"), ("users", "bob", "preferences")]
    assert namespaces(tree, suffix=["f"]) == [("a", "b", "f"), ("a", "c", "f")]
    assert namespaces(tree, prefix=["a"], suffix=["e"]) == [("a", "b", "d", "e")]
    assert namespaces(tree, prefix=["user"]) == []


def test_list_namespaces_reads_star_as_any_one_label(tree):
    assert namespaces(tree, prefix=["users", "*", "preferences"]) == [
        ("users", "alice", "preferences"),
        ("users", "bob", "preferences"),
    ]
    assert namespaces(tree, prefix=["*", "c"]) == [("a", "c", "f")]
    assert namespaces(tree, suffix=["d", "*"]) == [("a", "b", "d", "e"), ("a", "b", "d", "i")]


def test_list_namespaces_pages_with_limit_and_offset(tree):
    everything = namespaces(tree)
    assert namespaces(tree, limit=3) == everything[:3]
    assert namespaces(tree, limit=3, offset=3) == everything[3:6]
    assert namespaces(tree, limit=3, offset=7) == everything[7:]
    assert namespaces(tree, limit=0) == []


@pytest.mark.parametrize(
    "kwargs",
    [{"prefix": ["a", ""]}, {"suffix": ["a.b"]}, {"max_depth": 0}, {"max_depth": "x"}, {"limit": -1}, {"offset": -3}],
)
def test_list_namespaces_refuses_bad_parameters(alice, kwargs):
    with pytest.raises(InvalidInput) as caught:
        namespaces(alice, **kwargs)
    assert set(caught.value.fields) & set(kwargs)


def test_namespace_children_count_items_per_subtree(tree):
    nodes, more = selectors.store_namespace_children(actor=tree, namespace=("a",))
    assert [(node.label, node.items, node.has_children) for node in nodes] == [("b", 4, True), ("c", 1, True)]
    assert more is False
    leaves, _ = selectors.store_namespace_children(actor=tree, namespace=("a", "b", "d"))
    assert [(node.label, node.has_children) for node in leaves] == [("e", False), ("i", False)]


# TTL


def test_an_expired_item_is_hidden_from_every_read(alice):
    t0 = timezone.now()
    put(alice, ["s"], "short", {"text": "scratch"}, ttl=10, now=t0)
    put(alice, ["s"], "forever", {"text": "scratch"})
    later = t0 + timedelta(minutes=11)
    assert selectors.store_item_get_for_read(actor=alice, namespace=["s"], key="short", now=t0) is not None
    assert selectors.store_item_get_for_read(actor=alice, namespace=["s"], key="short", now=later) is None
    assert keys(search(alice, ["s"], now=later)) == ["forever"]
    assert keys(search(alice, ["s"], query="scratch", now=later)) == ["forever"]
    assert selectors.store_size(actor=alice, now=later) == 1
    put(alice, ["gone"], "only", {}, ttl=1, now=t0)
    assert ("gone",) not in selectors.store_namespace_list(actor=alice, now=later)


def test_ttl_accepts_fractions_of_a_minute(alice):
    t0 = timezone.now()
    item = put(alice, ["s"], "k", {}, ttl=0.5, now=t0)
    assert item.expires_at == t0 + timedelta(seconds=30)


def test_refresh_ttl_extends_the_owners_item(alice):
    t0 = timezone.now()
    item = put(alice, ["s"], "k", {}, ttl=10, now=t0)
    refreshed = services.store_ttl_refresh(actor=alice, items=[item], now=t0 + timedelta(minutes=8))
    assert refreshed == 1
    item.refresh_from_db()
    assert item.expires_at == t0 + timedelta(minutes=18)
    assert selectors.store_item_get_for_read(actor=alice, namespace=["s"], key="k", now=t0 + timedelta(minutes=15))


def test_refresh_ttl_leaves_items_without_ttl_and_other_readers_alone(alice, operator):
    t0 = timezone.now()
    timed = put(alice, ["s"], "timed", {}, ttl=10, now=t0)
    plain = put(alice, ["s"], "plain", {})
    assert services.store_ttl_refresh(actor=operator, items=[timed, plain], now=t0 + timedelta(minutes=5)) == 0
    timed.refresh_from_db()
    plain.refresh_from_db()
    assert timed.expires_at == t0 + timedelta(minutes=10)
    assert plain.expires_at is None


def test_put_without_ttl_clears_an_earlier_ttl(alice):
    put(alice, ["s"], "k", {}, ttl=10)
    item = put(alice, ["s"], "k", {})
    assert item.expires_at is None and item.ttl is None


def test_sweep_removes_expired_items_only(alice):
    t0 = timezone.now() - timedelta(hours=1)
    for index in range(5):
        put(alice, ["s"], f"old{index}", {}, ttl=1, now=t0)
    put(alice, ["s"], "fresh", {}, ttl=600)
    put(alice, ["s"], "forever", {})
    assert services.store_item_sweep(batch=2) == 5
    assert sorted(StoreItem.objects.values_list("key", flat=True)) == ["forever", "fresh"]
    assert services.store_item_sweep() == 0


def test_a_put_on_an_expired_item_starts_a_new_item_for_its_owner_only(alice, bob):
    t0 = timezone.now() - timedelta(hours=1)
    put(bob, ["shared"], "k", {"by": "bob"}, ttl=1, now=t0)
    with pytest.raises(Forbidden) as refused:
        put(alice, ["shared"], "k", {"by": "alice"})
    assert refused.value.owner_id == bob.pk
    item = put(bob, ["shared"], "k", {"by": "bob"})
    assert item.owner == bob
    assert item.created_at > t0
    assert StoreItem.objects.count() == 1


# clear and size


def test_clear_deletes_a_subtree_of_every_owner_and_is_audited(alice, bob, admin_user):
    put(alice, ["users", "alice"], "k", {})
    put(bob, ["users", "bob"], "k", {})
    put(bob, ["usersx"], "k", {})
    impact = selectors.store_subtree_impact(actor=admin_user, namespace=("users",))
    assert impact["items"] == 2 and impact["owners"] == 2
    assert services.store_clear(actor=admin_user, namespace=("users",)) == 2
    assert list(StoreItem.objects.values_list("namespace_path", flat=True)) == ["usersx"]
    event = AuditEvent.objects.get(action="store.clear")
    assert event.target == "store:users" and event.detail["deleted"] == 2


def test_clear_of_the_root_empties_the_store(alice, admin_user):
    put(alice, ["a"], "k", {})
    put(alice, ["b", "c"], "k", {})
    assert services.store_clear(actor=admin_user) == 2
    assert not StoreItem.objects.exists()


@pytest.mark.parametrize("who", ["alice", "operator"])
def test_clear_is_for_admins_only(request, alice, who):
    put(alice, ["a"], "k", {})
    with pytest.raises(Forbidden):
        services.store_clear(actor=request.getfixturevalue(who), namespace=("a",))
    assert StoreItem.objects.count() == 1


def test_size_counts_what_the_actor_sees(alice, bob, operator):
    put(alice, ["a"], "k1", {})
    put(alice, ["a"], "k2", {})
    put(bob, ["b"], "k1", {})
    assert selectors.store_size(actor=alice) == 2
    assert selectors.store_size(actor=bob) == 1
    assert selectors.store_size(actor=operator) == 3
