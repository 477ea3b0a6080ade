"""Stored sizes of rows, for the previews that say how much an action would remove."""

from __future__ import annotations

from django.db.models import BigIntegerField, Func, Sum, Value
from django.db.models.functions import Coalesce


class PayloadBytes(Func):
    """Stored size of a column in bytes: pg_column_size on PostgreSQL, its bytes' length elsewhere."""

    function = "LENGTH"
    template = "LENGTH(CAST(%(expressions)s AS BLOB))"
    output_field = BigIntegerField()

    def as_postgresql(self, compiler, connection, **extra_context):
        return self.as_sql(compiler, connection, template="pg_column_size(%(expressions)s)", **extra_context)


def payload_bytes(*columns: str):
    """Sum of the payload bytes of the given columns, 0 when there are no rows."""
    total = None
    for column in columns:
        size = Coalesce(PayloadBytes(column), Value(0), output_field=BigIntegerField())
        total = size if total is None else total + size
    return Coalesce(Sum(total), Value(0), output_field=BigIntegerField())
