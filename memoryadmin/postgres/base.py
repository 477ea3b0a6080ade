"""Django's PostgreSQL backend, its connection pool checking a connection without a round trip.

With CONN_HEALTH_CHECKS on, Django gives its psycopg pool `ConnectionPool.check_connection`:
an empty query, a round trip to PostgreSQL, before every request's first query — a request
of the checkpoint API spent about 7% of its worker's CPU on it, and its wait besides.
`quick_check` asks the socket first: a connection PostgreSQL closed or is closing (a restart,
`pg_terminate_backend`, an idle timeout) has something to read, the server's last message or
the end of the stream, and only then does the round trip decide (a broken connection raises
and the pool makes another). An open, idle pooled connection has nothing to read (its session
LISTENs to nothing), so it is lent at once. docs/scaling.md, "Connections".

memoryadmin/settings.py names this backend where the database has a pool.
"""

from __future__ import annotations

import select

from django.db.backends.postgresql import base
from psycopg import OperationalError
from psycopg.pq import ConnStatus
from psycopg_pool import ConnectionPool


def quick_check(conn) -> None:
    """Raise when the pooled connection is closed or broken; return at once when it is idle and open."""
    if conn.closed or conn.pgconn.status != ConnStatus.OK:
        raise OperationalError("the pooled connection is closed")
    poller = select.poll()  # not select.select, which refuses descriptors past 1023
    poller.register(conn.fileno(), select.POLLIN)
    if poller.poll(0):
        # Something came on an idle session (a notice that it ends, its end): ask the server.
        ConnectionPool.check_connection(conn)


class DatabaseWrapper(base.DatabaseWrapper):
    @property
    def pool(self):
        pool = super().pool
        # Django made the pool with psycopg's own check (CONN_HEALTH_CHECKS): this one instead.
        if pool is not None and pool._check is ConnectionPool.check_connection:
            pool._check = quick_check
        return pool
