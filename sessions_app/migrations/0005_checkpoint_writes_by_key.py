# Pending writes are keyed by (thread, checkpoint_ns, checkpoint_id) instead of a
# foreign key to the checkpoint: LangGraph sends a task's writes concurrently with
# the put of their checkpoint, so they may arrive before it. Pending writes made
# under 0002 are dropped (the table is rebuilt).

import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('sessions_app', '0004_message_search'),
    ]

    operations = [
        migrations.DeleteModel(
            name='CheckpointWrite',
        ),
        migrations.CreateModel(
            name='CheckpointWrite',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('checkpoint_ns', models.CharField(blank=True, default='', max_length=512)),
                ('checkpoint_id', models.CharField(max_length=128)),
                ('task_id', models.CharField(max_length=255)),
                ('task_path', models.CharField(blank=True, default='', max_length=1024)),
                ('idx', models.IntegerField()),
                ('channel', models.CharField(max_length=255)),
                ('value', models.JSONField()),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('thread', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='checkpoint_writes', to='sessions_app.thread')),
            ],
            options={
                'ordering': ['task_path', 'task_id', 'idx'],
                'constraints': [models.UniqueConstraint(fields=('thread', 'checkpoint_ns', 'checkpoint_id', 'task_id', 'idx'), name='checkpoint_write_task_idx_uniq')],
            },
        ),
    ]
