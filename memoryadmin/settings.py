"""memoryadmin settings: one file, driven by environment variables.

Every variable is documented in `.env.example`. Django's own settings take a
`DJANGO_` prefix; the database comes from `DATABASE_URL` (SQLite by default).

This is the only module that reads the environment: everything else reads
`django.conf.settings.X`. Each variable goes through a typed helper below
(`env_str`, `env_bool`, `env_int`, `env_float`, `env_list`, `env_choice`, `env_rate`,
`env_cron`), which refuses a value it cannot use with ImproperlyConfigured naming the
variable, so a typo stops the server at start instead of surfacing on some later request.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import re
import socket
import sys
from pathlib import Path

import croniter
import dj_database_url
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent

DEV_SECRET_KEY = "dev-insecure-memoryadmin-key-change-me"


def load_env_file(path: Path) -> None:
    """KEY=VALUE lines of a local `.env`; the real environment wins. `KEY=` leaves KEY unset."""
    if not path.is_file():
        return
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.partition("=")
        if value := value.strip().strip("'\""):
            os.environ.setdefault(key.strip(), value)


if "pytest" not in sys.modules:
    load_env_file(BASE_DIR / ".env")


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name) or default  # empty is unset, as for every reader here


def env_bool(name: str, default: bool = False) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    value = raw.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"{name} must be a boolean (1/0, true/false, yes/no), not {raw!r}")


def _bounded(name: str, raw: str, value, minimum, maximum, kind: str):
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        if maximum is None:
            bound = f"at least {minimum}"
        elif minimum is None:
            bound = f"at most {maximum}"
        else:
            bound = f"from {minimum} to {maximum}"
        raise ImproperlyConfigured(f"{name} must be {kind} {bound}, not {raw!r}")
    return value


def env_int(name: str, default: int, *, minimum: int | None = None, maximum: int | None = None) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must be an integer, not {raw!r}") from exc
    return _bounded(name, raw, value, minimum, maximum, "an integer")


def env_float(name: str, default: float, *, minimum: float | None = None, maximum: float | None = None) -> float:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise ImproperlyConfigured(f"{name} must be a number, not {raw!r}")
    return _bounded(name, raw, value, minimum, maximum, "a number")


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    if raw not in choices:
        raise ImproperlyConfigured(f"{name} must be one of {', '.join(choices)}, not {raw!r}")
    return raw


def env_rate(name: str, default: str) -> str:
    """A request rate as DRF's throttles read it: a count, a slash, a period (s, min, h, day)."""
    raw = env_str(name, default)
    if not re.fullmatch(r"[0-9]+/(s|sec|second|m|min|minute|h|hour|d|day)", raw):
        raise ImproperlyConfigured(f"{name} must be a rate such as 6000/min or 100/s, not {raw!r}")
    return raw


def env_list(name: str, default: str = "") -> list[str]:
    return [item.strip() for item in env_str(name, default).split(",") if item.strip()]


def env_cron(name: str, default: str) -> str:
    """A crontab schedule (five fields, or six with seconds), or empty for none."""
    raw = env_str(name, default).strip()
    if raw and not croniter.croniter.is_valid(raw):
        raise ImproperlyConfigured(f"{name} must be a crontab schedule such as '15 3 * * *' (or empty), not {raw!r}")
    return raw


DEBUG = env_bool("DJANGO_DEBUG", False)
TESTING = "pytest" in sys.modules
SECRET_KEY = env_str("DJANGO_SECRET_KEY", DEV_SECRET_KEY)
if not DEBUG and not TESTING and SECRET_KEY == DEV_SECRET_KEY:
    raise ImproperlyConfigured(
        "DJANGO_SECRET_KEY is the development key while DJANGO_DEBUG is off; set a real secret."
    )

ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", "localhost,127.0.0.1,[::1],testserver")
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS", "")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "template_partials",
    "csp",
    "axes",
    "memoryadmin",
    "sessions_app",
    "store_app",
    "graphs_app",
    "memoryadmin.operations",
    # The job queue's tables, its Django app and its worker (memoryadmin/queue.py).
    "procrastinate.contrib.django",
]

