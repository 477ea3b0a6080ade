"""Store test helpers."""

from __future__ import annotations

from datetime import timedelta

import pytest

from django.utils import timezone

from store_app.models import StoreItem


def bulk_items(rows) -> None:
    """Many items at once for query-count tests: (owner, namespace, key, value, ttl_minutes) rows.

    The same columns the put service writes, in one INSERT, so that growing the
    store to hundreds of items does not dominate the test's run time.
    """
    now = timezone.now()
    StoreItem.objects.bulk_create(
        [
            StoreItem(
                owner=owner,
                namespace_path=".".join(namespace),
                depth=len(namespace),
                key=key,
                value=value,
                ttl=timedelta(minutes=ttl) if ttl else None,
                expires_at=now + timedelta(minutes=ttl) if ttl else None,
                created_at=now,
                updated_at=now,
            )
            for owner, namespace, key, value, ttl in rows
        ]
    )


@pytest.fixture(autouse=True)
def empty_vector_cache():
    """Every test starts with the process's vector cache empty (store_app.vectorcache): what it
    holds never changes an answer, but it changes how many queries a search makes."""
    from store_app.vectorcache import cache

    cache.clear()
    yield
    cache.clear()
