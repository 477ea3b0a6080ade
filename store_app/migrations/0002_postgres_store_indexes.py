"""PostgreSQL-only indexes of the store; SQLite has no equivalent and gets none.

- namespace_path varchar_pattern_ops: `LIKE 'a.b.%'` prefix scans use an index
  whatever the database collation (a plain btree serves LIKE only under "C").
- value jsonb_path_ops GIN: the `@>` containment that store filters start from.
- to_tsvector('english', value) GIN: the `@@` of store text queries. The
  expression must stay identical to `store_app.expressions.FTS_CONFIG`'s SQL.
"""

from django.db import migrations

INDEXES = [
    (
        "store_item_path_like_idx",
        "CREATE INDEX IF NOT EXISTS store_item_path_like_idx "
        "ON store_app_storeitem (namespace_path varchar_pattern_ops)",
    ),
    (
        "store_item_value_gin_idx",
        "CREATE INDEX IF NOT EXISTS store_item_value_gin_idx "
        "ON store_app_storeitem USING gin (value jsonb_path_ops)",
    ),
    (
        "store_item_value_fts_idx",
        "CREATE INDEX IF NOT EXISTS store_item_value_fts_idx "
        "ON store_app_storeitem USING gin (to_tsvector('english'::regconfig, value))",
    ),
]


def create_indexes(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for _name, sql in INDEXES:
        schema_editor.execute(sql)


def drop_indexes(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for name, _sql in INDEXES:
        schema_editor.execute(f"DROP INDEX IF EXISTS {name}")


class Migration(migrations.Migration):
    dependencies = [
        ("store_app", "0001_store_item"),
    ]

    operations = [
        migrations.RunPython(create_indexes, drop_indexes),
    ]
