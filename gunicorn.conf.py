"""gunicorn configuration for memoryadmin in production (`make serve`).

    gunicorn -c gunicorn.conf.py            # the app is named below (wsgi_app)

Every value can be changed by an environment variable, so one file serves a
laptop, a 2-core VM and a large host. The choices, with the figures behind them,
are in docs/scaling.md ("Serving on one machine").

- Workers: processes, because Django's request path is mostly Python and one
  process uses at most one core. 2 per core plus one (gunicorn's rule of thumb):
  while one worker waits on PostgreSQL another computes.
- Worker class: uvicorn's ASGI worker (the uvicorn-worker package; memoryadmin.worker
  makes it end its live streams first when it stops, so that a worker recycled after
  max_requests or stopped at a deploy exits at once instead of waiting on them). Each worker
  process runs one event loop: live-turn streams are coroutines waiting on
  PostgreSQL's LISTEN/NOTIFY (sessions_app/turns/listener.py), so an open stream
  holds no request capacity and no thread (memoryadmin/requestthread.py lets its
  request's thread go); synchronous views run in threads as Django's ASGI
  handler runs them (a thread per request, so no persistent database
  connections: a psycopg pool per process, memoryadmin/settings.py). gunicorn
  stays the process manager: it restarts a dead worker, recycles workers after
  max_requests, and kills one whose event loop stops answering for `timeout`.
- preload_app: the app is imported once in the master and the workers fork
  from it (faster start, shared memory pages). Nothing opens a database
  connection at import time, so no socket is shared across the fork.
- Prometheus: each worker counts on its own, so the master sets
  PROMETHEUS_MULTIPROC_DIR before the app is imported; /metrics then sums every
  worker's files (memoryadmin/views.py). The directory is emptied when the
  master starts; a dead worker's counts stay in the sums.
- gunicorn is the production server: DEBUG is off unless the environment says
  otherwise (a development `.env` with DJANGO_DEBUG=1 does not turn it on here).
"""

from __future__ import annotations

import multiprocessing
import os
import tempfile
from pathlib import Path


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name, "")
    if not raw.strip():
        return default
    try:
        return int(raw)
    except ValueError as exc:
        raise SystemExit(f"{name} must be an integer, not {raw!r}") from exc


wsgi_app = "memoryadmin.asgi:application"
bind = os.environ.get("GUNICORN_BIND", "127.0.0.1:8000").split(",")

workers = _env_int("GUNICORN_WORKERS", multiprocessing.cpu_count() * 2 + 1)
# ASGI workers: one event loop per process serves every connection it accepts.
worker_class = "memoryadmin.worker.Worker"
# The kernel's accept queue: connections not yet accepted by a worker wait here.
backlog = _env_int("GUNICORN_BACKLOG", 2048)

# A request that has not finished in this many seconds is killed with its worker.
# Saves of 100 000-message contexts take well under a second (docs/benchmarks.md).
timeout = _env_int("GUNICORN_TIMEOUT", 30)
graceful_timeout = _env_int("GUNICORN_GRACEFUL_TIMEOUT", 30)
# Keep-alive behind a load balancer: longer than nothing, shorter than its idle timeout.
keepalive = _env_int("GUNICORN_KEEPALIVE", 5)
# Recycle workers now and then (jittered, so they do not restart together): bounds
# the memory a long-lived Python process can accumulate.
max_requests = _env_int("GUNICORN_MAX_REQUESTS", 10_000)
max_requests_jitter = _env_int("GUNICORN_MAX_REQUESTS_JITTER", 1_000)
preload_app = True
# The heartbeat file on tmpfs: a worker stuck on a slow disk is not taken for dead.
worker_tmp_dir = "/dev/shm" if os.path.isdir("/dev/shm") else None

# Request limits: what a proxy would refuse anyway; bodies are bounded by the app (413).
limit_request_line = 8190
limit_request_fields = 100

accesslog = os.environ.get("GUNICORN_ACCESS_LOG", "-") or None
errorlog = os.environ.get("GUNICORN_ERROR_LOG", "-")
loglevel = os.environ.get("GUNICORN_LOG_LEVEL", "info")
# uvicorn's workers write the access log through gunicorn's handlers, in uvicorn's own
# format (client, request line, status), one line when a response starts.
# Only a proxy on these addresses may set X-Forwarded-* (see DJANGO_BEHIND_TLS_PROXY).
forwarded_allow_ips = os.environ.get("GUNICORN_FORWARDED_ALLOW_IPS", "127.0.0.1,::1")
proc_name = "memoryadmin"
# gunicorn 27's control socket defaults to one path per user, which two servers on
# one host would fight over: off unless a path is given.
control_socket = os.environ.get("GUNICORN_CONTROL_SOCKET", "")
control_socket_disable = not control_socket

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryadmin.settings")
os.environ.setdefault("DJANGO_DEBUG", "0")

# Set here, in the master, before preload imports the app (and prometheus_client
# opens its files). Files left by an earlier run would be added to this run's
# counters, so the directory starts empty.
METRICS_DIR = Path(os.environ.get("PROMETHEUS_MULTIPROC_DIR") or tempfile.mkdtemp(prefix="memoryadmin-metrics-"))
METRICS_DIR.mkdir(parents=True, exist_ok=True)
for stale in METRICS_DIR.glob("*.db"):
    stale.unlink(missing_ok=True)
os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(METRICS_DIR)


def child_exit(server, worker) -> None:
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)
