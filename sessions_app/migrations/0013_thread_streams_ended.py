"""A thread remembers when (and why) its open live streams were last told to end while it stays:
cleared, its checkpoints released or deleted (sessions_app/threads/notify.py). A stream that
polls (SQLite, which cannot notify) reads it with the pending turn and ends as a notified one does.
The database holds the default too: rows written without naming the column (COPY) get it."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("sessions_app", "0012_values_by_reference")]

    operations = [
        migrations.AddField(
            model_name="thread",
            name="streams_ended",
            field=models.CharField(blank=True, db_default="", max_length=32),
        ),
        migrations.AddField(
            model_name="thread",
            name="streams_ended_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]
