"""Checkpoints hold less than every value (docs/checkpoints.md, "Storage"):

- large channel values stored once per version in `checkpointvalue`, a checkpoint's
  `values_ref` naming the ones it holds;
- messages inside other values (Send packets, task writes) held by reference to the thread's
  messages (`refs` on a checkpoint, `refers` on a pending write).

Rows stored before hold every value in full (the new columns null or false) and read as
they are: nothing is rewritten."""

import django.db.models.deletion
from django.db import migrations, models

import memoryadmin.jsonfield


class Migration(migrations.Migration):
    dependencies = [("sessions_app", "0011_checkpoint_messages_ref")]

    operations = [
        migrations.AddField(
            model_name="checkpoint",
            name="refs",
            field=memoryadmin.jsonfield.StoredJSONField(blank=True, default=None, null=True),
        ),
        migrations.AddField(
            model_name="checkpoint",
            name="values_ref",
            field=memoryadmin.jsonfield.StoredJSONField(blank=True, default=None, null=True),
        ),
        migrations.AddField(
            model_name="checkpointwrite",
            name="refers",
            field=models.BooleanField(default=False),
        ),
        migrations.CreateModel(
            name="CheckpointValue",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("checkpoint_ns", models.CharField(blank=True, default="", max_length=512)),
                ("channel", models.CharField(max_length=255)),
                ("version", models.CharField(max_length=128)),
                ("digest", models.CharField(max_length=64)),
                ("value", memoryadmin.jsonfield.StoredJSONField()),
                (
                    "thread",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="checkpoint_values", to="sessions_app.thread"
                    ),
                ),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(
                        fields=("thread", "checkpoint_ns", "channel", "version", "digest"), name="checkpoint_value_version_uniq"
                    )
                ],
            },
        ),
    ]