# memoryadmin.pagemiddleware.X is Django's (or the library's) X, left out of API requests
# that carry an API key: an agent's call has no session, messages or htmx.
MIDDLEWARE = [
    "memoryadmin.middleware.RequestMetricsMiddleware",
    "memoryadmin.middleware.RequestLimitsMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "memoryadmin.pagemiddleware.Sessions",
    "memoryadmin.middleware.CommonMiddleware",
    # Kept whole: Django's deploy check looks for it by name, and DRF's views are exempt anyway.
    "django.middleware.csrf.CsrfViewMiddleware",
    "memoryadmin.pagemiddleware.Authentication",
    "memoryadmin.replica.ReplicaReadsMiddleware",
    "memoryadmin.pagemiddleware.Messages",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "memoryadmin.pagemiddleware.ContentSecurityPolicy",
    "memoryadmin.pagemiddleware.Htmx",
    "memoryadmin.middleware.DomainErrorMiddleware",
    # Last, as django-axes asks: it turns a locked-out login into its lockout answer.
    "memoryadmin.pagemiddleware.Axes",
]
# django-axes looks for its middleware by name; memoryadmin.pagemiddleware.Axes is it.
SILENCED_SYSTEM_CHECKS = ["axes.W002"]

ROOT_URLCONF = "memoryadmin.urls"
WSGI_APPLICATION = "memoryadmin.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "memoryadmin.context_processors.role_flags",
            ],
        },
    },
]

DATABASES = {
    "default": dj_database_url.parse(
        env_str("DATABASE_URL", f"sqlite:///{BASE_DIR / 'var' / 'memoryadmin.sqlite3'}"),
        conn_max_age=env_int("DJANGO_CONN_MAX_AGE", 60, minimum=0),
        conn_health_checks=True,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # IMMEDIATE transactions take the write lock at BEGIN, so two concurrent saves
    # queue instead of failing with "database is locked" on lock upgrade; WAL lets
    # readers go on while a save is written.
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "transaction_mode": "IMMEDIATE",
            "timeout": 20,
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        }
    )
    # Tests use a file too, not Django's shared in-memory database: live-server tests
    # write from several threads, and only a file gives them the same locking (and the
    # same busy timeout) as production.
    DATABASES["default"]["TEST"] = {"NAME": str(BASE_DIR / "var" / f"test-{os.getpid()}.sqlite3")}
    (BASE_DIR / "var").mkdir(exist_ok=True)
def _pool_options() -> dict[str, int]:
    return {
        "min_size": env_int("DJANGO_DB_POOL_MIN_SIZE", 2, minimum=0),
        "max_size": env_int("DJANGO_DB_POOL_MAX_SIZE", 4, minimum=1),
        "timeout": env_int("DJANGO_DB_POOL_TIMEOUT", 10, minimum=1),
    }


_transaction_pooler = False
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # Connections (docs/scaling.md "Connections"): by default each worker thread keeps
    # its connection for DJANGO_CONN_MAX_AGE seconds; DJANGO_DB_POOL=1 gives each
    # process a psycopg pool instead (Django refuses a pool with persistent connections).
    if env_bool("DJANGO_DB_POOL", False):
        DATABASES["default"]["CONN_MAX_AGE"] = 0
        DATABASES["default"].setdefault("OPTIONS", {})["pool"] = _pool_options()
    # Behind a pooler in transaction mode (PgBouncer's pool_mode = transaction) each
    # transaction may run on another server connection: a server-side cursor would outlive
    # the transaction that opened it, and a statement psycopg prepared on one connection is
    # unknown on the next. DJANGO_DB_POOLER=transaction turns both off (docs/scaling.md); else
    # the hottest statements are prepared after 5 runs (memoryadmin/postgres/prepared.py).
    _transaction_pooler = env_choice("DJANGO_DB_POOLER", "none", ("none", "transaction")) == "transaction"
    DATABASES["default"]["DISABLE_SERVER_SIDE_CURSORS"] = _transaction_pooler or env_bool(
        "DJANGO_DB_DISABLE_SERVER_SIDE_CURSORS", False
    )
    DATABASES["default"].setdefault("OPTIONS", {})["prepare_threshold"] = None if _transaction_pooler else 5

