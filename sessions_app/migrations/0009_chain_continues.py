"""Every block's chain_hash recomputed as a continuable chain (docs/architecture.md, rule S3):
the digest after a message is SHA-256 of the previous digest and the message's canonical
JSON, so an append is hashed from the stored head alone. Active blocks are chained per
agent in position order; archived blocks per agent and per rewrite that archived them,
as the context they were part of."""

from django.db import migrations
from django.db.models import TextField
from django.db.models.functions import Cast

BATCH = 2000


def rechain(apps, schema_editor):
    from memoryadmin.json import stored_loads
    from sessions_app.threads.messages import chain_continue

    Block = apps.get_model("sessions_app", "Block")
    rows = (
        Block.objects.order_by("thread_id", "agent_code", "archived", "archived_by", "position", "seq")
        .values_list("pk", "thread_id", "agent_code", "archived", "archived_by", Cast("message", TextField()))
        .iterator(chunk_size=BATCH)
    )
    group = None
    head = ""
    changed = []
    for pk, thread_id, agent_code, archived, archived_by, text in rows:
        key = (thread_id, agent_code, archived, archived_by)
        if key != group:
            group, head = key, ""
        head = chain_continue(head, [stored_loads(text, depth_max=None)])[0]
        changed.append(Block(pk=pk, chain_hash=head))
        if len(changed) >= BATCH:
            Block.objects.bulk_update(changed, ["chain_hash"])
            changed = []
    if changed:
        Block.objects.bulk_update(changed, ["chain_hash"])


class Migration(migrations.Migration):
    dependencies = [("sessions_app", "0008_turn_stream_leases")]

    operations = [migrations.RunPython(rechain, migrations.RunPython.noop, elidable=True)]
