"""Real processes for fault tests: a private PostgreSQL cluster and a memoryadmin server."""

from __future__ import annotations

import glob
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import closing
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with closing(socket.socket()) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def postgres_bindir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


class PrivateCluster:
    """A throw-away PostgreSQL cluster on a free port, which a test may stop and start at will."""

    def __init__(self, standby_of: PrivateCluster | None = None):
        self.bindir = postgres_bindir()
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix="ma-pg-"))
        self.data = self.root / "data"
        # initdb refuses to run as root: run the cluster as the postgres system user then.
        self.as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        if self.as_user:
            shutil.chown(self.root, "postgres")
        if standby_of is None:
            self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
        else:
            # A streaming replica: a base backup of the primary that follows its WAL (-R
            # writes standby.signal and primary_conninfo). initdb's trust rules let
            # 127.0.0.1 connect for replication.
            self._run(
                "pg_basebackup", "-h", "127.0.0.1", "-p", str(standby_of.port), "-U", "postgres",
                "-D", str(self.data), "-R", "-X", "stream", "--no-sync",
            )

    @property
    def url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, tool: str, *args: str) -> None:
        subprocess.run([*self.as_user, str(self.bindir / tool), *args], check=True, capture_output=True, cwd=self.root)

    def start(self) -> None:
        options = f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.root} -c fsync=off"
        self._run("pg_ctl", "-D", str(self.data), "-o", options, "-l", str(self.root / "log"), "-w", "start")

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def destroy(self) -> None:
        try:
            self.stop()
        except subprocess.CalledProcessError:
            pass
        shutil.rmtree(self.root, ignore_errors=True)


def manage(database_url: str, *args: str, **extra_env: str) -> str:
    env = {**server_env(database_url), **extra_env}
    done = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, check=True, capture_output=True, text=True)
    return done.stdout


def server_env(database_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env.update(
        DATABASE_URL=database_url,
        DJANGO_SECRET_KEY="fault-test-secret-key-not-for-production-0123456789",
        DJANGO_DEBUG="0",
        DJANGO_ALLOWED_HOSTS="127.0.0.1",
        DJANGO_LOG_LEVEL="ERROR",
    )
    return env


class Server:
    """`manage.py runserver` in its own process, killable with SIGKILL."""

    def __init__(self, database_url: str, **extra_env: str):
        self.database_url = database_url
        self.extra_env = extra_env
        self.port = free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "manage.py", "runserver", "--noreload", f"127.0.0.1:{self.port}"],
            cwd=ROOT,
            env={**server_env(self.database_url), **self.extra_env},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                httpx.get(f"{self.url}/metrics", timeout=1)
                return
            except httpx.HTTPError:
                time.sleep(0.1)
        self.kill()
        raise RuntimeError("the server did not start")

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)


class Gunicorn:
    """The production server, `gunicorn -c gunicorn.conf.py` (uvicorn's ASGI workers), sized by
    its GUNICORN_* variables.

    `database_url` is the database it serves (a test's own, for tests that write rows the
    server must see: `django_db(transaction=True)`). Stopped with SIGTERM, else SIGKILL.
    """

    def __init__(self, database_url: str, *, workers: int, **extra_env: str):
        self.port = free_port()
        self.metrics = Path(tempfile.mkdtemp(prefix="ma-metrics-"))
        self.env = {
            # The defaults plus what the test gives, whatever the caller's environment holds.
            **{
                k: v for k, v in server_env(database_url).items()
                if not k.startswith(("GUNICORN_", "PROMETHEUS_", "MEMORYADMIN_"))
            },
            "GUNICORN_BIND": f"127.0.0.1:{self.port}",
            "GUNICORN_WORKERS": str(workers),
            "GUNICORN_ACCESS_LOG": "",
            "GUNICORN_LOG_LEVEL": "warning",
            # Streams still open when the test stops the server are not waited for.
            "GUNICORN_GRACEFUL_TIMEOUT": "2",
            "PROMETHEUS_MULTIPROC_DIR": str(self.metrics),
            **extra_env,
        }
        self.proc: subprocess.Popen | None = None
        self.log = self.metrics / "server.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "gunicorn", "-c", "gunicorn.conf.py"], cwd=ROOT, env=self.env,
                stdout=log, stderr=subprocess.STDOUT,
            )
        # Generous: on a shared 2-core machine a preloading master can take a while.
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.1)
        log = self.log.read_text()[-2000:]  # before stop(), which removes its directory
        self.stop()
        raise RuntimeError("gunicorn did not start: " + log)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        shutil.rmtree(self.metrics, ignore_errors=True)
