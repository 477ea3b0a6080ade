import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
        ("sessions_app", "0006_turns"),
    ]

    # The tables were made by sessions_app's 0003_operations and keep their names: this app
    # only takes them over in Django's state, nothing is done to the database.
    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.CreateModel(
                    name='RetentionRun',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('actor_name', models.CharField(blank=True, max_length=150)),
                        ('via', models.CharField(default='cli', max_length=16)),
                        ('status', models.CharField(choices=[('running', 'Running'), ('done', 'Done'), ('partial', 'Partial'), ('failed', 'Failed')], default='running', max_length=16)),
                        ('cutoff_now', models.DateTimeField()),
                        ('started_at', models.DateTimeField(auto_now_add=True)),
                        ('finished_at', models.DateTimeField(blank=True, null=True)),
                        ('batches', models.IntegerField(default=0)),
                        ('counts', models.JSONField(blank=True, default=dict)),
                        ('policies', models.JSONField(blank=True, default=list)),
                        ('error', models.TextField(blank=True)),
                        ('actor', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                    ],
                    options={
                        'db_table': 'sessions_app_retentionrun',
                        'ordering': ['-id'],
                    },
                ),
                migrations.CreateModel(
                    name='BulkJob',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('actor_name', models.CharField(blank=True, max_length=150)),
                        ('action', models.CharField(choices=[('clear', 'Clear'), ('release', 'Release'), ('purge', 'Purge')], max_length=16)),
                        ('status', models.CharField(choices=[('pending', 'Pending'), ('running', 'Running'), ('done', 'Done'), ('failed', 'Failed')], default='pending', max_length=16)),
                        ('selection', models.JSONField(default=dict)),
                        ('max_pk', models.BigIntegerField(default=0)),
                        ('cursor', models.BigIntegerField(default=0)),
                        ('total', models.IntegerField(default=0)),
                        ('processed', models.IntegerField(default=0)),
                        ('preview', models.JSONField(blank=True, default=dict)),
                        ('counts', models.JSONField(blank=True, default=dict)),
                        ('error', models.TextField(blank=True)),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('updated_at', models.DateTimeField(auto_now=True)),
                        ('finished_at', models.DateTimeField(blank=True, null=True)),
                        ('actor', models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                    ],
                    options={
                        'db_table': 'sessions_app_bulkjob',
                        'ordering': ['-id'],
                        'indexes': [models.Index(fields=['status', 'id'], name='bulkjob_status_idx')],
                    },
                ),
                migrations.CreateModel(
                    name='RetentionPolicy',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('agent_code', models.CharField(blank=True, max_length=64, unique=True)),
                        ('keep_checkpoints', models.PositiveIntegerField(blank=True, null=True)),
                        ('release_idle_days', models.PositiveIntegerField(blank=True, null=True)),
                        ('purge_archived_days', models.PositiveIntegerField(blank=True, null=True)),
                        ('store_ttl_days', models.PositiveIntegerField(blank=True, null=True)),
                        ('updated_at', models.DateTimeField(auto_now=True)),
                        ('updated_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                    ],
                    options={
                        'db_table': 'sessions_app_retentionpolicy',
                        'ordering': ['agent_code'],
                        'constraints': [models.CheckConstraint(condition=models.Q(('agent_code', ''), ('store_ttl_days__isnull', True), _connector='OR'), name='retention_store_ttl_default_only'), models.CheckConstraint(condition=models.Q(('keep_checkpoints__gte', 1)), name='retention_keep_at_least_one')],
                    },
                ),
            ],
        ),
    ]
