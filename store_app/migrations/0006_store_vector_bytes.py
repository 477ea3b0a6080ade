"""The vector column as float32 bytes on PostgreSQL without pgvector (docs/store.md, "Semantic search").

Migration 0005 made it `real[]` there; a search then read each vector as 256
numbers to parse. It is now `bytea` holding the float32 numbers little-endian,
the same bytes SQLite stores, which a search copies out as they are and numpy
scores (store_app.semantic). pgvector's `vector` column, and SQLite's, stay.
Backwards, the bytes become `real[]` again.
"""

from django.db import migrations

TABLE = "store_app_storevector"

# Each number's float4send (big-endian) reversed: little-endian, as store_app.models.vector_bytes writes.
_TO_BYTES = f"""
UPDATE {TABLE} SET vector_bytes = (
    SELECT string_agg(substring(b from 4 for 1) || substring(b from 3 for 1) || substring(b from 2 for 1)
        || substring(b from 1 for 1), ''::bytea ORDER BY i)
    FROM unnest(vector) WITH ORDINALITY AS t(x, i), LATERAL float4send(x) AS b
)
"""


def _column_type(schema_editor) -> str | None:
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(
            "SELECT udt_name FROM information_schema.columns WHERE table_name = %s AND column_name = 'vector'"
            " AND table_schema = ANY (current_schemas(false))",
            [TABLE],
        )
        row = cursor.fetchone()
    return row[0] if row else None


def _swap(schema_editor, new_type: str, fill: list[str]) -> None:
    for sql in [
        f"ALTER TABLE {TABLE} ADD COLUMN vector_bytes {new_type}",
        *fill,
        f"ALTER TABLE {TABLE} DROP COLUMN vector",
        f"ALTER TABLE {TABLE} RENAME COLUMN vector_bytes TO vector",
        f"ALTER TABLE {TABLE} ALTER COLUMN vector SET NOT NULL",
    ]:
        schema_editor.execute(sql)
    from store_app import models

    models._column_types.pop(schema_editor.connection.alias, None)


def to_bytes(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql" and _column_type(schema_editor) == "_float4":
        _swap(schema_editor, "bytea", [_TO_BYTES])


def to_real_array(apps, schema_editor):
    from store_app.semantic import FLOATS_FROM_BYTES_SQL

    if schema_editor.connection.vendor == "postgresql" and _column_type(schema_editor) == "bytea":
        fill = [FLOATS_FROM_BYTES_SQL, f"UPDATE {TABLE} SET vector_bytes = pg_temp.store_vector_floats(vector)"]
        _swap(schema_editor, "real[]", fill)
        schema_editor.execute("DROP FUNCTION pg_temp.store_vector_floats(bytea)")


class Migration(migrations.Migration):

    dependencies = [
        ('store_app', '0005_store_vector'),
    ]

    operations = [
        migrations.RunPython(to_bytes, to_real_array),
    ]
