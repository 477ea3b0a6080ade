"""Throttling per API key, login lockout, body limits."""

from __future__ import annotations

import pytest
from django.core.cache import cache
from django.test import override_settings
from django.conf import settings

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fresh_cache():
    cache.clear()
    yield
    cache.clear()


def throttled(rate: str):
    return override_settings(REST_FRAMEWORK={**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"client": rate}})


def test_each_api_key_has_its_own_budget(alice_api, bob_api):
    with throttled("3/min"):
        codes = [alice_api.get("/api/v1/threads").status_code for _ in range(4)]
        assert codes == [200, 200, 200, 429]
        assert alice_api.get("/api/v1/threads")["Retry-After"]
        assert bob_api.get("/api/v1/threads").status_code == 200


def test_the_budget_is_one_counter_per_window_and_the_wait_ends_with_it(alice, alice_api, monkeypatch):
    from memoryadmin.throttling import ClientRateThrottle

    now = [1_000_000.0 * 60 + 50]  # 10 s before a minute's window ends
    monkeypatch.setattr(ClientRateThrottle, "timer", lambda self: now[0])
    with throttled("5/min"):
        assert [alice_api.get("/api/v1/threads").status_code for _ in range(6)] == [200] * 5 + [429]
        refused = alice_api.get("/api/v1/threads")
        assert refused.status_code == 429 and int(refused["Retry-After"]) == 10
        # What the cache holds for the key is a count of the window, not the time of every request.
        from memoryadmin.models import ApiKey

        prefix = ApiKey.objects.get(owner=alice).prefix
        assert cache.get(f"throttle_client_key:{prefix}:{int(now[0] // 60)}") == 7
        now[0] += 10  # the next window
        assert alice_api.get("/api/v1/threads").status_code == 200


def test_throttling_counts_keys_not_users(alice):
    from ..conftest import api_client_for

    first, second = api_client_for(alice), api_client_for(alice)
    with throttled("2/min"):
        assert [first.get("/api/v1/threads").status_code for _ in range(3)] == [200, 200, 429]
        assert second.get("/api/v1/threads").status_code == 200


def test_sign_in_locks_out_after_repeated_failures(client, alice):
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        response = client.post("/accounts/login/", {"username": "alice", "password": "wrong"})
        assert response.status_code == 200
    # The failure that reaches the limit is answered with the lockout already.
    assert client.post("/accounts/login/", {"username": "alice", "password": "wrong"}).status_code == 429
    locked = client.post("/accounts/login/", {"username": "alice", "password": "pw-for-tests-1"})
    assert locked.status_code == 429 and b"Too many failed sign-ins" in locked.content
    # Another account from the same address is not locked.
    from ..conftest import make_user

    make_user("carol")
    assert client.post("/accounts/login/", {"username": "carol", "password": "pw-for-tests-1"}).status_code == 302


def test_a_good_password_before_the_limit_resets_the_count(client, alice):
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        client.post("/accounts/login/", {"username": "alice", "password": "wrong"})
    assert client.post("/accounts/login/", {"username": "alice", "password": "pw-for-tests-1"}).status_code == 302
    client.logout()
    client.post("/accounts/login/", {"username": "alice", "password": "wrong"})
    assert client.post("/accounts/login/", {"username": "alice", "password": "pw-for-tests-1"}).status_code == 302


@override_settings(MEMORYADMIN_MAX_BODY_BYTES=1000)
def test_oversized_bodies_are_413_on_pages_too(client, alice):
    client.force_login(alice)
    response = client.post("/accounts/login/", {"username": "x" * 2000, "password": "y"})
    assert response.status_code == 413
