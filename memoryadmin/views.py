from __future__ import annotations

import functools

from django.conf import settings
from django.db import Error, connection
from django.db.migrations.loader import MigrationLoader
from django.db.migrations.recorder import MigrationRecorder
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client import multiprocess

from . import policy, queue

HEALTH_RETRY_AFTER_SECONDS = 5


@functools.cache
def _latest_migrations() -> frozenset[tuple[str, str]]:
    """The last migration of every app, read from the code once per process."""
    return frozenset(MigrationLoader(None, ignore_no_migrations=True).graph.leaf_nodes())


def _health_problem() -> str | None:
    """None when the database answers and holds the schema this code expects; else why not.

    One query: the migrations recorded as applied. A database that answers but was never
    migrated (or not to this release) is not healthy: the API would answer it with 500s.
    """
    try:
        applied = set(MigrationRecorder.Migration.objects.using(connection.alias).values_list("app", "name"))
    except Error as exc:
        return f"database: {str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__}"
    missing = sorted(_latest_migrations() - applied)
    if missing:
        return "migrations not applied: " + ", ".join(f"{app}.{name}" for app, name in missing[:10])
    return None


def _is_admin(request: HttpRequest) -> bool:
    try:
        return policy.may_administer(request.user)
    except Error:  # the session or the user could not be read: the database is the problem
        return False


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """200 `ok` when the database answers with the expected schema, 503 `unavailable` otherwise.

    Anonymous callers (load balancers, probes) get the status only; where the database is
    and what failed is shown to a signed-in admin alone. A 503 says when to ask again.
    """
    problem = _health_problem()
    body = {"status": "ok" if problem is None else "unavailable"}
    if problem is not None and _is_admin(request):
        body["problem"] = problem
    if problem is None:
        return JsonResponse(body)
    response = JsonResponse(body, status=503)
    response["Retry-After"] = str(HEALTH_RETRY_AFTER_SECONDS)
    return response


@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    """Prometheus exposition; under several gunicorn workers, the sum over all of them.

    gunicorn.conf.py sets PROMETHEUS_MULTIPROC_DIR, where every worker writes its
    values; a scrape lands on one worker, which must then read them all. The job
    queue's depth and the age of its oldest job are read from the database at each
    scrape (one query; none on SQLite, which has no queue).
    """
    if settings.PROMETHEUS_MULTIPROC_DIR:
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry, path=settings.PROMETHEUS_MULTIPROC_DIR)
        text = generate_latest(registry)
    else:
        text = generate_latest()
    jobs = CollectorRegistry()
    jobs.register(queue.QueueCollector())
    try:
        text += generate_latest(jobs)
    except Error:  # the database is down: the process's own counters still answer
        pass
    return HttpResponse(text, content_type=CONTENT_TYPE_LATEST)