# The development server (`manage.py runserver`, what `make run` starts) serves each
# connection in a thread of its own that ends with it; a database connection kept for
# the next request outlives that thread unclosed, so persistent connections pile up
# until PostgreSQL refuses more (503s). Under it every request closes its connection.
RUNSERVER = sys.argv[1:2] == ["runserver"]
if RUNSERVER:
    DATABASES["default"]["CONN_MAX_AGE"] = 0
# The production server (gunicorn.conf.py: gunicorn with uvicorn's ASGI workers, or uvicorn
# alone) runs each request's synchronous code in a thread of its own too (Django's ASGI
# handler, one thread per request), so it keeps no connection past a request either: on
# PostgreSQL each worker process has a psycopg pool (DJANGO_DB_POOL defaults to on there);
# behind a transaction pooler, or with DJANGO_DB_POOL=0, each request closes its connection.
ASGI_SERVER = bool({"gunicorn", "uvicorn"} & set(Path(sys.argv[0]).parts[-2:]))
if ASGI_SERVER and DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    if not _transaction_pooler and env_bool("DJANGO_DB_POOL", True) and "pool" not in DATABASES["default"].get("OPTIONS", {}):
        DATABASES["default"].setdefault("OPTIONS", {})["pool"] = _pool_options()
# Live-turn streams wait on PostgreSQL's LISTEN with one connection per server process
# (sessions_app/turns/listener.py). LISTEN needs a session of its own, which a pooler in
# transaction mode does not give: DATABASE_LISTEN_URL reaches PostgreSQL directly (default:
# DATABASE_URL). Only its server and credentials are used when it names the same database
# as DATABASE_URL (tests rename that database); another name is a pooler's alias resolved.
DATABASE_LISTEN = None
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    _listen = dj_database_url.parse(env_str("DATABASE_LISTEN_URL") or env_str("DATABASE_URL"))
    if _listen["ENGINE"] != "django.db.backends.postgresql":
        raise ImproperlyConfigured("DATABASE_LISTEN_URL must be a postgres:// URL, like DATABASE_URL")
    DATABASE_LISTEN = {
        "host": _listen.get("HOST") or "", "port": str(_listen.get("PORT") or ""), "user": _listen.get("USER") or "",
        "password": _listen.get("PASSWORD") or "",
        # None: the database the default connection uses, whatever tests rename it to.
        "dbname": None if _listen.get("NAME") == DATABASES["default"]["NAME"] else _listen.get("NAME"),
    }

# A PostgreSQL streaming replica for the dashboard's page reads (memoryadmin/replica.py,
# docs/scaling.md). The API, sessions, users and every write stay on the primary.
_replica_url = env_str("DATABASE_REPLICA_URL")
# The queue's migrations are PostgreSQL functions and triggers: on SQLite they are recorded
# as applied and run nothing (memoryadmin/queue.py).
DATABASE_ROUTERS = ["memoryadmin.queue.QueueRouter"]
if _replica_url:
    DATABASES["replica"] = {
        **dj_database_url.parse(
            _replica_url, conn_max_age=0 if RUNSERVER else env_int("DJANGO_CONN_MAX_AGE", 60, minimum=0), conn_health_checks=True
        ),
        # Tests have no second database: the alias reads the test database itself.
        "TEST": {"MIRROR": "default"},
    }
    DATABASE_ROUTERS.append("memoryadmin.replica.ReplicaRouter")
# After a write through the dashboard, that browser reads from the primary this long.
MEMORYADMIN_REPLICA_PIN_SECONDS = env_int("MEMORYADMIN_REPLICA_PIN_SECONDS", 5, minimum=0)
# A replica that does not answer is left alone this long before it is tried again.
MEMORYADMIN_REPLICA_RETRY_SECONDS = env_int("MEMORYADMIN_REPLICA_RETRY_SECONDS", 30, minimum=0)

