"""`manage.py verify`'s checks of what checkpoints hold by reference (docs/checkpoints.md,
"Storage"), each read in batches of at most `batch` rows, so memory stays flat however many
checkpoints, writes and values there are:

- `missing_value`: a checkpoint's `values_ref` names a value by version that is not stored;
- `orphan_value`: a value by version that no checkpoint holds (every removal and replacement
  collects them: sessions_app/checkpoints/removal.py);
- `missing_messages`: a checkpoint holding its messages by reference (`messages_ref`) whose
  blocks are not all there;
- `unresolved_marker`: a messages marker (a Send packet's, a pending write's) that does not
  read back whole: a checkpoint's marker counting more messages than its channel holds (or
  naming a channel it does not hold), a write's referring to blocks no longer there.

The two value checks are anti-joins in the database (`json_each` on SQLite, `jsonb_each` and
`->` on PostgreSQL) over a range of primary keys at a time: the rows read are the problems.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator

from django.db import connection
from django.db.models import F, QuerySet

from sessions_app.checkpoints.conversation import checkpoints_hydrate
from sessions_app.checkpoints.models import Checkpoint, CheckpointValue, CheckpointWrite
from sessions_app.checkpoints.references import MARKER, stored_markers, writes_held
from sessions_app.threads.models import Thread

Report = Callable[[str, str, str], None]

_MISSING = {
    "sqlite": """
        SELECT t.thread_id, c.checkpoint_ns, c.checkpoint_id, j.key, j.value
        FROM sessions_app_checkpoint c JOIN sessions_app_thread t ON t.id = c.thread_id, json_each(c.values_ref) j
        WHERE c.id >= %s AND c.id <= %s AND c.values_ref IS NOT NULL AND NOT EXISTS (
            SELECT 1 FROM sessions_app_checkpointvalue v
            WHERE v.thread_id = c.thread_id AND v.checkpoint_ns = c.checkpoint_ns AND v.channel = j.key
              AND v.version = json_extract(j.value, '$[0]') AND v.digest = json_extract(j.value, '$[1]'))
        ORDER BY c.id""",
    "postgresql": """
        SELECT t.thread_id, c.checkpoint_ns, c.checkpoint_id, j.key, j.value::text
        FROM sessions_app_checkpoint c JOIN sessions_app_thread t ON t.id = c.thread_id,
             jsonb_each(CASE WHEN jsonb_typeof(c.values_ref) = 'object' THEN c.values_ref ELSE '{}'::jsonb END) j
        WHERE c.id >= %s AND c.id <= %s AND c.values_ref IS NOT NULL AND NOT EXISTS (
            SELECT 1 FROM sessions_app_checkpointvalue v
            WHERE v.thread_id = c.thread_id AND v.checkpoint_ns = c.checkpoint_ns AND v.channel = j.key
              AND v.version = j.value ->> 0 AND v.digest = j.value ->> 1)
        ORDER BY c.id""",
}

_ORPHANS = {
    "sqlite": """
        SELECT t.thread_id, v.checkpoint_ns, v.channel, v.version
        FROM sessions_app_checkpointvalue v JOIN sessions_app_thread t ON t.id = v.thread_id
        WHERE v.id >= %s AND v.id <= %s AND NOT EXISTS (
            SELECT 1 FROM sessions_app_checkpoint c, json_each(c.values_ref) j
            WHERE c.thread_id = v.thread_id AND c.checkpoint_ns = v.checkpoint_ns AND c.values_ref IS NOT NULL
              AND j.key = v.channel AND json_extract(j.value, '$[0]') = v.version
              AND json_extract(j.value, '$[1]') = v.digest)
        ORDER BY v.id""",
    "postgresql": """
        SELECT t.thread_id, v.checkpoint_ns, v.channel, v.version
        FROM sessions_app_checkpointvalue v JOIN sessions_app_thread t ON t.id = v.thread_id
        WHERE v.id >= %s AND v.id <= %s AND NOT EXISTS (
            SELECT 1 FROM sessions_app_checkpoint c
            WHERE c.thread_id = v.thread_id AND c.checkpoint_ns = v.checkpoint_ns
              AND c.values_ref -> v.channel = jsonb_build_array(v.version, v.digest))
        ORDER BY v.id""",
}


def _ranges(rows: QuerySet, batch: int) -> Iterator[tuple[int, int]]:
    """(first, last) primary keys of consecutive batches of `rows`: `batch` keys in memory at most."""
    last = 0
    while True:
        pks = list(rows.filter(pk__gt=last).order_by("pk").values_list("pk", flat=True)[:batch])
        if not pks:
            return
        yield pks[0], pks[-1]
        last = pks[-1]


def _rows(sql: dict[str, str], low: int, high: int, thread: int | None):
    text = sql[connection.vendor]
    params = [low, high]
    if thread is not None:
        text = text.replace("ORDER BY", "AND t.id = %s ORDER BY")
        params.append(thread)
    with connection.cursor() as cursor:
        cursor.execute(text, params)
        return cursor.fetchall()


def check_values(threads: QuerySet[Thread], thread: int | None, report: Report, batch: int) -> None:
    """missing_value and orphan_value, a range of primary keys at a time."""
    referring = Checkpoint.objects.filter(thread__in=threads, values_ref__isnull=False)
    for low, high in _ranges(referring, batch):
        for thread_id, ns, checkpoint_id, channel, ref in _rows(_MISSING, low, high, thread):
            report("missing_value", f"thread:{thread_id}/{ns}/{checkpoint_id}", f"channel {channel} at {ref} is not stored")
    for low, high in _ranges(CheckpointValue.objects.filter(thread__in=threads), batch):
        for thread_id, ns, channel, version in _rows(_ORPHANS, low, high, thread):
            report("orphan_value", f"thread:{thread_id}/{ns}/{channel}@{version}", "a value by version no checkpoint holds")


def _batches(rows: QuerySet, batch: int) -> Iterator[list]:
    last = 0
    while True:
        found = list(rows.filter(pk__gt=last).order_by("pk")[:batch])
        if not found:
            return
        yield found
        last = found[-1].pk


def _raw_markers(value, found: list) -> None:
    """A checkpoint's markers as stored (`{"$messages": {"channel", "count", ...}}`)."""
    if type(value) is dict:
        inner = value.get(MARKER)
        if len(value) == 1 and type(inner) is dict:
            found.append(inner)
            return
        for item in value.values():
            _raw_markers(item, found)
    elif type(value) is list:
        for item in value:
            _raw_markers(item, found)


