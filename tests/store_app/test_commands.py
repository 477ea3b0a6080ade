"""store_sweep, the demo data and the migrations of the store."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone

from memoryadmin.demo import store as demo
from store_app import selectors, services
from store_app.models import StoreItem
from tests.conftest import make_user


def test_store_sweep_deletes_expired_items_and_says_how_many(alice):
    past = timezone.now() - timedelta(hours=2)
    for index in range(3):
        services.store_item_put(actor=alice, namespace=["s"], key=f"old{index}", value={}, ttl=5, now=past)
    services.store_item_put(actor=alice, namespace=["s"], key="live", value={}, ttl=60)
    out = StringIO()
    call_command("store_sweep", "--batch", "2", stdout=out)
    assert out.getvalue().strip() == "swept 3 expired store items"
    assert list(StoreItem.objects.values_list("key", flat=True)) == ["live"]


def test_store_sweep_refuses_a_zero_batch(db):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError):
        call_command("store_sweep", "--batch", "0")


@pytest.fixture
def demo_users(db):
    return {
        "admin": make_user("demo-admin", "admin"),
        "operator": make_user("demo-operator", "operator"),
        "alice": make_user("demo-alice"),
        "bob": make_user("demo-bob"),
    }


def test_demo_data_writes_a_few_hundred_memories_some_with_ttl(demo_users):
    summary = demo.load(demo_users)
    assert 200 <= summary["store_items"] == StoreItem.objects.count() <= 500
    assert summary["with_ttl"] == StoreItem.objects.filter(expires_at__isnull=False).count() > 0
    alice = demo_users["alice"]
    assert ("users", "alice", "preferences") in selectors.store_namespace_list(actor=alice)
    assert ("memories", "alice") in selectors.store_namespace_list(actor=alice)
    assert selectors.store_size(actor=demo_users["bob"]) < selectors.store_size(actor=demo_users["operator"])


def test_demo_data_can_be_loaded_twice(demo_users):
    first = demo.load(demo_users)
    demo.load(demo_users)
    assert StoreItem.objects.count() == first["store_items"]


def test_store_migrations_match_the_models(db):
    out = StringIO()
    call_command("makemigrations", "store_app", "--check", "--dry-run", stdout=out)
    assert "No changes detected" in out.getvalue()