# Background jobs (docs/operations.md, "Jobs"): on PostgreSQL a procrastinate queue served by
# `manage.py jobs_worker`; on SQLite, which has no queue, a job runs in the request that
# starts it. The worker listens (LISTEN/NOTIFY) and fetches jobs on a session of its own:
# behind a transaction pooler point DATABASE_WORKER_URL at PostgreSQL itself.
MEMORYADMIN_JOBS_QUEUE = DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql"
# A pooled database's connections are checked before each loan without a round trip
# (memoryadmin/postgres/base.py): Django's PostgreSQL backend but for that check.
if "pool" in DATABASES["default"].get("OPTIONS", {}):
    DATABASES["default"]["ENGINE"] = "memoryadmin.postgres"
_worker_url = env_str("DATABASE_WORKER_URL")
if _worker_url and not _worker_url.startswith(("postgres://", "postgresql://")):
    raise ImproperlyConfigured(f"DATABASE_WORKER_URL must be a postgres:// URL (or empty), not {_worker_url!r}")
MEMORYADMIN_WORKER_DATABASE = dj_database_url.parse(_worker_url) if _worker_url else None
# A worker proves it is alive this often; a job whose worker has been silent for three of
# these is taken again by the next worker (at its start, and every minute).
MEMORYADMIN_WORKER_HEARTBEAT_SECONDS = env_float("MEMORYADMIN_WORKER_HEARTBEAT_SECONDS", 10.0, minimum=0.5, maximum=600)
PROCRASTINATE_WORKER_DEFAULTS = {
    "concurrency": env_int("MEMORYADMIN_WORKER_CONCURRENCY", 2, minimum=1, maximum=64),
    "update_heartbeat_interval": MEMORYADMIN_WORKER_HEARTBEAT_SECONDS,
    "stalled_worker_timeout": 3 * MEMORYADMIN_WORKER_HEARTBEAT_SECONDS,
    # A finished job's queue row goes; what it did is in its own row (BulkJob, RetentionRun).
    "delete_jobs": "successful",
}
# Where the queue's exports (bulk exports too large for one request) are written.
MEMORYADMIN_EXPORT_DIR = Path(env_str("MEMORYADMIN_EXPORT_DIR") or BASE_DIR / "var" / "exports")
# What the queue runs on its own: the retention policies, the store's TTL sweep.
MEMORYADMIN_RETENTION_SCHEDULE = env_cron("MEMORYADMIN_RETENTION_SCHEDULE", "15 3 * * *")
MEMORYADMIN_STORE_SWEEP_SCHEDULE = env_cron("MEMORYADMIN_STORE_SWEEP_SCHEDULE", "*/10 * * * *")

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]

# Login lockout (django-axes): this many failures for one username from one address
# lock that pair out for AXES_COOLOFF_TIME hours.
AXES_FAILURE_LIMIT = env_int("MEMORYADMIN_LOGIN_FAILURE_LIMIT", 5, minimum=1)
AXES_COOLOFF_TIME = env_int("MEMORYADMIN_LOGIN_COOLOFF_MINUTES", 15, minimum=1) / 60
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
AXES_VERBOSE = False

# Shared by the throttles and the login lockout. The default cache lives in each
# process; set DJANGO_CACHE_URL=redis://… so several processes share one count.
_cache_url = env_str("DJANGO_CACHE_URL", "")
if _cache_url and not _cache_url.startswith(("redis://", "rediss://")):
    raise ImproperlyConfigured(f"DJANGO_CACHE_URL must be a redis:// or rediss:// URL (or empty), not {_cache_url!r}")
CACHES = {
    "default": (
        {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": _cache_url}
        if _cache_url
        else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "memoryadmin"}
    )
}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

if TESTING:
    # Hashing passwords slowly protects real accounts, not test fixtures.
    PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = env_str("DJANGO_TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
# Where collectstatic puts the files whitenoise serves in production.
STATIC_ROOT = Path(env_str("DJANGO_STATIC_ROOT") or BASE_DIR / "staticfiles")
STATICFILES_DIRS = [BASE_DIR / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": (
            "django.contrib.staticfiles.storage.StaticFilesStorage"
            if DEBUG or TESTING
            else "memoryadmin.staticfiles.CollectedOrSourceStaticFilesStorage"
        )
    },
}
# collectstatic's manifest. Until it exists (DEBUG off, collectstatic not run yet) pages name
# the source files and whitenoise serves them from the apps (memoryadmin/staticfiles.py).
STATIC_COLLECTED = (STATIC_ROOT / "staticfiles.json").is_file()
WHITENOISE_USE_FINDERS = DEBUG or TESTING or not STATIC_COLLECTED
WHITENOISE_AUTOREFRESH = DEBUG or TESTING
WHITENOISE_MANIFEST_STRICT = False

