"""The thread-scoped tables' foreign keys lose the index of their own that Django gives them:
each table's unique constraint or indexes lead with the same column and serve its lookups,
while every insert (and every non-HOT update of a thread row, which each put makes) wrote the
extra index too. The checkpoints' run id index keeps only the rows that have one: delete_for_runs
never looks up the empty run id that LangGraph's own steps leave.

Only the indexes are dropped (by the names Django gave them, the same on every database): letting
Django alter the fields would rebuild the tables on SQLite and lose the block table's search
triggers (migration 0004). On a SQLite database migrated from the start, earlier rebuilds of
these tables have already dropped them and the statements find nothing."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


# (model, field, table, column, index, related_name, to): the foreign keys whose own index goes.
COVERED = [
    ("block", "thread", "sessions_app_block", "thread_id", "sessions_app_block_thread_id_8a38698e", "blocks", "sessions_app.thread"),
    ("checkpoint", "thread", "sessions_app_checkpoint", "thread_id", "sessions_app_checkpoint_thread_id_72a7d831", "checkpoints", "sessions_app.thread"),
    ("checkpointvalue", "thread", "sessions_app_checkpointvalue", "thread_id", "sessions_app_checkpointvalue_thread_id_227d2ce4", "checkpoint_values", "sessions_app.thread"),
    ("checkpointwrite", "thread", "sessions_app_checkpointwrite", "thread_id", "sessions_app_checkpointwrite_thread_id_228344ba", "checkpoint_writes", "sessions_app.thread"),
    ("thread", "owner", "sessions_app_thread", "owner_id", "sessions_app_thread_owner_id_f5a0650d", "threads", settings.AUTH_USER_MODEL),
    ("turn", "thread", "sessions_app_turn", "thread_id", "sessions_app_turn_thread_id_d96d3f31", "turns", "sessions_app.thread"),
    ("turnchunk", "turn", "sessions_app_turnchunk", "turn_id", "sessions_app_turnchunk_turn_id_929ffe9f", "chunks", "sessions_app.turn"),
]


class Migration(migrations.Migration):

    dependencies = [
        ("sessions_app", "0013_thread_streams_ended"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RemoveIndex(model_name="checkpoint", name="checkpoint_run_idx"),
        migrations.AddIndex(
            model_name="checkpoint",
            index=models.Index(condition=~models.Q(run_id=""), fields=["run_id"], name="checkpoint_run_idx"),
        ),
        *(
            migrations.SeparateDatabaseAndState(
                state_operations=[
                    migrations.AlterField(
                        model_name=model,
                        name=field,
                        field=models.ForeignKey(
                            db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name=related, to=to
                        ),
                    )
                ],
                database_operations=[
                    migrations.RunSQL(
                        f'DROP INDEX IF EXISTS "{index}"', f'CREATE INDEX IF NOT EXISTS "{index}" ON "{table}" ("{column}")'
                    )
                ],
            )
            for model, field, table, column, index, related, to in COVERED
        ),
    ]
