"""Query expressions of the store, one per database.

PostgreSQL gets its own features: jsonb containment `@>` (served by the GIN
`jsonb_path_ops` index) and typed comparisons for filters, an English
`tsvector` (served by a GIN expression index) with `ts_rank` for `query`, and
split_part over the dotted path for `max_depth` and the tree. SQLite has none of these, so
the same rules run as Python functions registered on each SQLite connection
(`sqlite_register`), built from `store_app.matching`: the answers are the same,
only the speed and the text ranking differ.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from django.db import NotSupportedError
from django.db.models import BooleanField, CharField, F, FloatField, Func

from memoryadmin.json import stored_loads

from . import matching

# The text search configuration; the GIN index in migration 0002 is built on
# exactly `to_tsvector('english'::regconfig, value)`, so both must change together.
FTS_CONFIG = "english"

_SQL_OPERATORS = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def conditions_spec(conditions: tuple[matching.Condition, ...]) -> str:
    """Conditions as one JSON string: hashable, so the expression can be compared and copied."""
    return _json([condition.as_list() for condition in conditions])


@functools.lru_cache(maxsize=256)
def _spec_conditions(spec: str) -> tuple[matching.Condition, ...]:
    return tuple(matching.Condition(field, op, operand) for field, op, operand in json.loads(spec))


def tsquery_text(terms: tuple[str, ...]) -> str:
    """Any of the words: 'a' | 'b'. Words are \\w+ so they never hold a quote or a backslash."""
    return " | ".join(f"'{term}'" for term in terms)


class _StoreFunc(Func):
    """A Func compiled by hand per database; there is no generic SQL for it."""

    def as_sql(self, compiler, connection, **extra_context):
        raise NotSupportedError(f"{type(self).__name__} runs on PostgreSQL and SQLite only.")

    def _column(self, compiler):
        return compiler.compile(self.source_expressions[0])


class ValueFilter(_StoreFunc):
    """True when the item's value satisfies every filter condition (see store_app.matching)."""

    output_field = BooleanField()

    def __init__(self, spec: str, expression: Any = "value"):
        super().__init__(F(expression) if isinstance(expression, str) else expression)
        self.spec = spec

    def as_postgresql(self, compiler, connection, **extra_context):
        column, column_params = self._column(compiler)
        parts: list[str] = []
        params: list[Any] = []
        for condition in _spec_conditions(self.spec):
            field, op, operand = condition.field, condition.op, condition.operand
            if op == "$eq":
                # Containment finds candidates through the GIN index and is exact for
                # scalars; for arrays and objects it is a subset test, so equality follows.
                parts.append(f"{column} @> %s::jsonb")
                params += [*column_params, _json({field: operand})]
                if isinstance(operand, (list, dict)):
                    parts.append(f"(({column} -> %s) = %s::jsonb)")
                    params += [*column_params, field, _json(operand)]
            elif op == "$ne":
                parts.append(f"(({column} -> %s) IS DISTINCT FROM %s::jsonb)")
                params += [*column_params, field, _json(operand)]
            elif isinstance(operand, str):
                # The CASE keeps values of another type out; COLLATE "C" compares by
                # code point, as Python and SQLite do, whatever the database collation.
                parts.append(
                    f"((CASE WHEN jsonb_typeof({column} -> %s) = 'string' THEN ({column} ->> %s) END)"
                    f' COLLATE "C" {_SQL_OPERATORS[op]} %s)'
                )
                params += [*column_params, field, *column_params, field, operand]
            else:
                # Numbers as numeric, never as text: 9 < 10. The CASE guards the cast.
                parts.append(
                    f"((CASE WHEN jsonb_typeof({column} -> %s) = 'number' THEN ({column} ->> %s)::numeric END)"
                    f" {_SQL_OPERATORS[op]} %s::numeric)"
                )
                params += [*column_params, field, *column_params, field, repr(operand)]
        if not parts:
            return "TRUE", []
        return "(" + " AND ".join(parts) + ")", params

    def as_sqlite(self, compiler, connection, **extra_context):
        column, column_params = self._column(compiler)
        return f"ma_store_filter({column}, %s)", [*column_params, self.spec]


class TextMatch(_StoreFunc):
    """True when the item's text shares a word with the query."""

    output_field = BooleanField()

    def __init__(self, terms: tuple[str, ...], expression: Any = "value"):
        super().__init__(F(expression) if isinstance(expression, str) else expression)
        self.terms = tuple(terms)

    def as_postgresql(self, compiler, connection, **extra_context):
        column, params = self._column(compiler)
        sql = (
            f"(to_tsvector('{FTS_CONFIG}'::regconfig, {column}) @@ to_tsquery('{FTS_CONFIG}'::regconfig, %s))"
        )
        return sql, [*params, tsquery_text(self.terms)]

    def as_sqlite(self, compiler, connection, **extra_context):
        column, params = self._column(compiler)
        return f"(ma_store_text_score({column}, %s) > 0)", [*params, _json(list(self.terms))]