def check_references(threads: QuerySet[Thread], report: Report, batch: int) -> None:
    """missing_messages and unresolved_marker: checkpoints holding messages by reference or
    markers, read back as every read does (`checkpoints_hydrate`), then writes with markers."""
    in_threads = Checkpoint.objects.filter(thread__in=threads).annotate(thread_name=F("thread__thread_id"))
    # Without markers only the messages are read back: the rest of the document is not loaded.
    plain = in_threads.filter(messages_ref__isnull=False, refs__isnull=True).only(
        "pk", "thread_id", "checkpoint_ns", "checkpoint_id", "messages_ref", "refs"
    )
    for rows in _batches(plain, batch):
        for row in rows:
            row.checkpoint = {"channel_values": {}}
        _check_rows(rows, report)
    for rows in _batches(in_threads.filter(refs__isnull=False), batch):
        _check_rows(rows, report)
    writes = CheckpointWrite.objects.filter(thread__in=threads, refers=True).annotate(thread_name=F("thread__thread_id"))
    for rows in _batches(writes, batch):
        checkpoints_hydrate([], also=writes_held(rows))
        for write in rows:
            items = dict(write.held)
            for marker in stored_markers(write.value):
                item, count = items.get(id(marker)), marker.get("count")
                if item is None or type(count) is not int or len(item.messages) < count:
                    report(
                        "unresolved_marker",
                        f"thread:{write.thread_name}/{write.checkpoint_ns}/{write.checkpoint_id}/writes/{write.task_id}#{write.idx}",
                        f"a marker of {count} messages reads back {0 if item is None else min(len(item.messages), count or 0)}",
                    )


def _check_rows(rows: list[Checkpoint], report: Report) -> None:
    """A batch of checkpoints read back as every read does: their messages, their markers."""
    marked = {}
    for row in rows:
        values = row.checkpoint.get("channel_values") if isinstance(row.checkpoint, dict) else None
        if isinstance(row.refs, list) and isinstance(values, dict):
            marked[row.pk] = {name: copy.deepcopy(values.get(name)) for name in row.refs if isinstance(name, str)}
    for row in checkpoints_hydrate(rows):
        where = f"thread:{row.thread_name}/{row.checkpoint_ns}/{row.checkpoint_id}"
        values = row.checkpoint.get("channel_values", {}) if isinstance(row.checkpoint, dict) else {}
        ref = row.messages_ref if isinstance(row.messages_ref, dict) else None
        if ref is not None:
            found = values.get(ref.get("channel"))
            if not isinstance(found, list) or len(found) != ref.get("count"):
                report("missing_messages", where, f"holds {ref.get('count')} messages by reference; {len(found or [])} blocks found")
        for name, raw in marked.get(row.pk, {}).items():
            markers: list = []
            _raw_markers(raw, markers)
            for marker in markers:
                held = values.get(marker.get("channel"))
                if marker.get("channel") in marked[row.pk] or not isinstance(held, list) or marker.get("count", 0) > len(held):
                    report("unresolved_marker", f"{where}/{name}", f"a marker of {marker.get('count')} messages of {marker.get('channel')!r} does not read back whole")
