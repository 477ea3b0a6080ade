"""The process's cache of checked API keys, and the page middleware an API call skips.

The rule (memoryadmin/apikeys.py): a key checked within MEMORYADMIN_APIKEY_CACHE_SECONDS costs
no query; whatever ends a key's use empties the cache of the process that made the change at
once, and elsewhere the entry dies of age.
"""

from __future__ import annotations

import pytest
from django.test import override_settings

from memoryadmin import apikeys, roles
from memoryadmin.accounts import account_key_revoke, account_role_set
from memoryadmin.apikeys import apikey_authenticate, apikey_create, apikey_revoke
from memoryadmin.models import ApiKey

from ..conftest import api_client_for, make_user

@pytest.fixture(autouse=True)
def key_cache(settings):
    """The cache as production runs it (the rest of the suite runs with it off), empty at each end."""
    settings.MEMORYADMIN_APIKEY_CACHE_SECONDS = 5
    apikeys.apikey_cache_forget()
    yield
    apikeys.apikey_cache_forget()


CHECKPOINT = {"v": 1, "id": "c-1", "ts": "2024-01-01T00:00:00+00:00", "channel_values": {"x": 1},
              "channel_versions": {"x": "1"}, "versions_seen": {}}


def _put(client, thread_id: str, checkpoint_id: str):
    body = {"checkpoint_id": checkpoint_id, "checkpoint_ns": "", "metadata": {}, "checkpoint": {**CHECKPOINT, "id": checkpoint_id}}
    return client.post(f"/api/v1/threads/{thread_id}/checkpoints", body, format="json")


def test_a_key_checked_a_moment_ago_costs_no_query(alice, django_assert_num_queries):
    plaintext = apikey_create(owner=alice).plaintext
    first = apikey_authenticate(plaintext)
    with django_assert_num_queries(0):  # no lookup, and no write of last_used_at either
        again = apikey_authenticate(plaintext)
        assert again.owner.pk == alice.pk and roles.role_of(again.owner) == "member"
    assert again is not first and again.owner is not first.owner  # each request its own instances
    with override_settings(MEMORYADMIN_APIKEY_CACHE_SECONDS=0):
        apikeys.apikey_cache_forget()
        apikey_authenticate(plaintext)
        with django_assert_num_queries(1):  # the cache off: the lookup on every call
            assert apikey_authenticate(plaintext).owner.pk == alice.pk


def test_a_put_with_a_warm_key_makes_one_query_less(alice, django_assert_num_queries, monkeypatch):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from sessions_app.checkpoints import fastpath

    # Every put reads its thread (nothing remembered of the last one), so that only the key differs.
    monkeypatch.setattr(fastpath.remembered, "get", lambda key: None)
    client = api_client_for(alice)
    assert _put(client, "t-warm", "c-1").status_code == 201
    with override_settings(MEMORYADMIN_APIKEY_CACHE_SECONDS=0):
        apikeys.apikey_cache_forget()
        with CaptureQueriesContext(connection) as cold:
            assert _put(client, "t-warm", "c-2").status_code == 201
        cold_count = len(cold)
    assert _put(client, "t-warm", "c-3").status_code == 201  # the key checked: cached again
    assert cold_count >= 2
    with django_assert_num_queries(cold_count - 1):
        assert _put(client, "t-warm", "c-4").status_code == 201


def test_the_same_prefix_with_another_secret_is_refused_while_the_key_is_cached(alice):
    plaintext = apikey_create(owner=alice).plaintext
    assert apikey_authenticate(plaintext) is not None
    forged = plaintext[:-1] + ("x" if plaintext[-1] != "x" else "y")
    assert apikey_authenticate(forged) is None
    assert apikey_authenticate(plaintext) is not None


def test_a_revoke_in_this_process_takes_effect_at_once(alice, admin_user):
    first, second = apikey_create(owner=alice).plaintext, apikey_create(owner=alice).plaintext
    assert apikey_authenticate(first) is not None and apikey_authenticate(second) is not None
    apikey_revoke(prefix=first.split("_")[1])
    assert apikey_authenticate(first) is None
    account_key_revoke(actor=admin_user, prefix=second.split("_")[1])
    assert apikey_authenticate(second) is None


