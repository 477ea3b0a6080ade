"""A root LangGraph checkpoint holds its messages channel by reference to the thread's blocks
(docs/checkpoints.md, "Conversation"). Checkpoints stored before keep every channel in
`checkpoint` (messages_ref null) and read as they are."""

from django.db import migrations

import memoryadmin.jsonfield


class Migration(migrations.Migration):
    dependencies = [("sessions_app", "0010_saved_thread_views")]

    operations = [
        migrations.AddField(
            model_name="checkpoint",
            name="messages_ref",
            field=memoryadmin.jsonfield.StoredJSONField(blank=True, default=None, null=True),
        ),
    ]
