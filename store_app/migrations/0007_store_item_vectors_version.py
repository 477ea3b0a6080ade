"""Each item's vectors version, for the per-process vector cache (docs/store.md, "Semantic search").

Existing rows get 0, which no put writes again: on PostgreSQL a put takes the next
value of the sequence made here (from 1), on SQLite random 63 bits (store_app.puts).
So (id, vectors_version) of a row from before this migration names the vectors it
has now, and no backfill is needed. The column has a database default (0), so that
rows inserted by SQL outside the services are accepted.
"""

from django.db import migrations, models

SEQUENCE = "store_item_vectors_version_seq"


def create_sequence(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"CREATE SEQUENCE IF NOT EXISTS {SEQUENCE} AS bigint MINVALUE 1 START 1")


def drop_sequence(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"DROP SEQUENCE IF EXISTS {SEQUENCE}")


class Migration(migrations.Migration):

    dependencies = [
        ('store_app', '0006_store_vector_bytes'),
    ]

    operations = [
        migrations.AddField(
            model_name='storeitem',
            name='vectors_version',
            field=models.BigIntegerField(db_default=0, default=0, editable=False),
        ),
        migrations.RunPython(create_sequence, drop_sequence),
    ]
