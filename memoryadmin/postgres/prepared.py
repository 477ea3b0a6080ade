"""A cursor whose statements PostgreSQL parses and plans once per connection.

Django's PostgreSQL backend binds parameters in the client: every statement reaches the
server as new text, parsed and planned again each time. The hottest statements (a
checkpoint put's read and write, a task's writes, a store get or put: docs/scaling.md,
"Prepared statements") go through `prepared_cursor` instead: psycopg binds their parameters
on the server and prepares a statement once it has run `prepare_threshold` times (psycopg's
default, 5) on the connection, so later runs skip the parse and the plan. Behind a pooler in
transaction mode (DJANGO_DB_POOLER=transaction) the threshold is None and nothing is
prepared: the statements are the same, bound on the server without a name. A pooler left
unnamed shows itself by a prepared statement one server connection does not know: that
statement fails, an error in the log says to set DJANGO_DB_POOLER, and from then on the
process prepares nothing.

The cursor is Django's own wrapper around it, so queries are counted and logged (with their
parameters written in, as Django logs its own), errors are Django's, and the connection's
transaction state is respected, as with `connection.cursor()`.
On SQLite it is `connection.cursor()`.

A statement of more parameters than the protocol binds (65 535: an append of thousands of
messages) is bound in the client instead, as Django binds, and is not prepared.

Statements run here name their columns (no `SELECT *`): a prepared statement whose result
shape a migration changes would fail until the connection is renewed.
"""

from __future__ import annotations

import functools
import logging

from django.db import connection as default_connection
from django.db.backends.utils import CursorDebugWrapper, CursorWrapper

log = logging.getLogger(__name__)
# The most parameters PostgreSQL's protocol binds to one statement.
MAX_BOUND = 65535
# Set once a prepared statement was lost behind a pooler nobody told us of.
_pooler_found = False


def prepared_cursor(connection=None):
    """A cursor on `connection` (the default one) binding parameters on the server on PostgreSQL."""
    connection = connection or default_connection
    if connection.vendor != "postgresql":
        return connection.cursor()
    from django.db.backends.postgresql.base import TIMESTAMPTZ_OID, Format, register_tzloader

    # What `connection.cursor()` does before it makes its cursor (Django's `_cursor`, `create_cursor`).
    connection.close_if_health_check_failed()
    connection.ensure_connection()
    with connection.wrap_database_errors:
        if _pooler_found:
            connection.connection.prepare_threshold = None
        cursor = _cursor_class()(connection.connection)
        loader = connection.connection.adapters.get_loader(TIMESTAMPTZ_OID, Format.TEXT)
        if connection.timezone != loader.timezone:
            register_tzloader(connection.timezone, cursor)
        connection.validate_thread_sharing()
        return _LoggedCursor(cursor, connection) if connection.queries_logged else connection.make_cursor(cursor)


@functools.cache
def _cursor_class():
    """psycopg's server-binding cursor (imported here: the module loads on SQLite too), telling
    `_lost` of a statement a pooler lost."""
    from django.db.backends.postgresql.base import ServerBindingCursor
    from psycopg import ClientCursor, errors

    class Cursor(ServerBindingCursor):
        def execute(self, query, params=None, **kwargs):
            if params is not None and len(params) > MAX_BOUND:
                # More than the protocol binds (a conversation of thousands of messages appended at
                # once): bound in the client, as Django's own cursor binds, and never prepared.
                query, params, kwargs["prepare"] = ClientCursor(self.connection).mogrify(query, params), None, False
            try:
                return super().execute(query, params, **kwargs)
            except (errors.InvalidSqlStatementName, errors.DuplicatePreparedStatement):
                _lost(self.connection)
                raise

    return Cursor


def _lost(connection) -> None:
    """A prepared statement unknown to (or already on) the server connection: a transaction
    pooler is in front of PostgreSQL. Nothing is prepared any more in this process."""
    global _pooler_found
    connection.prepare_threshold = None
    if not _pooler_found:
        _pooler_found = True
        log.error("a prepared statement was lost between server connections: a pooler in transaction mode is "
                  "in front of PostgreSQL; set DJANGO_DB_POOLER=transaction (docs/scaling.md). "
                  "Statements are no longer prepared by this process.")


class _LoggedCursor(CursorDebugWrapper):
    """Django's debug wrapper (DEBUG, tests counting queries), logging each statement with its
    parameters written in, as Django logs its own: Django reads the text psycopg sent, which
    for a prepared statement is not kept."""

    def execute(self, sql, params=None):
        with self.debug_sql(_written(self.db, sql, params), params):
            return CursorWrapper.execute(self, sql, params)


def _written(connection, sql: str, params) -> str | None:
    from psycopg import errors

    try:
        return connection.ops.compose_sql(sql, params)
    except errors.DataError:
        return None
