from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('sessions_app', '0006_turns'),
        ('operations', '0001_initial'),
    ]

    # The operations models now belong to the operations app (same tables); only Django's
    # state changes here.
    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.RemoveField(
                    model_name='retentionpolicy',
                    name='updated_by',
                ),
                migrations.RemoveField(
                    model_name='retentionrun',
                    name='actor',
                ),
                migrations.DeleteModel(
                    name='BulkJob',
                ),
                migrations.DeleteModel(
                    name='RetentionPolicy',
                ),
                migrations.DeleteModel(
                    name='RetentionRun',
                ),
            ],
        ),
    ]
