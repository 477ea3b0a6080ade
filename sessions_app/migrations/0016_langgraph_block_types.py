"""A LangGraph thread's blocks hold LangChain message envelopes, whose name and tool calls are
inside `kwargs`. Blocks saved before the block type read them there were typed `message`: a
tool call is `tool_call` and a summary `summary` now, as for every other agent's message
(sessions_app/threads/messages.py, `_block_type`). Only untyped blocks holding an envelope
are read, in batches; nothing else about them changes."""

from django.db import migrations

# As sessions_app/threads/messages.py has them when this was written (a migration keeps its own copy).
SUMMARY_NAMES = {"__compaction_summary__", "compaction_summary"}
BATCH = 2000


def _block_type(role, message):
    kwargs = message.get("kwargs") if isinstance(message, dict) else None
    if not isinstance(kwargs, dict) or message.get("lc") not in (1, 2) or message.get("type") != "constructor":
        return None
    name = kwargs.get("name")
    if isinstance(name, str) and name in SUMMARY_NAMES:
        return "summary"
    if role == "assistant" and kwargs.get("tool_calls"):
        return "tool_call"
    return None


def retype(apps, schema_editor):
    blocks = apps.get_model("sessions_app", "Block").objects.using(schema_editor.connection.alias)
    untyped = blocks.filter(block_type="message", message__type="constructor").order_by("pk").only("pk", "role", "message")
    last = 0
    while batch := list(untyped.filter(pk__gt=last)[:BATCH]):
        last = batch[-1].pk
        changed = []
        for block in batch:
            block_type = _block_type(block.role, block.message)
            if block_type is not None:
                block.block_type = block_type
                changed.append(block)
        blocks.bulk_update(changed, ["block_type"])


class Migration(migrations.Migration):
    dependencies = [("sessions_app", "0015_thread_lg_status")]

    operations = [migrations.RunPython(retype, migrations.RunPython.noop, elidable=True)]
