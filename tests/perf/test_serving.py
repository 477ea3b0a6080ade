"""Production serving: `check --deploy` is clean with production settings, static files
are collected into whitenoise's compressed manifest storage, and /metrics sums workers."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command
from django.templatetags.static import static
from django.test import override_settings

ROOT = Path(__file__).resolve().parents[2]

# What docs/scaling.md ("Serving on one machine") asks of a production environment.
PRODUCTION_ENV = {
    "DJANGO_DEBUG": "0",
    "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
    "DJANGO_ALLOWED_HOSTS": "memory.example.com",
    "DJANGO_HTTPS": "1",
    "DJANGO_SECURE_SSL_REDIRECT": "1",
    "DJANGO_SECURE_HSTS_SECONDS": "31536000",
    "DJANGO_SECURE_HSTS_PRELOAD": "1",
    "DJANGO_BEHIND_TLS_PROXY": "1",
}


def manage(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    # A clean environment: no DATABASE_URL or DEBUG leaking in from the test run.
    base = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "DATABASE_", "PYTEST"))}
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env={**base, **env}, capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize(
    "database",
    [
        {},
        {"DATABASE_URL": "postgres://memoryadmin@db.internal:5432/memoryadmin", "DJANGO_DB_POOL": "1"},
        {"DATABASE_URL": "postgres://memoryadmin@pgbouncer:6432/memoryadmin", "DJANGO_DB_DISABLE_SERVER_SIDE_CURSORS": "1"},
    ],
    ids=["sqlite", "postgres-pool", "postgres-pgbouncer"],
)
def test_check_deploy_is_clean_with_production_settings(database):
    result = manage("check", "--deploy", "--fail-level", "WARNING", env={**PRODUCTION_ENV, **database})
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_check_deploy_fails_without_https_settings():
    env = {k: v for k, v in PRODUCTION_ENV.items() if "SECURE" not in k and k != "DJANGO_HTTPS"}
    result = manage("check", "--deploy", "--fail-level", "WARNING", env=env)
    assert result.returncode != 0
    assert "security.W004" in result.stderr  # no HSTS
    assert "security.W008" in result.stderr  # no SSL redirect


def test_production_refuses_the_development_secret_key():
    env = {**PRODUCTION_ENV, "DJANGO_SECRET_KEY": "dev-insecure-memoryadmin-key-change-me"}
    result = manage("check", env=env)
    assert result.returncode != 0
    assert "DJANGO_SECRET_KEY" in result.stderr


def test_pool_setting_replaces_persistent_connections():
    code = "from django.conf import settings as s; d = s.DATABASES['default']; print(d['CONN_MAX_AGE'], sorted(d['OPTIONS']['pool']))"
    result = manage(
        "shell", "-c", code,
        env={**PRODUCTION_ENV, "DATABASE_URL": "postgres://u@h:5432/d", "DJANGO_DB_POOL": "1", "DJANGO_DB_POOL_MAX_SIZE": "8"},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1].split() == ["0", "['max_size',", "'min_size',", "'timeout']"]


@pytest.mark.django_db
def test_collectstatic_fills_the_compressed_manifest_storage(tmp_path):
    storages = {
        "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
        "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
    }
    with override_settings(STATIC_ROOT=tmp_path, STORAGES=storages, DEBUG=False):
        call_command("collectstatic", "--noinput", verbosity=0)
        url = static("css/app.css")
    # A content-hashed name (cacheable forever), beside its gzip copy.
    assert url.startswith("/static/css/app.") and url.endswith(".css") and url != "/static/css/app.css"
    hashed = tmp_path / url.removeprefix("/static/")
    assert hashed.is_file()
    assert hashed.with_name(hashed.name + ".gz").is_file()
    assert (tmp_path / "staticfiles.json").is_file()


def _gunicorn_config(env: dict[str, str]) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("GUNICORN_", "PROMETHEUS_"))}
    # preload_app loads Django, whose production settings refuse the development key
    # (a fresh checkout has no .env): give it one, as a deployment would.
    base.setdefault("DJANGO_SECRET_KEY", "serving-test-secret-key-0123456789-abcdefghijklmnop")
    result = subprocess.run(
        [sys.executable, "-m", "gunicorn", "-c", "gunicorn.conf.py", "--print-config"],
        cwd=ROOT, env={**base, **env}, capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 0, result.stderr
    settings = {}
    for line in result.stdout.splitlines():
        name, sep, value = line.partition("=")
        if sep:
            settings[name.strip()] = value.strip()
    return settings


def test_gunicorn_config_sizes_workers_from_the_cpu_count():
    config = _gunicorn_config({})
    assert int(config["workers"]) == 2 * os.cpu_count() + 1
    # uvicorn's gunicorn worker, ending its live streams first when it stops (memoryadmin/worker.py).
    assert (config["worker_class"], config["preload_app"]) == ("memoryadmin.worker.Worker", "True")
    from uvicorn_worker import UvicornWorker

    from memoryadmin.worker import Worker

    assert issubclass(Worker, UvicornWorker)
    assert config["timeout"] == "30" and config["accesslog"] == "-"
    assert config["wsgi_app"] == "memoryadmin.asgi:application"


def test_gunicorn_config_reads_the_environment(tmp_path):
    config = _gunicorn_config(
        {"GUNICORN_WORKERS": "3", "GUNICORN_BIND": "127.0.0.1:9001",
         "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "metrics")}
    )
    assert (config["workers"], config["bind"]) == ("3", "['127.0.0.1:9001']")
    # The metrics directory is made (and emptied) by the master before the app loads.
    assert (tmp_path / "metrics").is_dir()