class TextScore(_StoreFunc):
    """The relevance of the item's text to the query (higher is better)."""

    output_field = FloatField()

    def __init__(self, terms: tuple[str, ...], expression: Any = "value"):
        super().__init__(F(expression) if isinstance(expression, str) else expression)
        self.terms = tuple(terms)

    def as_postgresql(self, compiler, connection, **extra_context):
        column, params = self._column(compiler)
        sql = (
            f"ts_rank(to_tsvector('{FTS_CONFIG}'::regconfig, {column}), "
            f"to_tsquery('{FTS_CONFIG}'::regconfig, %s))"
        )
        return sql, [*params, tsquery_text(self.terms)]

    def as_sqlite(self, compiler, connection, **extra_context):
        column, params = self._column(compiler)
        return f"ma_store_text_score({column}, %s)", [*params, _json(list(self.terms))]


class ScopedFirst(_StoreFunc):
    """True for the rows the `scope` queryset selects, which PostgreSQL computes first.

    `id = ANY(ARRAY(scope))`: the scope runs once, on its own indexes, before the
    outer query looks at a single row, so the outer filter (a common value in the
    GIN index on value, a text query) only reads what the scope kept. Without it
    the planner can start from the filter's index when it overestimates the scope
    (a namespace written since the last ANALYZE sits past the histogram's end).
    PostgreSQL only: SQLite has no such index to be drawn to.
    """

    output_field = BooleanField()

    def __init__(self, scope, expression: Any = "pk"):
        super().__init__(F(expression) if isinstance(expression, str) else expression)
        self.scope = scope.order_by().values("pk")

    def as_postgresql(self, compiler, connection, **extra_context):
        column, params = self._column(compiler)
        scope_sql, scope_params = self.scope.query.get_compiler(connection=connection).as_sql()
        return f"({column} = ANY(ARRAY({scope_sql})))", [*params, *scope_params]


class NamespaceHead(_StoreFunc):
    """The first `depth` labels of a dotted path (the whole path when depth is None).

    Ordered by code point on both databases (COLLATE "C" on PostgreSQL, SQLite's
    default binary collation), so listings page the same way everywhere. On
    PostgreSQL the labels are cut with split_part, measured about 1.6 times
    faster than array slicing over a million rows.
    """

    output_field = CharField()

    def __init__(self, depth: int | None, expression: Any = "namespace_path"):
        super().__init__(F(expression) if isinstance(expression, str) else expression)
        self.depth = depth

    def as_postgresql(self, compiler, connection, **extra_context):
        column, params = self._column(compiler)
        if self.depth is None:
            return f'({column} COLLATE "C")', params
        # A label is never empty, so an empty split_part means the path is shorter
        # than `depth`; NULLIF turns it into NULL, which concat_ws skips.
        labels = ", ".join(f"NULLIF(split_part({column}, '.', %s), '')" for _ in range(int(self.depth)))
        label_params = [value for position in range(1, int(self.depth) + 1) for value in (*params, position)]
        return f"(concat_ws('.', {labels}) COLLATE \"C\")", label_params

    def as_sqlite(self, compiler, connection, **extra_context):
        column, params = self._column(compiler)
        if self.depth is None:
            return column, params
        return f"ma_store_ns_head({column}, %s)", [*params, int(self.depth)]


class NamespaceLabel(_StoreFunc):
    """The label at a 1-based position of a dotted path (the tree's child label), by code point."""

    output_field = CharField()

    def __init__(self, position: int, expression: Any = "namespace_path"):
        super().__init__(F(expression) if isinstance(expression, str) else expression)
        self.position = position

    def as_postgresql(self, compiler, connection, **extra_context):
        column, params = self._column(compiler)
        return f"(split_part({column}, '.', %s) COLLATE \"C\")", [*params, int(self.position)]

    def as_sqlite(self, compiler, connection, **extra_context):
        column, params = self._column(compiler)
        return f"ma_store_ns_label({column}, %s)", [*params, int(self.position)]


# SQLite functions. They must never raise: an exception inside a user function
# surfaces as an OperationalError (a 500), so anything unexpected counts as "no".


def _sqlite_filter(value_text, spec):
    try:
        # As the model field reads it: exact integers, nothing deep enough to exhaust the stack.
        value = stored_loads(value_text) if isinstance(value_text, str) else None
        return 1 if matching.conditions_hold(value, _spec_conditions(spec)) else 0
    except Exception:  # noqa: BLE001 - see above
        return 0


def _sqlite_text_score(value_text, terms_json):
    try:
        value = stored_loads(value_text) if isinstance(value_text, str) else None
        return matching.text_score(value, tuple(json.loads(terms_json)))
    except Exception:  # noqa: BLE001 - see above
        return 0.0


def _sqlite_ns_head(path, depth):
    if not isinstance(path, str):
        return path
    return ".".join(path.split(".")[: int(depth)])


def _sqlite_ns_label(path, position):
    if not isinstance(path, str):
        return path
    labels = path.split(".")
    index = int(position) - 1
    return labels[index] if 0 <= index < len(labels) else ""


def sqlite_register(raw_connection) -> None:
    """Register the store's functions on a new SQLite connection."""
    raw_connection.create_function("ma_store_filter", 2, _sqlite_filter, deterministic=True)
    raw_connection.create_function("ma_store_text_score", 2, _sqlite_text_score, deterministic=True)
    raw_connection.create_function("ma_store_ns_head", 2, _sqlite_ns_head, deterministic=True)
    raw_connection.create_function("ma_store_ns_label", 2, _sqlite_ns_label, deterministic=True)


def on_connection_created(sender, connection, **kwargs) -> None:
    if connection.vendor == "sqlite":
        sqlite_register(connection.connection)
