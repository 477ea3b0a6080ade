"""Store gets in one prepared statement on PostgreSQL.

A get (LangGraph's `store.get`, and every get of a `MemoryAdminStore` batch) is the store's
most frequent read. Built by the ORM it spent more time composing its SQL than PostgreSQL
spent answering it; here it is one statement whose text is the same for any number of keys
(the pairs as two arrays), run through `memoryadmin.postgres.prepared.prepared_cursor`, so
that PostgreSQL parses and plans it once per connection. It gives what
`StoreItem.objects.live(now).select_related("owner")` gives for those keys: the live items
with their owners, every value read back by its field as the ORM reads it. Who may read each
item stays the caller's to decide (`selectors`). SQLite takes the ORM.
"""

from __future__ import annotations

import functools

from django.contrib.auth import get_user_model
from django.db import connections, router

from memoryadmin.postgres.prepared import prepared_cursor

from .models import StoreItem

_GET = """
SELECT {columns}
  FROM unnest(%s::text[], %s::text[]) AS wanted(namespace_path, key)
  JOIN {item} i ON i.namespace_path = wanted.namespace_path AND i.key = wanted.key
  JOIN {user} u ON u.id = i.owner_id
 WHERE i.expires_at IS NULL OR i.expires_at > %s
"""


@functools.lru_cache(maxsize=None)
def _reader(model, alias: str, db: str):
    """The model's concrete fields as SQL columns under `alias`, and a function making an
    instance of one row's values, each converted as the ORM converts it (the converters of
    database `db`'s backend and of the field)."""
    connection = connections[db]
    fields = list(model._meta.concrete_fields)
    columns = [f"{alias}.{connection.ops.quote_name(field.column)}" for field in fields]
    steps = []
    for field in fields:
        column = field.get_col(model._meta.db_table)
        steps.append((column, connection.ops.get_db_converters(column) + field.get_db_converters(connection)))
    names = [field.attname for field in fields]

    def make(values):
        converted = []
        for value, (column, chain) in zip(values, steps, strict=True):
            for convert in chain:
                value = convert(value, column, connections[db])
            converted.append(value)
        return model.from_db(db, names, converted)

    return columns, make


def items_get(pairs: list[tuple[str, str]], *, now) -> list[StoreItem] | None:
    """The live items at (namespace path, key) pairs with their owners, in one statement;
    None where the ORM must read them (not PostgreSQL)."""
    db = router.db_for_read(StoreItem)
    connection = connections[db]
    if connection.vendor != "postgresql":
        return None
    if not pairs:
        return []
    user_model = get_user_model()
    item_columns, make_item = _reader(StoreItem, "i", db)
    user_columns, make_user = _reader(user_model, "u", db)
    sql = _GET.format(
        columns=", ".join(item_columns + user_columns),
        item=connection.ops.quote_name(StoreItem._meta.db_table),
        user=connection.ops.quote_name(user_model._meta.db_table),
    )
    paths, keys = (list(column) for column in zip(*pairs))
    with prepared_cursor(connection) as cursor:
        cursor.execute(sql, [paths, keys, now])
        rows = cursor.fetchall()
    split = len(item_columns)
    items = []
    for row in rows:
        item = make_item(row[:split])
        item.owner = make_user(row[split:])
        items.append(item)
    return items
