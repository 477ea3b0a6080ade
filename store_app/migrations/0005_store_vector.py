"""Vectors of indexed store items (docs/store.md, "Semantic search").

On PostgreSQL, pgvector's extension is created when the server offers it and the
migrating role may create it; without it the store ranks with plain SQL. Either
way the vectors are `real[]`, which pgvector casts to its `vector` type.
"""

import django.db.models.deletion
import store_app.models
from django.db import DatabaseError, migrations, models, transaction


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


class Migration(migrations.Migration):

    dependencies = [
        ('store_app', '0004_owner_path_pattern_index'),
    ]

    operations = [
        migrations.CreateModel(
            name='StoreVector',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
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
        # The extension stays on the way back: other tables may use it.
        migrations.RunPython(create_vector_extension, migrations.RunPython.noop),
    ]
