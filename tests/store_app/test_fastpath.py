"""Store gets by the prepared statement (store_app/fastpath.py) give what the ORM gives."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from memoryadmin.errors import Forbidden
from store_app import fastpath, selectors, services
from store_app.models import StoreItem

from ..conftest import IS_POSTGRES

pytestmark = pytest.mark.django_db

FIELDS = [field.attname for field in StoreItem._meta.concrete_fields]


def _row(item):
    return {name: getattr(item, name) for name in FIELDS}


@pytest.mark.postgres
@pytest.mark.skipif(not IS_POSTGRES, reason="the prepared get is PostgreSQL's")
def test_the_prepared_get_reads_every_field_and_the_owner_as_the_orm_does(alice, bob):
    value = {"big": 2**70, "double": 1.0, "text": "<b>é</b>", "nested": {"list": [1, None, True]}}
    services.store_item_put(actor=alice, namespace=["f", "a"], key="k", value=value, ttl=30)
    services.store_item_put(actor=bob, namespace=["f", "b"], key="k", value={"v": 1})
    services.store_item_put(actor=alice, namespace=["f", "gone"], key="k", value={"v": 2}, ttl=1)
    now = timezone.now()
    pairs = [("f.a", "k"), ("f.b", "k"), ("f.gone", "k"), ("f.none", "k")]
    later = now + timedelta(minutes=2)  # f.gone has expired by then, f.a has not
    fast = {item.namespace_path: item for item in fastpath.items_get(pairs, now=later)}
    orm = {item.namespace_path: item for item in StoreItem.objects.live(later).select_related("owner")
           .filter(namespace_path__in=["f.a", "f.b", "f.gone", "f.none"], key="k")}
    assert set(fast) == set(orm) == {"f.a", "f.b"}
    for path, item in fast.items():
        assert _row(item) == _row(orm[path])
        assert item.owner == orm[path].owner and item.owner.username == orm[path].owner.username
    assert fast["f.a"].value == value and fast["f.a"].value["big"] == 2**70
    assert fast["f.a"].ttl == timedelta(minutes=30)
    assert fastpath.items_get([], now=now) == []


def test_a_get_is_one_query_whatever_the_namespace_holds(alice, django_assert_num_queries):
    for n in range(30):
        services.store_item_put(actor=alice, namespace=["q"], key=f"k{n}", value={"n": n})
    with django_assert_num_queries(1):
        item = selectors.store_item_get_for_read(actor=alice, namespace=["q"], key="k7")
    assert item.value == {"n": 7} and item.owner == alice
    with django_assert_num_queries(1):
        found = selectors.store_items_get_many(keys=[(("q",), f"k{n}") for n in range(20)] + [(("q",), "none")])
    assert sorted(item.value["n"] for item in found.values()) == list(range(20))


@pytest.mark.postgres
@pytest.mark.skipif(not IS_POSTGRES, reason="the put's function is PostgreSQL's")
def test_a_put_without_vectors_is_one_statement_and_with_them_one_transaction(alice, bob, django_assert_num_queries):
    """A put is one call of `store_items_put` (no SAVEPOINT or transaction around it), new or
    replacing an item that has vectors, and answers the item as the ORM reads it back; with
    vectors, the insert of them follows in one transaction. A refused put writes nothing."""
    services.store_item_put(actor=alice, namespace=["one"], key="v", value={"n": 0}, vectors={"text": [1.0, 2.0]}, dims=2)
    with django_assert_num_queries(1):
        new = services.store_item_put(actor=alice, namespace=["one"], key="k", value={"n": 1, "d": 1.0}, ttl=5)
    with django_assert_num_queries(1):
        replaced = services.store_item_put(actor=alice, namespace=["one"], key="v", value={"n": 2})
    assert replaced.vectors.count() == 0
    for item in (new, replaced):
        stored = StoreItem.objects.get(pk=item.pk)
        assert _row(item) == _row(stored)
    # SAVEPOINT, the function, the vectors' INSERT, RELEASE.
    with django_assert_num_queries(4):
        services.store_item_put(actor=alice, namespace=["one"], key="v", value={"n": 3}, vectors={"text": [3.0, 4.0]}, dims=2)
    assert [list(v.vector) for v in StoreItem.objects.get(namespace_path="one", key="v").vectors.all()] == [[3.0, 4.0]]
    with pytest.raises(Forbidden):
        services.store_item_put(actor=bob, namespace=["one"], key="k", value={"n": 9})
    assert StoreItem.objects.get(namespace_path="one", key="k").value == {"n": 1, "d": 1.0}
