"""Thread bundles: a zip of one thread (or several), streamed (docs/operations.md, "Export").

A bundle holds, per thread:

- `transcript.md`: every block in seq order, archived ones marked with the rewrite
  that archived them, for a person to read;
- `agent-state.json`: what loading the agent's state returns (the active context
  exactly as posted, extra_state) plus the thread's metadata;
- `checkpoints.jsonl`: one checkpoint per line, oldest first, with its pending
  writes, in the API's shape;
- `manifest.json`: the thread, who exported it and when, counts, and the size and
  SHA-256 of each file above.

Memory stays flat whatever the thread's size: blocks are read with
`.iterator(chunk_size=…)`, checkpoints by keyset in chunks, each file is written
into the zip as it is read (`ZipFile.open(name, "w")` onto a write-only sink that
the response drains), and the hashes are computed on the way.
"""

from __future__ import annotations

import hashlib
import os
import zipfile
from pathlib import Path
from collections.abc import Generator, Iterable, Iterator
from typing import Any

import orjson
from django.conf import settings
from django.db import transaction
from django.db.models import Max, QuerySet, TextField
from django.db.models.fields.json import KeyTextTransform, KeyTransform
from django.db.models.functions import Cast, Coalesce
from django.utils import timezone

from memoryadmin import policy, queue
from memoryadmin.audit import audit_record
from memoryadmin.errors import Forbidden, InvalidInput, NotFound
from memoryadmin.json import dumps, stored_loads

from sessions_app.checkpoints.selectors import attach_writes, checkpoint_as_dict
from sessions_app.checkpoints.models import Checkpoint
from sessions_app.threads.models import Block, Thread
from sessions_app.threads.selectors import thread_get_for_read
from memoryadmin.operations.bulk import Selection, selection_threads
from memoryadmin.operations.models import ExportJob

FORMAT = "memoryadmin-thread-bundle/1"
BLOCK_CHUNK = 500
CHECKPOINT_CHUNK = 200
FLUSH_BYTES = 256 * 1024
BULK_EXPORT_MAX = 10_000
# Bulk exports of more threads than this are written by the job queue, not streamed.
EXPORT_INLINE_THREADS = 100


class _Sink:
    """A write-only, unseekable file: zipfile writes into it, the response takes what piled up.

    Without `seek`, zipfile streams: each member's sizes and CRC follow its data
    (a data descriptor) instead of being patched into its header afterwards.
    """

    def __init__(self) -> None:
        # One growing buffer, not a list of pieces: the compressor hands over many tiny
        # (often empty) pieces, and joining tens of thousands of them costs megabytes.
        self._buffer = bytearray()
        self._position = 0

    def write(self, data) -> int:
        self._buffer += data
        self._position += len(data)
        return len(data)

    def tell(self) -> int:
        return self._position

    def flush(self) -> None:
        pass

    @property
    def pending(self) -> int:
        return len(self._buffer)

    def take(self) -> bytes:
        data = bytes(self._buffer)
        self._buffer.clear()
        return data


def _blocks(thread: Thread) -> QuerySet:
    return Block.objects.filter(thread=thread).order_by("seq")


def _transcript(thread: Thread, counts: dict[str, int]) -> Iterator[bytes]:
    owner = thread.owner.get_username()
    yield (
        f"# {thread.title or thread.thread_id}\n\n"
        f"- thread: `{thread.thread_id}`\n- owner: {owner}\n- agent: {thread.agent_code}\n"
        f"- created: {thread.created_at.isoformat()}\n- updated: {thread.updated_at.isoformat()}\n\n"
    ).encode()
    # The message's name and tool calls are read as text in SQL: decoding each message's
    # JSON in Python would cost more than the rest of the line. A LangChain envelope (a
    # LangGraph thread's messages) holds them in its kwargs.
    kwargs = KeyTransform("kwargs", "message")
    rows = _blocks(thread).values_list(
        "seq",
        "role",
        "content",
        "archived",
        "archived_by",
        "block_type",
        Coalesce(KeyTextTransform("name", "message"), KeyTextTransform("name", kwargs)),
        Coalesce(
            Cast(KeyTransform("tool_calls", "message"), output_field=TextField()),
            Cast(KeyTransform("tool_calls", kwargs), output_field=TextField()),
        ),
        "created_at",
    )
    for seq, role, content, archived, archived_by, block_type, name, calls, created_at in rows.iterator(chunk_size=BLOCK_CHUNK):
        counts["blocks"] += 1
        counts["archived_blocks" if archived else "active_blocks"] += 1
        marks = [role]
        if block_type != "message":
            marks.append(block_type)
        if name:
            marks.append(name)
        if archived:
            marks.append(f"archived by rewrite #{archived_by}")
        head = f"## #{seq} · {' · '.join(marks)} · {created_at.isoformat()}\n\n"
        tail = ""
        if calls and calls not in ("null", "[]"):
            tail = "\n\n```json\n" + dumps(stored_loads(calls), option=orjson.OPT_INDENT_2).decode() + "\n```"
        yield (head + (content or "") + tail + "\n\n").encode()


