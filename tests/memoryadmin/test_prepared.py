"""The prepared cursor (memoryadmin/postgres/prepared.py): its statements are counted like any
other, read values as Django's cursor reads them, and are prepared on PostgreSQL unless a
transaction pooler is configured."""

from __future__ import annotations

import datetime
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

from memoryadmin.postgres.prepared import prepared_cursor

from ..conftest import IS_POSTGRES

ROOT = Path(__file__).resolve().parents[2]
STATEMENT = "SELECT CAST(%s AS integer) + 1, CURRENT_TIMESTAMP, CAST(%s AS text)"

pytestmark = pytest.mark.django_db


def test_its_statements_are_counted_and_read_values_as_djangos_cursor(django_assert_num_queries):
    with django_assert_num_queries(1):
        with prepared_cursor() as cursor:
            cursor.execute(STATEMENT, [41, "x"])
            answer, moment, text = cursor.fetchone()
    with connection.cursor() as cursor:
        cursor.execute(STATEMENT, [41, "x"])
        expected = cursor.fetchone()
    assert (answer, text) == (expected[0], expected[2]) == (42, "x")
    assert type(moment) is type(expected[1])
    if IS_POSTGRES:
        assert isinstance(moment, datetime.datetime) and moment.utcoffset() == expected[1].utcoffset() == datetime.timedelta(0)


def test_a_failing_statement_raises_djangos_error_and_leaves_the_connection_usable():
    from django.db import DatabaseError, transaction

    with pytest.raises(DatabaseError):
        with transaction.atomic(), prepared_cursor() as cursor:
            cursor.execute("SELECT missing_column FROM auth_user WHERE id = %s", [0])
    with prepared_cursor() as cursor:
        cursor.execute(STATEMENT, [1, "y"])
        assert cursor.fetchone()[0] == 2


@pytest.mark.postgres
@pytest.mark.skipif(not IS_POSTGRES, reason="prepared statements are PostgreSQL's")
def test_postgresql_prepares_its_statements_and_not_djangos():
    if connection.settings_dict["OPTIONS"].get("prepare_threshold", 5) is None:
        pytest.skip("behind a transaction pooler nothing is prepared")
    marker = "SELECT %s::integer + 2 /* prepared-test */"
    for n in range(6):
        with prepared_cursor() as cursor:
            cursor.execute(marker, [n])
        with connection.cursor() as cursor:
            cursor.execute("SELECT %s::integer + 3 /* client-test */", [n])
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        prepared = [row[0] for row in cursor.fetchall()]
    assert any("prepared-test" in text for text in prepared), prepared
    assert not any("client-test" in text for text in prepared), prepared


def _threshold(**env: str) -> str:
    environment = {key: value for key, value in os.environ.items() if not key.startswith("DJANGO_DB_")}
    environment.update(DATABASE_URL="postgres://postgres@127.0.0.1:5432/postgres", DJANGO_SETTINGS_MODULE="memoryadmin.settings",
                       DJANGO_SECRET_KEY="prepared-test", **env)
    code = "from django.conf import settings; print(settings.DATABASES['default']['OPTIONS'].get('prepare_threshold'))"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_statements_are_prepared_after_five_runs_and_never_behind_a_transaction_pooler():
    assert _threshold() == "5"
    assert _threshold(DJANGO_DB_POOLER="transaction") == "None"


def test_a_prepared_statement_is_logged_with_its_parameters_written_in():
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured:
        for n in range(7):  # prepared from the sixth run on PostgreSQL
            with prepared_cursor() as cursor:
                cursor.execute("SELECT CAST(%s AS integer) + 4 /* logged-test */", [n])
    logged = [query["sql"] for query in captured.captured_queries]
    assert len(logged) == 7 and all(text is not None and "logged-test" in text for text in logged)
    assert "6" in logged[-1] and "%s" not in logged[-1]


@pytest.mark.postgres
@pytest.mark.skipif(not IS_POSTGRES, reason="prepared statements are PostgreSQL's")
def test_a_statement_lost_by_an_unnamed_pooler_is_told_in_the_log_and_nothing_is_prepared_after(monkeypatch, caplog):
    from django.db import ProgrammingError, transaction

    from memoryadmin.postgres import prepared

    if connection.settings_dict["OPTIONS"].get("prepare_threshold", 5) is None:
        pytest.skip("behind a transaction pooler nothing is prepared")
    monkeypatch.setattr(prepared, "_pooler_found", False)
    marker = "SELECT %s::integer + 5 /* lost-test */"
    for n in range(6):
        with prepared_cursor() as cursor:
            cursor.execute(marker, [n])
    # What a pooler in transaction mode does: the next run lands on a server connection that
    # never saw the statement (here: the statement is deallocated under psycopg's feet).
    with connection.cursor() as cursor:
        cursor.execute("SELECT name FROM pg_prepared_statements WHERE statement LIKE '%%lost-test%%'")
        (name,) = cursor.fetchone()
        cursor.execute(f'DEALLOCATE "{name}"')
    with pytest.raises(ProgrammingError), transaction.atomic(), prepared_cursor() as cursor:
        cursor.execute(marker, [7])
    assert prepared._pooler_found and "DJANGO_DB_POOLER=transaction" in caplog.text
    for n in range(7):
        with prepared_cursor() as cursor:
            cursor.execute(marker, [n])
            assert cursor.fetchone() == (n + 5,)
    assert connection.connection.prepare_threshold is None
    connection.connection.prepare_threshold = 5


@pytest.mark.skipif(not IS_POSTGRES, reason="PostgreSQL's protocol limit (SQLite has its own, and Django's cursor)")
def test_more_parameters_than_the_protocol_binds_are_bound_in_the_client(django_assert_num_queries):
    from memoryadmin.postgres.prepared import MAX_BOUND

    n = MAX_BOUND + 10
    with django_assert_num_queries(1), prepared_cursor() as cursor:
        cursor.execute("SELECT count(*), sum(x) FROM (VALUES " + ", ".join(["(CAST(%s AS integer))"] * n) + ") AS v(x)", list(range(n)))
        assert tuple(cursor.fetchone()) == (n, n * (n - 1) // 2)
