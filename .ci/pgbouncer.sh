#!/usr/bin/env bash
# Run a command with PgBouncer in transaction mode in front of the local PostgreSQL:
#   .ci/pgbouncer.sh <command…>
# PgBouncer (Debian's package, installed when missing) listens on 127.0.0.1:$PGBOUNCER_PORT,
# forwards every database to 127.0.0.1:5432 with trust authentication, and is stopped
# when the command ends. DATABASE_URL and DJANGO_DB_POOLER are set for the command, and
# DATABASE_LISTEN_URL, where the live-turn streams' listener reaches PostgreSQL itself
# (LISTEN needs a session of its own, which transaction pooling does not give).
# PGBOUNCER_DATABASE (default postgres) names the database of DATABASE_URL; the test
# suite's database is test_<that name>, so two runs on one PostgreSQL give different names
# (and different PGBOUNCER_PORTs).
set -euo pipefail
cd "$(dirname "$0")/.."
PORT="${PGBOUNCER_PORT:-6432}"
if ! command -v pgbouncer >/dev/null 2>&1; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq pgbouncer >/dev/null
fi
DIR="$(pwd)/var/pgbouncer"
mkdir -p "$DIR"
cat > "$DIR/pgbouncer.ini" <<INI
[databases]
* = host=127.0.0.1 port=5432
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $PORT
unix_socket_dir =
auth_type = trust
auth_file = $DIR/users.txt
pool_mode = transaction
max_client_conn = 400
default_pool_size = 20
ignore_startup_parameters = extra_float_digits,options
server_reset_query =
logfile = $DIR/pgbouncer.log
pidfile = $DIR/pgbouncer.pid
INI
printf '"postgres" ""\n' > "$DIR/users.txt"
# pgbouncer refuses to run as root; the postgres system user runs it.
chown -R postgres "$DIR" 2>/dev/null || true
runner=()
if [ "$(id -u)" = 0 ]; then runner=(runuser -u postgres --); fi
"${runner[@]}" pgbouncer -d "$DIR/pgbouncer.ini"
trap 'kill "$(cat "$DIR/pgbouncer.pid" 2>/dev/null)" 2>/dev/null || true' EXIT
for _ in $(seq 1 30); do pg_isready -q -h 127.0.0.1 -p "$PORT" && break; sleep 0.2; done
# POSTGRES_DIRECT_PORT: where a client that needs a session of its own (prepared statements,
# LISTEN) reaches PostgreSQL itself.
DBNAME="${PGBOUNCER_DATABASE:-postgres}"
export DATABASE_URL="postgres://postgres@127.0.0.1:$PORT/$DBNAME" DJANGO_DB_POOLER=transaction POSTGRES_DIRECT_PORT=5432
export DATABASE_LISTEN_URL="postgres://postgres@127.0.0.1:5432/$DBNAME"
"$@"
