"""Project-wide behaviour: health, metrics, API key command, migrations, schema, settings helpers."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.db import connection
from django.db.utils import OperationalError

from memoryadmin import roles
from memoryadmin.models import ApiKey, AuditEvent
from memoryadmin.settings import env_bool, env_int


@pytest.mark.django_db
def test_healthz_answers_ok_without_authentication(client):
    response = client.get("/healthz")
    assert response.status_code == 200 and response.json() == {"status": "ok"}


@pytest.mark.django_db
def test_healthz_answers_503_when_the_database_does_not(client, monkeypatch):
    def broken(*args, **kwargs):
        raise OperationalError("connection refused")

    monkeypatch.setattr(connection, "cursor", broken)
    response = client.get("/healthz")
    assert response.status_code == 503 and response.json()["status"] == "unavailable"


@pytest.mark.django_db
def test_metrics_expose_the_store_counters_and_request_counts(client, alice_api):
    alice_api.get("/api/v1/threads")
    body = client.get("/metrics").content.decode()
    for name in ("block_truncate_count_total", "block_archive_write_count_total", "block_persist_fail_total", "http_requests_total", "http_request_duration_seconds_bucket"):
        assert name in body
    assert 'route="api/v1/threads"' in body


@pytest.mark.django_db
def test_apikey_command_creates_lists_and_revokes(alice_api):
    out = StringIO()
    call_command("apikey", "create", "--user", "agent7", "--create-user", "--role", "operator", "--name", "ci", stdout=out)
    key = out.getvalue().strip().splitlines()[-1]
    assert key.startswith("ma_")
    row = ApiKey.objects.get(owner__username="agent7")
    assert roles.role_of(row.owner) == "operator" and row.name == "ci"
    listing = StringIO()
    call_command("apikey", "list", stdout=listing)
    assert row.prefix in listing.getvalue() and key not in listing.getvalue()
    call_command("apikey", "revoke", row.prefix, stdout=StringIO())
    assert ApiKey.objects.get(pk=row.pk).revoked_at is not None
    assert AuditEvent.objects.filter(action__in=["apikey.create", "apikey.revoke"]).count() == 2


@pytest.mark.django_db
def test_apikey_command_refuses_unknown_users_without_create_user():
    from django.core.management.base import CommandError

    with pytest.raises(CommandError):
        call_command("apikey", "create", "--user", "ghost", stdout=StringIO())


@pytest.mark.django_db(transaction=True)
def test_demo_data_loads_through_the_services(client):
    # Committed transactions: the checkpoint demo runs a LangGraph graph whose
    # worker threads call the API on connections of their own.
    out = StringIO()
    call_command("demo_data", stdout=out)
    from sessions_app.models import Thread

    kyoto = Thread.objects.get(thread_id="kyoto-trip")
    assert kyoto.rewrite_count >= 2 and kyoto.archived_count > 0
    response = client.post("/accounts/login/", {"username": "admin", "password": "memoryadmin"})
    assert response.status_code == 302
    assert client.get("/threads/kyoto-trip/").status_code == 200
    # Running it again adds nothing.
    call_command("demo_data", stdout=out)
    assert Thread.objects.filter(thread_id="kyoto-trip").count() == 1


@pytest.mark.django_db
def test_migrations_are_in_step_with_the_models():
    call_command("makemigrations", "--check", "--dry-run", stdout=StringIO())


def test_the_openapi_schema_validates(tmp_path):
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "schema.yml"))


def test_env_bool_refuses_junk(monkeypatch):
    monkeypatch.setenv("X_FLAG", "maybe")
    with pytest.raises(ImproperlyConfigured):
        env_bool("X_FLAG")
    monkeypatch.setenv("X_FLAG", "Yes")
    assert env_bool("X_FLAG") is True
    monkeypatch.setenv("X_NUM", "ten")
    with pytest.raises(ImproperlyConfigured):
        env_int("X_NUM", 1)


@pytest.mark.django_db
def test_pages_carry_a_strict_content_security_policy(client, alice):
    client.force_login(alice)
    policy = client.get("/threads/")["Content-Security-Policy"]
    assert "script-src 'self'" in policy and "unsafe-inline" not in policy


@pytest.mark.parametrize("role", ["member", "operator", "admin", "superuser"])
def test_a_key_brings_its_owner_and_role_in_one_query(db, role, django_assert_num_queries):
    from datetime import datetime

    from django.contrib.auth import get_user_model

    from memoryadmin.apikeys import apikey_authenticate, apikey_create

    from ..conftest import make_user

    if role == "superuser":
        user = get_user_model().objects.create_superuser("root-user", password="pw-for-tests-1")
    else:
        user = make_user(f"{role}-user", role)
    plaintext = apikey_create(owner=user, name="agent").plaintext
    ApiKey.objects.filter(owner=user).update(last_used_at=None)
    with django_assert_num_queries(2):  # the key with owner and role, then last_used_at
        key = apikey_authenticate(plaintext)
        assert roles.role_of(key.owner) == ("admin" if role == "superuser" else role)
    assert (key.owner.pk, key.owner.username, key.name) == (user.pk, user.username, "agent")
    assert isinstance(key.created_at, datetime) and key.created_at.tzinfo is not None
    with django_assert_num_queries(1):  # used a moment ago: no write
        assert apikey_authenticate(plaintext).last_used_at == key.last_used_at


def test_a_revoked_key_or_an_inactive_owner_is_refused(alice):
    from memoryadmin.apikeys import apikey_authenticate, apikey_create, apikey_revoke

    plaintext = apikey_create(owner=alice).plaintext
    other = apikey_create(owner=alice).plaintext
    assert apikey_authenticate(plaintext) is not None
    apikey_revoke(prefix=plaintext.split("_")[1])
    assert apikey_authenticate(plaintext) is None
    assert apikey_authenticate(other[:-1] + ("x" if other[-1] != "x" else "y")) is None
    alice.is_active = False
    alice.save()
    assert apikey_authenticate(other) is None


@pytest.mark.django_db
@pytest.mark.parametrize("debug", [True, False])
@pytest.mark.parametrize("method", ["post", "put", "patch", "delete"])
def test_a_write_to_a_url_without_its_slash_is_not_found(client, settings, debug, method):
    """A redirect to the slash URL would lose the body: a 404, never Django's DEBUG RuntimeError (a 500)."""
    settings.DEBUG = debug
    response = getattr(client, method)("/threads/search", data="{}", content_type="application/json")
    assert response.status_code == 404
    assert client.get("/threads").status_code == 301  # a page's URL without its slash still leads to it