# Request bodies above this many bytes are refused with 413 before they are read.
MEMORYADMIN_MAX_BODY_BYTES = env_int("MEMORYADMIN_MAX_BODY_BYTES", 16 * 1024 * 1024, minimum=1)
DATA_UPLOAD_MAX_MEMORY_SIZE = MEMORYADMIN_MAX_BODY_BYTES
# Under ASGI the API's hottest methods skip Django's handler and DRF's dispatch (memoryadmin/direct.py).
MEMORYADMIN_DIRECT_CALLS = env_bool("MEMORYADMIN_DIRECT_CALLS", True)
# Longest context accepted in one agent-state save.
MEMORYADMIN_MAX_CONTEXT_MESSAGES = env_int("MEMORYADMIN_MAX_CONTEXT_MESSAGES", 100_000, minimum=1)
# The graph compiler's limits (docs/graphs.md): nodes in all levels together, and edges, a
# condition counting once per outcome. Compiling is linear in both; the ceilings keep one
# compile within a few seconds.
MEMORYADMIN_GRAPH_MAX_NODES = env_int("MEMORYADMIN_GRAPH_MAX_NODES", 10_000, minimum=1, maximum=50_000)
MEMORYADMIN_GRAPH_MAX_EDGES = env_int("MEMORYADMIN_GRAPH_MAX_EDGES", 20_000, minimum=1, maximum=100_000)
# LangGraph threads as conversations (docs/checkpoints.md, "Conversation"): the channel of
# root checkpoints that holds the LangChain messages, stored as the thread's blocks, and the
# agent_code they are stored under ("" takes the graph_id or assistant_id of the checkpoint's
# metadata, else "langgraph").
MEMORYADMIN_LANGGRAPH_MESSAGES_CHANNEL = env_str("MEMORYADMIN_LANGGRAPH_MESSAGES_CHANNEL", "messages")
MEMORYADMIN_LANGGRAPH_AGENT_CODE = env_str("MEMORYADMIN_LANGGRAPH_AGENT_CODE", "")

# The long-term store's semantic search (docs/store.md, "Semantic search"). An embedder the
# server runs itself, by dotted path (a function: list of texts -> one list of floats each;
# store_app.embedders.minilm or .hashing), and the length of its vectors. Empty: the server
# embeds nothing, and only clients that bring their own vectors rank by meaning.
MEMORYADMIN_STORE_EMBEDDER = env_str("MEMORYADMIN_STORE_EMBEDDER", "")
if MEMORYADMIN_STORE_EMBEDDER and not re.fullmatch(r"[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)+", MEMORYADMIN_STORE_EMBEDDER):
    raise ImproperlyConfigured(
        f"MEMORYADMIN_STORE_EMBEDDER must be a dotted path such as store_app.embedders.minilm, not {MEMORYADMIN_STORE_EMBEDDER!r}"
    )
MEMORYADMIN_STORE_EMBED_DIMS = env_int("MEMORYADMIN_STORE_EMBED_DIMS", 384, minimum=1, maximum=4096)
# The value fields the server embeds when a put names none (LangGraph's index "fields"),
# comma-separated; a comma inside braces ("{title,body}") belongs to the path.
MEMORYADMIN_STORE_EMBED_FIELDS = [
    path.strip() for path in re.split(r",(?![^{]*\})", env_str("MEMORYADMIN_STORE_EMBED_FIELDS", "$")) if path.strip()
]
if not MEMORYADMIN_STORE_EMBED_FIELDS:
    raise ImproperlyConfigured("MEMORYADMIN_STORE_EMBED_FIELDS must name at least one field path, such as $ or text")