def test_a_revoked_key_is_refused_by_the_api_on_the_next_request(alice, admin_user):
    issued = apikey_create(owner=alice)
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {issued.plaintext}")
    assert _put(client, "t-revoked", "c-1").status_code == 201
    account_key_revoke(actor=admin_user, prefix=issued.api_key.prefix)
    response = _put(client, "t-revoked", "c-2")
    assert response.status_code == 401, response.content


def test_a_deactivated_owner_and_a_changed_role_take_effect_at_once(alice, admin_user):
    plaintext = apikey_create(owner=alice).plaintext
    assert roles.role_of(apikey_authenticate(plaintext).owner) == "member"
    account_role_set(actor=admin_user, username="alice", role="operator")
    assert roles.role_of(apikey_authenticate(plaintext).owner) == "operator"
    alice.is_active = False
    alice.save()
    assert apikey_authenticate(plaintext) is None


def test_an_erase_that_revokes_access_refuses_the_cached_key_at_once(db):
    from memoryadmin.operations.erase import user_erase

    carol = make_user("carol")
    plaintext = apikey_create(owner=carol).plaintext
    assert apikey_authenticate(plaintext) is not None
    user_erase(actor=None, username="carol", revoke_access=True)
    assert apikey_authenticate(plaintext) is None


def test_a_change_made_elsewhere_holds_only_until_the_entry_ages_out(alice, monkeypatch):
    """Another process's revoke does not reach this process's cache (an UPDATE without signals
    stands for it): the key works until its entry is MEMORYADMIN_APIKEY_CACHE_SECONDS old."""
    plaintext = apikey_create(owner=alice).plaintext
    assert apikey_authenticate(plaintext) is not None
    ApiKey.objects.filter(owner=alice).update(revoked_at="2024-01-01T00:00:00Z")
    assert apikey_authenticate(plaintext) is not None
    now = apikeys.time.monotonic()
    with override_settings(MEMORYADMIN_APIKEY_CACHE_SECONDS=5):
        monkeypatch.setattr(apikeys.time, "monotonic", lambda: now + 5.01)
        assert apikey_authenticate(plaintext) is None


def test_a_row_read_before_a_forget_is_not_kept(alice, django_assert_num_queries):
    plaintext = apikey_create(owner=alice).plaintext
    generation = apikeys._cache.generation
    apikeys.apikey_cache_forget()  # a revoke lands between the lookup and the cache's put
    digest = apikeys.hashlib.sha256(plaintext.encode()).digest()
    apikeys._cache.put(digest, ["stale"], generation)
    assert apikeys._cache.get(digest) is None


@pytest.mark.parametrize("header", ["HTTP_AUTHORIZATION", "HTTP_X_API_KEY"])
def test_an_api_call_with_a_key_skips_the_page_middleware(alice, header):
    from rest_framework.test import APIClient

    plaintext = apikey_create(owner=alice).plaintext
    client = APIClient()
    client.credentials(**{header: f"Bearer {plaintext}" if header == "HTTP_AUTHORIZATION" else plaintext})
    response = _put(client, "t-plain", "c-1")
    assert response.status_code == 201
    assert "Content-Security-Policy" not in response and not response.cookies
    assert response["X-Frame-Options"] == "DENY" and response["X-Content-Type-Options"] == "nosniff"


def test_a_page_and_a_browser_api_call_keep_the_page_middleware(alice, client):
    client.force_login(alice)
    page = client.get("/threads/")
    assert page.status_code == 200 and "Content-Security-Policy" in page
    # The browser's own API calls are signed in by the session, and CSRF still applies.
    from rest_framework.test import APIClient

    browser = APIClient(enforce_csrf_checks=True)
    browser.force_login(alice)
    refused = _put(browser, "t-browser", "c-1")
    assert refused.status_code == 403 and "CSRF" in refused.json()["detail"]
