"""A newcomer's server: `manage.py runserver` (what `make run` starts) in its own process.

On PostgreSQL it must not pile up connections (each connection is served by a thread
that ends with it); with DEBUG off and collectstatic not run its pages still work; and
on a database that was never migrated /healthz says so instead of "ok".
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import httpx
import psycopg
import pytest
from django.core.management import call_command
from django.db import connection
from django.templatetags.static import static
from django.test import override_settings

from ..conftest import IS_POSTGRES
from .servers import ROOT, Server, manage, server_env

REQUESTS = 500
MAX_CONNECTIONS = 10


@pytest.fixture
def own_postgres_database(django_db_blocker):
    """A database of this test's own on the test run's PostgreSQL server, dropped afterwards."""
    with django_db_blocker.unblock():
        settings = connection.settings_dict
    name = f"{settings['NAME']}_devserver"[:63]
    auth = settings["USER"] + (f":{settings['PASSWORD']}" if settings.get("PASSWORD") else "")
    server = f"postgres://{auth}@{settings['HOST'] or '127.0.0.1'}:{settings['PORT'] or 5432}"
    with psycopg.connect(f"{server}/postgres", autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"{server}/{name}", f"{server}/postgres", name
    finally:
        with psycopg.connect(f"{server}/postgres", autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def connections_to(admin_url: str, name: str) -> int:
    with psycopg.connect(admin_url, autocommit=True) as admin:
        return admin.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s", [name]).fetchone()[0]


@pytest.mark.postgres
@pytest.mark.skipif(not IS_POSTGRES, reason="connections are PostgreSQL's")
def test_the_development_server_keeps_its_connections_bounded(own_postgres_database):
    url, admin_url, name = own_postgres_database
    manage(url, "migrate", "--noinput")
    key = manage(url, "apikey", "create", "--user", "newcomer", "--create-user").strip().splitlines()[-1]
    server = Server(url)
    server.start()
    headers = {"Authorization": f"Bearer {key}"}
    peak = 0
    try:
        for index in range(REQUESTS):
            # A fresh TCP connection each time, as browsers and scripts open them: a new
            # server thread per request, the case that leaked.
            if index % 2:
                response = httpx.get(f"{server.url}/api/v1/threads", headers=headers, timeout=10)
            else:
                body = {"agent_code": "bot", "context": [{"role": "user", "content": f"m{index}"}]}
                response = httpx.put(f"{server.url}/api/v1/threads/t{index % 7}/agent-state", json=body, headers=headers, timeout=10)
            assert response.status_code == 200, (index, response.status_code, response.text[:200])
            if index % 25 == 24:
                # Checked as it goes, so a leak stops the test long before it starves the server.
                peak = max(peak, connections_to(admin_url, name))
                assert peak <= MAX_CONNECTIONS, f"{peak} connections after {index + 1} requests"
        assert connections_to(admin_url, name) <= MAX_CONNECTIONS
        print(f"peak {peak} connections over {REQUESTS} requests")
    finally:
        server.kill()


def test_pages_work_with_debug_off_before_collectstatic(tmp_path):
    url = f"sqlite:///{tmp_path / 'db.sqlite3'}"
    static = {"DJANGO_STATIC_ROOT": str(tmp_path / "not-collected")}
    manage(url, "migrate", "--noinput", **static)
    server = Server(url, **static)
    server.start()
    try:
        page = httpx.get(f"{server.url}/accounts/login/", timeout=10)
        assert page.status_code == 200, page.text[:300]
        assets = sorted(set(re.findall(r'(?:href|src)="(/static/[^"]+)"', page.text)))
        assert any(asset.endswith(".css") for asset in assets) and any(asset.endswith(".js") for asset in assets)
        for asset in assets:
            assert httpx.get(f"{server.url}{asset}", timeout=10).status_code == 200, asset
        assert httpx.get(f"{server.url}/no-such-page", timeout=10).status_code == 404
    finally:
        server.kill()


def test_healthz_on_a_database_never_migrated_is_unavailable(tmp_path):
    server = Server(f"sqlite:///{tmp_path / 'empty.sqlite3'}")
    server.start()
    try:
        response = httpx.get(f"{server.url}/healthz", timeout=10)
        assert response.status_code == 503 and response.json() == {"status": "unavailable"}
        assert response.headers["Retry-After"]
    finally:
        server.kill()


@pytest.mark.django_db
def test_the_production_storage_names_sources_until_collectstatic_then_hashed_files(tmp_path):
    storages = {
        "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
        "staticfiles": {"BACKEND": "memoryadmin.staticfiles.CollectedOrSourceStaticFilesStorage"},
    }
    with override_settings(STATIC_ROOT=tmp_path, STORAGES=storages, DEBUG=False):
        assert static("css/app.css") == "/static/css/app.css"
        call_command("collectstatic", "--noinput", verbosity=0)
        hashed = static("css/app.css")
    assert re.fullmatch(r"/static/css/app\.[0-9a-f]{12}\.css", hashed)
    assert (tmp_path / hashed.removeprefix("/static/")).is_file()


def test_the_servers_give_up_persistent_connections_and_the_asgi_server_pools_them():
    def database(argv: list[str], **extra: str) -> dict:
        code = (
            f"import sys, json; sys.argv = {argv!r}; from memoryadmin import settings; "
            "db = settings.DATABASES['default']; print(json.dumps([db['CONN_MAX_AGE'], db.get('OPTIONS', {}).get('pool')]))"
        )
        # Direct to PostgreSQL, whatever pooler the suite itself runs behind.
        env = {**server_env("postgres://postgres@127.0.0.1:5432/unused"), "DJANGO_CONN_MAX_AGE": "60",
               "DJANGO_DB_POOLER": "none", **extra}
        done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
        return json.loads(done.stdout)

    # The development server: a thread per connection, no pool.
    assert database(["manage.py", "runserver", "127.0.0.1:8000"]) == [0, None]
    # The ASGI server (gunicorn with uvicorn workers, or uvicorn): a thread per request, a pool per process.
    for argv in (["/srv/.venv/bin/gunicorn", "-c", "gunicorn.conf.py"], ["/x/site-packages/gunicorn/__main__.py"], ["uvicorn"]):
        max_age, pool = database(argv)
        assert max_age == 0 and pool["max_size"] >= 1, argv
    # Behind a transaction pooler, or with the pool turned off: a connection per request.
    assert database(["gunicorn"], DJANGO_DB_POOLER="transaction") == [0, None]
    assert database(["gunicorn"], DJANGO_DB_POOL="0") == [0, None]
    # Every other command keeps the configured persistent connections.
    assert database(["manage.py", "migrate"]) == [60, None]
