# memoryadmin — `make run` to try it, `make test` to check it.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
HOST ?= 127.0.0.1
PORT ?= 8000
PG_URL ?= postgres://postgres@127.0.0.1:5432/postgres

.PHONY: run test test-client test-postgres test-pgbouncer test-browser install env migrate demo schema bench serve loadtest clean

CLIENT := clients/python

# The server imports the client package (memoryadmin_client, in $(CLIENT)), which no
# index has: it is installed from this repository, ahead of the server.
$(VENV)/.installed: pyproject.toml $(CLIENT)/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet -e './$(CLIENT)[langgraph,agentscope,langchain]' -e '.[test,langgraph]'
	touch $@

install: $(VENV)/.installed

# A local .env with a fresh secret key, made once; the real environment wins over it.
.env:
	@printf 'DJANGO_DEBUG=1\nDJANGO_SECRET_KEY=%s\n' "$$($(PYTHON) -c 'import secrets; print(secrets.token_urlsafe(48))')" > .env
	@echo "wrote .env (development settings)"

env: .env

migrate: install env
	$(PY) manage.py migrate --noinput

demo: migrate
	$(PY) manage.py demo_data

# On PostgreSQL the job queue's worker (manage.py jobs_worker) runs beside the server and
# stops with it; SQLite has no queue, and a job runs in the request that starts it
# (docs/operations.md, "Jobs"). The worker does not reload on code changes: restart `make run`.
QUEUED = $(PY) manage.py shell -v 0 -c "from memoryadmin import queue; raise SystemExit(not queue.is_queued())"
WITH_WORKER = if $(QUEUED); then $(PY) manage.py jobs_worker & trap "kill $$! 2>/dev/null" EXIT INT TERM; fi;

run: demo
	@echo ""
	@echo "  memoryadmin is at http://$(HOST):$(PORT)/"
	@echo "  sign in as admin / memoryadmin (also: operator, alice, bob — same password)"
	@echo "  API docs: http://$(HOST):$(PORT)/api/docs/   an agent key: $(PY) manage.py apikey create --user alice"
	@echo ""
	@$(WITH_WORKER) $(PY) manage.py runserver $(HOST):$(PORT)

test: install
	$(PY) -m pytest -m "not browser" -q

# The client alone, in a virtual environment of its own without Django: it must
# install and work with nothing but its own dependencies.
CLIENT_VENV := $(CLIENT)/.venv

$(CLIENT_VENV)/.installed: $(CLIENT)/pyproject.toml
	$(PYTHON) -m venv $(CLIENT_VENV)
	$(CLIENT_VENV)/bin/pip install --quiet -e './$(CLIENT)[langgraph,agentscope,langchain,test]'
	touch $@

test-client: $(CLIENT_VENV)/.installed
	cd $(CLIENT) && .venv/bin/python -m pytest -q

test-postgres: install
	DATABASE_URL=$(PG_URL) $(PY) -m pytest -m "not browser" -q

# The suite on PostgreSQL through PgBouncer in transaction mode (.ci/pgbouncer.sh starts it).
# --reuse-db keeps the test database at the end: PgBouncer still holds server connections
# to it then, and PostgreSQL refuses to drop a database in use; --create-db makes it anew.
test-pgbouncer: install
	.ci/pgbouncer.sh $(PY) -m pytest -m "not browser" -q --create-db --reuse-db

test-browser: install
	$(PY) -m pytest -m browser -q

schema: install
	DJANGO_DEBUG=1 $(PY) manage.py spectacular --validate --fail-on-warn --file /dev/null

# Production serving: gunicorn (gunicorn.conf.py) with DEBUG off and static files
# collected into whitenoise's compressed manifest storage. `make serve WORKERS=3`.
# On PostgreSQL one job worker runs beside it; in production run `manage.py jobs_worker`
# as a service of its own, as many as needed (docs/scaling.md, "Job workers").
serve: migrate
	DJANGO_DEBUG=0 $(PY) manage.py collectstatic --noinput --verbosity 0
	export DJANGO_DEBUG=0; $(WITH_WORKER) \
	GUNICORN_BIND=$(HOST):$(PORT) $(if $(WORKERS),GUNICORN_WORKERS=$(WORKERS)) \
		$(VENV)/bin/gunicorn -c gunicorn.conf.py

# The side-by-side benchmark on a fresh PostgreSQL database (docs/benchmarks.md).
# `make bench BENCH_ARGS=--small` for a quick run; BENCH_ARGS=--write updates the doc.
bench: install
	$(PIP) install --quiet -e '.[bench]'
	$(PY) bench/run.py $(BENCH_ARGS)
	$(PY) bench/store_semantic.py $(BENCH_ARGS)

# HTTP load test: gunicorn on 127.0.0.1 against a fresh database, wrk per scenario.
loadtest: install
	$(PIP) install --quiet -e '.[bench]'
	@command -v wrk >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk)
	$(PY) bench/loadtest.py $(LOADTEST_ARGS)

clean:
	rm -rf $(VENV) $(CLIENT_VENV) var staticfiles .pytest_cache $(CLIENT)/.pytest_cache