# A semantic search ranks at most this many items: the most recently updated ones under its
# prefix and filter (the rest are not looked at; a narrower prefix or filter reaches them).
MEMORYADMIN_STORE_VECTOR_CANDIDATES = env_int("MEMORYADMIN_STORE_VECTOR_CANDIDATES", 20_000, minimum=1, maximum=1_000_000)
# PostgreSQL ranks with pgvector's operators when the extension is in the database and the
# vector column is its type ("auto", looked up once per process); "off" scores with numpy
# in the server's process even then, as it does without pgvector and on SQLite.
MEMORYADMIN_STORE_PGVECTOR = env_choice("MEMORYADMIN_STORE_PGVECTOR", "auto", ("auto", "off"))
# Without pgvector a search scores its candidates' vectors in the server's process: each process
# keeps the vectors it has read, up to this many MiB (0: none kept, every search reads them), and
# uses them while their items' vectors version is unchanged (store_app.vectorcache).
MEMORYADMIN_STORE_VECTOR_CACHE_MB = env_int("MEMORYADMIN_STORE_VECTOR_CACHE_MB", 256, minimum=0, maximum=1_048_576)
# The embedders read models from local files only: the Hugging Face libraries never reach a hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

# Turns (docs/turns.md): finished turns kept per thread, and the longest answer kept.
MEMORYADMIN_TURN_WINDOW = env_int("MEMORYADMIN_TURN_WINDOW", 10, minimum=1)
MEMORYADMIN_TURN_MAX_ANSWER_CHARS = env_int("MEMORYADMIN_TURN_MAX_ANSWER_CHARS", 4000, minimum=1)

# Set by gunicorn.conf.py before the app is imported: each worker writes its Prometheus
# counts there and /metrics sums them (memoryadmin/views.py). Empty: one process counts.
PROMETHEUS_MULTIPROC_DIR = env_str("PROMETHEUS_MULTIPROC_DIR")

# The live turn stream (server-sent events, docs/turns.md): how often it reads the
# database where nothing can notify it (SQLite), how often it writes a heartbeat comment
# (and renews its lease), its longest life. Under the ASGI server a departed client is
# noticed when its connection closes, not at a write: the heartbeat is for proxies that
# close idle connections, and for the lease.
MEMORYADMIN_TURN_SSE_POLL_SECONDS = env_float("MEMORYADMIN_TURN_SSE_POLL_SECONDS", 0.5, minimum=0.01)
MEMORYADMIN_TURN_SSE_HEARTBEAT_SECONDS = env_float("MEMORYADMIN_TURN_SSE_HEARTBEAT_SECONDS", 5.0, minimum=0.1)
MEMORYADMIN_TURN_SSE_MAX_SECONDS = env_float("MEMORYADMIN_TURN_SSE_MAX_SECONDS", 300.0, minimum=1)
# An open stream holds a lease row, renewed at every heartbeat; one not renewed for
# this long belongs to a killed worker and no longer counts.
MEMORYADMIN_TURN_SSE_LEASE_SECONDS = env_float("MEMORYADMIN_TURN_SSE_LEASE_SECONDS", 15.0, minimum=0.5)
if MEMORYADMIN_TURN_SSE_LEASE_SECONDS <= 2 * MEMORYADMIN_TURN_SSE_HEARTBEAT_SECONDS:
    raise ImproperlyConfigured(
        "MEMORYADMIN_TURN_SSE_LEASE_SECONDS must exceed two heartbeats (MEMORYADMIN_TURN_SSE_HEARTBEAT_SECONDS), "
        "or the leases of open streams would expire between their renewals."
    )
