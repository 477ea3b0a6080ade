"""PostgreSQL-only: subtree indexes that also answer the tree's counts.

- store_item_owner_path_like_idx (owner_id, namespace_path varchar_pattern_ops):
  a member's search under a namespace prefix and a member's tree level read
  `owner_id = me AND namespace_path LIKE 'a.b.%'` (or a range of it). The plain
  (owner, namespace_path) index of the model serves that LIKE only under the
  "C" collation; this one serves it under any.
- store_item_path_like_idx (0002) is rebuilt with the same INCLUDE columns.

Both INCLUDE (expires_at, depth): counting the live items of a subtree and
telling whether it goes deeper (store_namespace_children) is then an
index-only scan. SQLite gets none of these (its binary-collated index already
serves the range).
"""

from django.db import migrations

OWNER_PATH = "store_item_owner_path_like_idx"
PATH = "store_item_path_like_idx"
FORWARD = [
    f"CREATE INDEX IF NOT EXISTS {OWNER_PATH} ON store_app_storeitem "
    "(owner_id, namespace_path varchar_pattern_ops) INCLUDE (expires_at, depth)",
    f"DROP INDEX IF EXISTS {PATH}",
    f"CREATE INDEX {PATH} ON store_app_storeitem (namespace_path varchar_pattern_ops) INCLUDE (expires_at, depth)",
]
BACKWARD = [
    f"DROP INDEX IF EXISTS {OWNER_PATH}",
    f"DROP INDEX IF EXISTS {PATH}",
    f"CREATE INDEX {PATH} ON store_app_storeitem (namespace_path varchar_pattern_ops)",
]


def _run(statements):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor != "postgresql":
            return
        for sql in statements:
            schema_editor.execute(sql)

    return run


class Migration(migrations.Migration):
    dependencies = [
        ("store_app", "0003_owner_index_covered"),
    ]

    operations = [
        migrations.RunPython(_run(FORWARD), _run(BACKWARD)),
    ]
