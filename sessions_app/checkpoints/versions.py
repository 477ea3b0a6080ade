"""Channel values stored once per version (docs/checkpoints.md, "Storage").

A LangGraph checkpoint names the version of each channel (`channel_versions`), and a
channel's value changes only with its version: the checkpoints of a step that did not write
a channel hold the very value of the step before. As LangGraph's own savers keep a
`checkpoint_blobs` row per (thread, namespace, channel, version), a channel value of
VALUE_BY_VERSION_MIN bytes or more is stored once, in `CheckpointValue`, keyed by
(thread, namespace, channel, version, digest), and the checkpoint's row holds
`values_ref = {channel: [version, digest]}` instead of the value. The digest (SHA-256 of
the value's stored JSON) keeps every checkpoint exact where a saver reused a version for
another value. Smaller values stay in the row: a row of their own would cost more than it
saves.

Not by version: the messages channel kept as the thread's blocks (conversation.py), the
channels holding message markers (references.py: their markers resolve against each
checkpoint's own messages), a channel without a version, and checkpoints not made by
LangGraph. Every read puts the values back (`values_hydrate`, one query for any number of
checkpoints); removing checkpoints removes the values no remaining checkpoint of the
thread holds (removal.py, `values_collect`).
"""

from __future__ import annotations

import hashlib
from typing import Any

from django.db.models import Q

from memoryadmin.json import db_text

from .models import CheckpointValue

VALUE_BY_VERSION_MIN = 256
VERSION_MAX = 128


def _version_text(version: Any) -> str | None:
    if isinstance(version, bool) or not isinstance(version, str | int | float):
        return None
    text = str(version)
    return text if 0 < len(text) <= VERSION_MAX else None


def values_rows(*, checkpoint_ns: str, body: dict[str, Any], keep: set[str]) -> tuple[dict[str, Any], dict | None, list]:
    """The checkpoint document to store, its `values_ref`, and the values to store by version
    as (channel, version, digest, stored JSON text): large versioned channel values (not
    those in `keep`), left out of the document."""
    values, versions = body.get("channel_values"), body.get("channel_versions")
    if not isinstance(values, dict) or not isinstance(versions, dict) or not isinstance(body.get("versions_seen"), dict):
        return body, None, []
    refs, rows = {}, []
    for name, value in values.items():
        if name in keep or len(name) > 255:
            continue
        version = _version_text(versions.get(name))
        if version is None:
            continue
        text = db_text(value)
        if len(text) < VALUE_BY_VERSION_MIN:
            continue
        digest = hashlib.sha256(text.encode()).hexdigest()
        refs[name] = [version, digest]
        rows.append((name, version, digest, text))
    if not rows:
        return body, None, []
    stored = dict(body)
    stored["channel_values"] = {name: value for name, value in values.items() if name not in refs}
    return stored, refs, rows


def values_split(*, thread, checkpoint_ns: str, body: dict[str, Any], keep: set[str]) -> tuple[dict[str, Any], dict | None]:
    """The checkpoint document to store and its `values_ref` (`values_rows`), the values
    written once to CheckpointValue (one INSERT, conflicts ignored)."""
    stored, refs, rows = values_rows(checkpoint_ns=checkpoint_ns, body=body, keep=keep)
    if rows:
        values = body["channel_values"]
        CheckpointValue.objects.bulk_create(
            [
                CheckpointValue(thread=thread, checkpoint_ns=checkpoint_ns, channel=name, version=version, digest=digest,
                                value=values[name])
                for name, version, digest, _text in rows
            ],
            ignore_conflicts=True,
        )
    return stored, refs


def value_ref_valid(ref: Any) -> bool:
    return isinstance(ref, list) and len(ref) == 2 and all(isinstance(part, str) for part in ref)


def values_hydrate(rows: list) -> list:
    """Put every channel value stored by version back into its checkpoint: one query for any
    number of checkpoints (none when no row holds one). A value no longer there (a row
    removed by hand) is left out, never a failure."""
    wanted = []
    for row in rows:
        refs = row.__dict__.get("values_ref")
        if isinstance(refs, dict) and refs and isinstance(row.checkpoint, dict):
            wanted.append((row, refs))
    if not wanted:
        return rows
    where = Q()
    for thread_id in {row.thread_id for row, _ in wanted}:
        digests = {ref[1] for row, refs in wanted if row.thread_id == thread_id for ref in refs.values() if value_ref_valid(ref)}
        where |= Q(thread_id=thread_id, digest__in=sorted(digests))
    found = {
        (thread_id, ns, channel, version, digest): value
        for thread_id, ns, channel, version, digest, value in CheckpointValue.objects.filter(where).values_list(
            "thread_id", "checkpoint_ns", "channel", "version", "digest", "value"
        )
    }
    return values_apply(rows, found, wanted)


def values_apply(rows: list, found: dict, wanted: list | None = None) -> list:
    """Put the values read (`found`, by (thread pk, namespace, channel, version, digest)) into the
    checkpoints holding them (`wanted`: (row, its values_ref); by default every row holding some)."""
    if wanted is None:
        wanted = [(row, row.values_ref) for row in rows if isinstance(row.values_ref, dict) and isinstance(row.checkpoint, dict)]
    for row, refs in wanted:
        values = row.checkpoint.setdefault("channel_values", {})
        if not isinstance(values, dict):
            continue
        for channel, ref in refs.items():
            key = (row.thread_id, row.__dict__.get("checkpoint_ns", ""), channel, *ref) if value_ref_valid(ref) else None
            if key in found:
                values[channel] = found[key]
    return rows