def _agent_state(thread: Thread, counts: dict[str, int]) -> Iterator[bytes]:
    head = {
        "thread_id": thread.thread_id,
        "agent_code": thread.agent_code,
        "extra_state": thread.extra_state,
        "metadata": thread.metadata,
    }
    # The object is written by hand around the context so that the context streams.
    yield dumps(head)[:-1] + b',"context":['
    # Each message as the database's JSON text: valid JSON already, so it is copied, not decoded
    # and encoded again.
    messages = (
        Block.objects.filter(thread=thread, agent_code=thread.agent_code, archived=False)
        .order_by("seq")
        .values_list(Cast("message", output_field=TextField()), flat=True)
    )
    first = True
    for message in messages.iterator(chunk_size=BLOCK_CHUNK):
        counts["context_messages"] += 1
        yield (b"\n" if first else b",\n") + message.encode()
        first = False
    yield b"\n]}\n"


def _checkpoints(thread: Thread, counts: dict[str, int]) -> Iterator[bytes]:
    last = 0
    while True:
        rows = list(Checkpoint.objects.filter(thread=thread, pk__gt=last).order_by("pk")[:CHECKPOINT_CHUNK])
        if not rows:
            return
        last = rows[-1].pk
        for row in attach_writes(rows):
            counts["checkpoints"] += 1
            counts["pending_writes"] += len(row.pending)
            yield dumps(checkpoint_as_dict(row, thread=thread)) + b"\n"


def _write_member(zf: zipfile.ZipFile, sink: _Sink, name: str, pieces: Iterable[bytes]) -> Generator[bytes, None, dict[str, Any]]:
    digest = hashlib.sha256()
    size = 0
    with zf.open(name, "w", force_zip64=True) as out:
        for piece in pieces:
            digest.update(piece)
            size += len(piece)
            out.write(piece)
            if sink.pending >= FLUSH_BYTES:
                yield sink.take()
    yield sink.take()
    return {"bytes": size, "sha256": digest.hexdigest()}


def _thread_members(zf: zipfile.ZipFile, sink: _Sink, thread: Thread, *, prefix: str, exported_by: str) -> Generator[bytes, None, dict[str, Any]]:
    counts = {"blocks": 0, "active_blocks": 0, "archived_blocks": 0, "context_messages": 0, "checkpoints": 0, "pending_writes": 0}
    files = {}
    for name, producer in (
        ("transcript.md", _transcript),
        ("agent-state.json", _agent_state),
        ("checkpoints.jsonl", _checkpoints),
    ):
        files[name] = yield from _write_member(zf, sink, prefix + name, producer(thread, counts))
    manifest = {
        "format": FORMAT,
        "thread_id": thread.thread_id,
        "owner": thread.owner.get_username(),
        "agent_code": thread.agent_code,
        "title": thread.title,
        "exported_at": timezone.now().isoformat(),
        "exported_by": exported_by,
        "counts": counts,
        "files": files,
    }
    body = orjson.dumps(manifest, option=orjson.OPT_INDENT_2) + b"\n"
    yield from _write_member(zf, sink, prefix + "manifest.json", [body])
    return manifest


def _bundle(threads: Iterable[Thread], *, exported_by: str, single: bool) -> Iterator[bytes]:
    sink = _Sink()
    with zipfile.ZipFile(sink, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=6) as zf:
        listed = []
        for thread in threads:
            prefix = "" if single else f"{thread.thread_id}/"
            manifest = yield from _thread_members(zf, sink, thread, prefix=prefix, exported_by=exported_by)
            listed.append({"thread_id": thread.thread_id, "counts": manifest["counts"]})
        if not single:
            index = {"format": FORMAT, "exported_at": timezone.now().isoformat(), "exported_by": exported_by, "threads": listed}
            yield from _write_member(zf, sink, "index.json", [orjson.dumps(index, option=orjson.OPT_INDENT_2) + b"\n"])
    yield sink.take()


def bundle_filename(thread_id: str) -> str:
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in thread_id)
    return f"thread-{safe}.zip"


def thread_export(*, actor, thread_id: str, request=None) -> tuple[Thread, Iterator[bytes]]:
    """The bundle of one thread the actor may read, as a stream of zip bytes.

    Members export their own threads; operators and admins any thread, and that
    export of another user's thread is an audit event (`thread.export`).
    """
    thread = thread_get_for_read(actor=actor, thread_id=thread_id, audit=False)
    policy.record_read(actor, owner=thread.owner, target=f"thread:{thread.thread_id}", action="thread.export")
    return thread, _bundle([thread], exported_by=actor.get_username(), single=True)


