"""Which reads the replica router sends to DATABASE_REPLICA_URL (the real replica: tests/reliability/test_replica.py)."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.db import transaction
from django.test import RequestFactory

from memoryadmin.models import AuditEvent
from memoryadmin.replica import PIN_COOKIE, ReplicaRouter, _reading_replica, is_dashboard_read
from sessions_app.models import Block, Thread
from store_app.models import StoreItem

factory = RequestFactory()


@pytest.mark.parametrize(
    "method, path, cookies, expected",
    [
        ("get", "/threads/", {}, True),
        ("get", "/threads/t1/", {}, True),
        ("head", "/store/", {}, True),
        ("get", "/threads/", {PIN_COOKIE: "1"}, False),
        ("post", "/threads/t1/clear", {}, False),
        ("get", "/api/v1/threads", {}, False),
        ("get", "/healthz", {}, False),
        ("get", "/metrics", {}, False),
        ("get", "/accounts/login/", {}, False),
    ],
)
def test_only_page_reads_of_browsers_that_did_not_just_write_go_to_the_replica(method, path, cookies, expected):
    request = getattr(factory, method)(path)
    request.COOKIES.update(cookies)
    assert is_dashboard_read(request) is expected


@pytest.mark.django_db(transaction=True)  # a test transaction would keep every read on the primary
def test_the_router_sends_replicated_apps_to_the_replica_only_during_a_dashboard_read():
    router = ReplicaRouter()
    assert router.db_for_read(Thread) == "default"
    token = _reading_replica.set(True)
    try:
        assert [router.db_for_read(m) for m in (Thread, Block, StoreItem, AuditEvent)] == ["replica"] * 4
        # Sessions, users and role groups stay on the primary.
        assert router.db_for_read(get_user_model()) == "default"
        with transaction.atomic():
            assert router.db_for_read(Thread) == "default"
        assert router.db_for_write(Thread) == "default"
    finally:
        _reading_replica.reset(token)
    assert router.allow_migrate("replica", "sessions_app") is False
    assert router.allow_migrate("default", "sessions_app") is True
