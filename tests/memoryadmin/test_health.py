"""/healthz: ok or unavailable, a schema check, Retry-After, and no details for strangers."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.recorder import MigrationRecorder
from django.db.utils import OperationalError

from memoryadmin.views import _latest_migrations

from ..conftest import login_client

pytestmark = pytest.mark.django_db


@pytest.fixture
def database_down(monkeypatch):
    def broken(*args, **kwargs):
        raise OperationalError('connection to server at "db.internal" (10.1.2.3), port 6543 failed: refused')

    monkeypatch.setattr(connection, "cursor", broken)


def test_anonymous_callers_learn_only_that_it_is_unavailable_and_when_to_retry(client, database_down):
    response = client.get("/healthz")
    assert response.status_code == 503 and response.json() == {"status": "unavailable"}
    assert response["Retry-After"] == "5"
    assert "db.internal" not in response.content.decode() and "6543" not in response.content.decode()


def test_a_database_without_the_latest_migration_is_unavailable(client, alice, admin_user):
    app, name = min(_latest_migrations())
    assert client.get("/healthz").json() == {"status": "ok"}
    MigrationRecorder.Migration.objects.filter(app=app, name=name).delete()
    anonymous = client.get("/healthz")
    assert anonymous.status_code == 503 and anonymous.json() == {"status": "unavailable"} and anonymous["Retry-After"]
    login_client(client, alice)
    assert client.get("/healthz").json() == {"status": "unavailable"}
    login_client(client, admin_user)
    shown = client.get("/healthz").json()
    assert shown["status"] == "unavailable" and f"{app}.{name}" in shown["problem"]


def test_a_database_without_the_schema_is_unavailable(client):
    # As if never migrated: no record of any migration (the test's transaction undoes this).
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE django_migrations RENAME TO django_migrations_away")
    response = client.get("/healthz")
    assert response.status_code == 503 and response.json() == {"status": "unavailable"}