def _ensure_exportable(actor, threads: QuerySet[Thread]) -> int:
    """The selection holds only what the actor may read, and at most BULK_EXPORT_MAX threads; its size."""
    if not policy.may_read_all(actor) and threads.exclude(pk__in=policy.restrict(Thread.objects.all(), actor).values("pk")).exists():
        raise Forbidden("A bulk export may only hold your own threads.", target="threads", action="bulk.export")
    total = threads.count()
    if total > BULK_EXPORT_MAX:
        raise InvalidInput(
            f"{total} threads selected; export at most {BULK_EXPORT_MAX} at once.",
            fields={"selection": [f"at most {BULK_EXPORT_MAX} threads."]},
        )
    return total


def threads_export(*, actor, threads: QuerySet[Thread], selection: dict[str, Any], request=None) -> Iterator[bytes]:
    """A bundle of several threads (the thread list's bulk export): one folder per thread.

    `threads` must already be limited to what the actor may read; the export is
    one audit event naming the selection and how many threads it held.
    """
    total = _ensure_exportable(actor, threads)
    audit_record(
        actor=actor, action="bulk.export", target="threads", detail={"selection": selection, "threads": total}, request=request
    )
    return _bundle(threads.select_related("owner").order_by("pk").iterator(chunk_size=100), exported_by=actor.get_username(), single=False)


def bulk_export_start(*, actor, selection: Selection, request=None) -> Iterator[bytes] | ExportJob:
    """The bulk export of a selection: streamed at once (the zip's bytes), or, past
    EXPORT_INLINE_THREADS threads where there is a job queue, an `ExportJob` queued in
    the transaction that records it and audits the export (one `bulk.export` event).

    The job's selection is frozen by `max_pk`, as a bulk job's; the worker writes the
    same bundle to a file, downloaded by the person who asked (`export.download`).
    """
    threads = selection_threads(actor=actor, selection=selection)
    total = _ensure_exportable(actor, threads)
    if total <= EXPORT_INLINE_THREADS or not queue.is_queued():
        return threads_export(actor=actor, threads=threads, selection=selection.as_dict(), request=request)
    with transaction.atomic():
        job = ExportJob.objects.create(
            actor=actor,
            actor_name=actor.get_username(),
            selection=selection.as_dict(),
            max_pk=threads.aggregate(top=Max("pk"))["top"] or 0,
            total=total,
        )
        audit_record(
            actor=actor,
            action="bulk.export",
            target="threads",
            detail={"selection": selection.as_dict(), "threads": total, "job": job.pk},
            request=request,
        )
        queue.job_enqueue("bulk_export_run", job_id=job.pk)
    return job


def export_job_path(job: ExportJob) -> Path:
    return Path(settings.MEMORYADMIN_EXPORT_DIR) / f"export-{job.pk}.zip"


def export_job_run(*, job_id: int) -> ExportJob:
    """The queue's job: the bundle written to a file, with the eyes of who asked for it.

    Written to a temporary file and renamed when complete, so a worker killed midway
    leaves no partial download; taken again, the job writes the file anew.
    """
    job = ExportJob.objects.select_related("actor").get(pk=job_id)
    if job.is_finished:
        return job
    if job.actor is None:
        ExportJob.objects.filter(pk=job.pk).update(status=ExportJob.Status.FAILED, error="Its owner no longer exists.", finished_at=timezone.now())
        return ExportJob.objects.get(pk=job.pk)
    ExportJob.objects.filter(pk=job.pk).update(status=ExportJob.Status.RUNNING)
    threads = selection_threads(actor=job.actor, selection=Selection.from_dict(job.selection)).filter(pk__lte=job.max_pk)
    path = export_job_path(job)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".part")
    with partial.open("wb") as out:
        for chunk in _bundle(threads.select_related("owner").order_by("pk").iterator(chunk_size=100), exported_by=job.actor_name, single=False):
            out.write(chunk)
    os.replace(partial, path)
    ExportJob.objects.filter(pk=job.pk).update(status=ExportJob.Status.DONE, size=path.stat().st_size, finished_at=timezone.now())
    return ExportJob.objects.get(pk=job.pk)


def export_job_get(*, actor, job_id: int) -> ExportJob:
    """A queued export, for its page and its download: only the person who asked for it."""
    job = ExportJob.objects.filter(pk=job_id, actor__isnull=False).first()
    if job is None:
        raise NotFound(f"No export {job_id}.")
    policy.ensure_may_read(actor, owner_id=job.actor_id, target=f"export:{job.pk}", action="export.download")
    return job
