"""Vectors of indexed store items (docs/store.md, "Semantic search").

On PostgreSQL, pgvector's extension is created first when the server offers it
and the migrating role may create it: the vector column is then pgvector's
`vector`, else `real[]`, which the store ranks with plain SQL (docs/store.md,
"Semantic search", says how to convert it if pgvector comes later). The
PostgreSQL-only index on namespace_path (varchar_pattern_ops) lets a search
read the vectors of its prefix with `LIKE 'a.b.%'` under any collation.
"""

import django.db.models.deletion
import store_app.models
from django.db import DatabaseError, migrations, models, transaction

PATH_INDEX = "store_vector_path_like_idx"


def create_vector_extension(apps, schema_editor):
    connection = schema_editor.connection
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")
        if cursor.fetchone() is None:
            return
        try:
            # A savepoint: a role that may not create extensions leaves the migration going.
            with transaction.atomic(using=connection.alias):
                cursor.execute("CREATE EXTENSION IF NOT EXISTS vector")
        except DatabaseError:
            pass


def create_path_index(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(
            f"CREATE INDEX IF NOT EXISTS {PATH_INDEX} ON store_app_storevector (namespace_path varchar_pattern_ops, dims)"
        )


def drop_path_index(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"DROP INDEX IF EXISTS {PATH_INDEX}")


class Migration(migrations.Migration):

    dependencies = [
        ('store_app', '0004_owner_path_pattern_index'),
    ]

    operations = [
        # First, so that the vector column is pgvector's type when the extension is there.
        # The extension stays on the way back: other tables may use it.
        migrations.RunPython(create_vector_extension, migrations.RunPython.noop),
        migrations.CreateModel(
            name='StoreVector',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('namespace_path', models.CharField(max_length=1024)),
                ('path', models.CharField(max_length=320)),
                ('dims', models.PositiveSmallIntegerField()),
                ('norm', models.FloatField()),
                ('vector', store_app.models.VectorField()),
                ('item', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='vectors', to='store_app.storeitem')),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('item', 'path'), name='store_vector_item_path_uniq')],
            },
        ),
        migrations.RunPython(create_path_index, drop_path_index),
    ]
