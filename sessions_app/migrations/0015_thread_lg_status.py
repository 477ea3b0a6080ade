"""A thread keeps LangGraph's status on its row (sessions_app/checkpoints/status.py), so that a
list filtered or sorted by status reads one column. The column is filled from each thread's
latest root checkpoint and its pending writes, as the status is read; the database holds the
default too (rows written without naming the column, by COPY, get it). The index holds only the
threads that are not idle."""

from django.db import migrations, models

# The status as status.status_expression reads it, in SQL that SQLite and PostgreSQL both run.
FILL = """
UPDATE sessions_app_thread SET lg_status = COALESCE((
    SELECT CASE
        WHEN EXISTS (SELECT 1 FROM sessions_app_checkpointwrite w
                      WHERE w.thread_id = c.thread_id AND w.checkpoint_ns = '' AND w.checkpoint_id = c.checkpoint_id
                        AND w.channel = '__error__') THEN 'error'
        WHEN c.next_node_id > '' OR EXISTS (SELECT 1 FROM sessions_app_checkpointwrite w
                      WHERE w.thread_id = c.thread_id AND w.checkpoint_ns = '' AND w.checkpoint_id = c.checkpoint_id
                        AND w.channel = '__interrupt__') THEN 'interrupted'
        ELSE 'idle' END
      FROM sessions_app_checkpoint c
     WHERE c.thread_id = sessions_app_thread.id AND c.checkpoint_ns = ''
     ORDER BY c.id DESC LIMIT 1), 'idle')
 WHERE EXISTS (SELECT 1 FROM sessions_app_checkpoint c WHERE c.thread_id = sessions_app_thread.id)
"""


class Migration(migrations.Migration):
    dependencies = [("sessions_app", "0014_foreign_keys_covered_by_composite_indexes")]

    operations = [
        migrations.AddField(
            model_name="thread",
            name="lg_status",
            field=models.CharField(db_default="idle", default="idle", max_length=16),
        ),
        migrations.RunSQL(FILL, migrations.RunSQL.noop),
        migrations.AddIndex(
            model_name="thread",
            index=models.Index(
                condition=models.Q(("lg_status", "idle"), _negated=True),
                fields=["lg_status", "-updated_at", "-id"],
                name="thread_status_updated_idx",
            ),
        ),
    ]