# Open streams. Under the ASGI server a stream is a coroutine waiting on LISTEN/NOTIFY and
# holds no request capacity; the limits bound what one user may open and the memory and
# event-loop time one worker process (and the server: workers x per process) gives to
# streams. docs/turns.md ("Limits").
_GUNICORN_WORKERS = env_int("GUNICORN_WORKERS", multiprocessing.cpu_count() * 2 + 1, minimum=1)
# 0 opens no stream at all (the turns panel's 2 s poll still shows the turn).
MEMORYADMIN_TURN_STREAMS_PER_USER = env_int("MEMORYADMIN_TURN_STREAMS_PER_USER", 3, minimum=0)
MEMORYADMIN_TURN_STREAMS_PER_PROCESS = env_int("MEMORYADMIN_TURN_STREAMS_PER_PROCESS", 200, minimum=0)
MEMORYADMIN_TURN_STREAMS_PER_SERVER = env_int(
    "MEMORYADMIN_TURN_STREAMS_PER_SERVER", _GUNICORN_WORKERS * MEMORYADMIN_TURN_STREAMS_PER_PROCESS, minimum=0
)
# This server in the lease table: servers sharing a database count their streams apart.
MEMORYADMIN_SERVER_NAME = env_str("MEMORYADMIN_SERVER_NAME") or socket.gethostname()
# One person's repeated reads of one thread, item or listing of another user's within this
# many seconds are one audit event (0 records every read; docs/operations.md, "Audit log").
MEMORYADMIN_AUDIT_READ_WINDOW_SECONDS = env_int("MEMORYADMIN_AUDIT_READ_WINDOW_SECONDS", 300, minimum=0)
# API keys checked in the last this many seconds are found again without a query, in the
# server process that checked them (memoryadmin/apikeys.py). A revoke, a role change or a
# deactivated user takes effect at once in the process that made it, and within this many
# seconds in every other one. 0 looks every key up on every request. The test suite runs
# with 0, so that its query counts include the lookup a key's first request makes; the
# cache's own tests turn it on.
MEMORYADMIN_APIKEY_CACHE_SECONDS = env_float(
    "MEMORYADMIN_APIKEY_CACHE_SECONDS", 0.0 if TESTING else 5.0, minimum=0, maximum=300
)
# Largest metadata, extra_state, store value or filter, as compact JSON (memoryadmin/jsoncheck.py);
# checkpoints, pending writes and messages may each be as large as a body.
MEMORYADMIN_MAX_JSON_BYTES = env_int("MEMORYADMIN_MAX_JSON_BYTES", 1024 * 1024, minimum=1)

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "memoryadmin.auth.ApiKeyAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["memoryadmin.json.ORJSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["memoryadmin.json.ORJSONParser"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "memoryadmin.api.exception_handler",
    "DEFAULT_THROTTLE_CLASSES": ["memoryadmin.throttling.ClientRateThrottle"],
    "DEFAULT_THROTTLE_RATES": {
        # Per API key (or per signed-in user when no key is used).
        "client": env_rate("MEMORYADMIN_THROTTLE_RATE", "6000/min"),
    },
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}

SPECTACULAR_SETTINGS = {
    "TITLE": "memoryadmin API",
    "DESCRIPTION": (
        "Conversation state, checkpoints and long-term memory for AI agents. "
        "Authenticate with `Authorization: Bearer <key>` or `X-Api-Key: <key>`."
    ),
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "SCHEMA_PATH_PREFIX": "/api/v1",
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "memoryadmin.schema.add_error_responses",
    ],
}

# Content security policy: nothing inline, nothing from elsewhere.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "font-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "frame-ancestors": ["'none'"],
        "form-action": ["'self'"],
    }
}

SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_SAMESITE = "Lax"
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SESSION_COOKIE_SECURE = env_bool("DJANGO_SECURE_COOKIES", not DEBUG and env_bool("DJANGO_HTTPS", False))
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
SECURE_SSL_REDIRECT = env_bool("DJANGO_SECURE_SSL_REDIRECT", False)
SECURE_HSTS_SECONDS = env_int("DJANGO_SECURE_HSTS_SECONDS", 0, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = SECURE_HSTS_SECONDS > 0
# Asking browsers to preload HSTS is a commitment for the whole domain: opt in.
SECURE_HSTS_PRELOAD = SECURE_HSTS_SECONDS > 0 and env_bool("DJANGO_SECURE_HSTS_PRELOAD", False)
SECURE_PROXY_SSL_HEADER = (
    ("HTTP_X_FORWARDED_PROTO", "https") if env_bool("DJANGO_BEHIND_TLS_PROXY", False) else None
)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {
        "handlers": ["console"],
        "level": env_choice("DJANGO_LOG_LEVEL", "INFO", ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")),
    },
    "loggers": {
        "django.db.backends": {"level": "INFO"},
        # Every process registers the queue's tasks at start; that is not news.
        "procrastinate.blueprints": {"level": "WARNING"},
        "procrastinate.periodic": {"level": "WARNING"},
    },
}
