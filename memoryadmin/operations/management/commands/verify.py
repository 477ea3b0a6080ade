"""`manage.py verify`: scan the stored data and report every broken invariant.

Exit status 0 when everything holds, 1 when something is broken (for monitoring
and cron), so it can run after a crash, a restore or a manual SQL fix. A thread whose
stored data cannot be processed at all is reported (`unreadable`, with the reason)
and the check goes on with the others.
"""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand
from django.db.models import Exists, OuterRef, Subquery, TextField
from django.db.models.functions import Cast

from memoryadmin.json import stored_loads
from memoryadmin.operations.verify_checkpoints import check_references, check_values

from sessions_app.checkpoints.status import status_refresh, statuses_stale
from sessions_app.models import Block, Checkpoint, CheckpointWrite, Thread
from sessions_app.threads.messages import ContextHasher


class Command(BaseCommand):
    help = "Check every thread, checkpoint and store item for broken invariants; exit 1 if any."

    def add_arguments(self, parser):
        parser.add_argument("--thread", help="check this thread only")
        parser.add_argument("--json", action="store_true", help="print the problems as JSON lines")
        parser.add_argument("--max-problems", type=int, default=1000, help="stop listing after this many")
        parser.add_argument("--batch", type=int, default=500, help="rows read at a time by the checkpoint checks")
        parser.add_argument(
            "--fix-status", action="store_true",
            help="store again the status of the threads whose stored status is not the one their checkpoints give",
        )

    def handle(self, *args, **options):
        self.problems: list[dict] = []
        self.found = 0
        self.max_problems = options["max_problems"]
        self.batch = max(1, options["batch"])
        self.thread_only = bool(options["thread"])
        threads = Thread.objects.order_by("pk")
        if options["thread"]:
            threads = threads.filter(thread_id=options["thread"])
        checked = 0
        for thread in threads.iterator(chunk_size=500):
            try:
                self._check_thread(thread)
            except Exception as exc:  # noqa: BLE001 - one thread's data must not stop the others' check
                self._report("unreadable", f"thread:{thread.thread_id}", f"cannot be checked: {type(exc).__name__}: {exc}"[:500])
            checked += 1
        self._check_checkpoints(threads)
        self._check_statuses(threads, fix=options["fix_status"])
        items = self._check_store_items() if not options["thread"] else 0
        for problem in self.problems[: self.max_problems]:
            self.stdout.write(json.dumps(problem) if options["json"] else f"{problem['kind']}: {problem['where']}: {problem['detail']}")
        summary = f"checked {checked} threads and {items} store items: {self.found} problem(s)"
        if self.found:
            self.stderr.write(summary)
            raise SystemExit(1)
        self.stdout.write(summary)

    def _report(self, kind: str, where: str, detail: str) -> None:
        # Counted all, kept up to the number listed: memory stays flat however broken the data.
        self.found += 1
        if len(self.problems) < self.max_problems:
            self.problems.append({"kind": kind, "where": where, "detail": detail})

    def _check_thread(self, thread: Thread) -> None:
        where = f"thread:{thread.thread_id}"
        # Each message as its stored text, decoded here whole (not cut for display as the
        # model field would): the chain is checked against exactly what is stored.
        rows = list(
            Block.objects.filter(thread=thread)
            .order_by("seq")
            .values_list("seq", "agent_code", "position", "archived", Cast("message", TextField()), "chain_hash")
        )
        seqs = [row[0] for row in rows]
        if len(seqs) != len(set(seqs)):
            self._report("duplicate_seq", where, "a seq appears more than once")
        if seqs and max(seqs) > thread.last_seq:
            self._report("seq_above_last_seq", where, f"max seq {max(seqs)} > last_seq {thread.last_seq}")
        active = [row for row in rows if not row[3]]
        if len(active) != thread.active_count or len(rows) - len(active) != thread.archived_count:
            self._report(
                "counts",
                where,
                f"stored counts {thread.active_count}/{thread.archived_count}, "
                f"blocks {len(active)}/{len(rows) - len(active)} (active/archived)",
            )
        by_agent: dict[str, list] = {}
        for row in active:
            by_agent.setdefault(row[1], []).append(row)
        for agent_code, blocks in by_agent.items():
            positions = [row[2] for row in blocks]
            if positions != list(range(len(blocks))):
                self._report("positions", f"{where}/{agent_code}", "active positions are not 0..n-1 in seq order")
                continue
            try:
                digests = ContextHasher([stored_loads(row[4], depth_max=None) for row in blocks]).digests_from(0)
            except (ValueError, TypeError, RecursionError) as exc:
                self._report("unreadable", f"{where}/{agent_code}", f"a message cannot be hashed: {exc}"[:500])
                continue
            for row, digest in zip(blocks, digests):
                if row[5] != digest:
                    self._report("chain_hash", f"{where}/{agent_code}#{row[0]}", "the hash chain does not match the blocks")
                    break

    def _check_checkpoints(self, threads) -> None:
        parents = Checkpoint.objects.filter(
            thread=OuterRef("thread"), checkpoint_ns=OuterRef("checkpoint_ns"), checkpoint_id=OuterRef("parent_checkpoint_id")
        ).values("pk")[:1]
        missing = (
            Checkpoint.objects.filter(thread__in=threads)
            .exclude(parent_checkpoint_id="")
            .annotate(parent_pk=Subquery(parents))
            .filter(parent_pk__isnull=True)
            .values_list("thread__thread_id", "checkpoint_ns", "checkpoint_id", "parent_checkpoint_id")
        )
        for thread_id, ns, checkpoint_id, parent in missing.iterator(chunk_size=1000):
            self._report("missing_parent", f"thread:{thread_id}/{ns}/{checkpoint_id}", f"parent {parent} does not exist")
        owner = Checkpoint.objects.filter(
            thread=OuterRef("thread"), checkpoint_ns=OuterRef("checkpoint_ns"), checkpoint_id=OuterRef("checkpoint_id")
        )
        orphans = (
            CheckpointWrite.objects.filter(thread__in=threads)
            .filter(~Exists(owner))
            .values_list("thread__thread_id", "checkpoint_ns", "checkpoint_id")
            .distinct()
        )
        for thread_id, ns, checkpoint_id in orphans.iterator(chunk_size=1000):
            self._report("orphan_writes", f"thread:{thread_id}/{ns}/{checkpoint_id}", "pending writes without their checkpoint")
        # What checkpoints hold by reference, in batches: memory stays flat with the data's size.
        one = threads.values_list("pk", flat=True).first() if self.thread_only else None
        check_values(threads, one, self._report, self.batch)
        check_references(threads, self._report, self.batch)

    def _check_statuses(self, threads, *, fix: bool) -> None:
        """The status stored on each thread row against the one read from its checkpoints
        (sessions_app/checkpoints/status.py); with `fix`, stored again (and not reported)."""
        stale = []
        for pk, thread_id, stored, read in statuses_stale(threads).iterator(chunk_size=1000):
            if fix:
                stale.append(pk)
                self.stdout.write(f"status stored again: thread:{thread_id}: {stored} -> {read}")
            else:
                self._report("stale_status", f"thread:{thread_id}", f"status {stored!r} stored, {read!r} read from its checkpoints")
        status_refresh(stale)

    def _check_store_items(self) -> int:
        from memoryadmin.errors import InvalidInput
        from store_app.models import StoreItem
        from store_app.namespaces import namespace_from_path

        count = 0
        for pk, path, depth, key in StoreItem.objects.order_by("pk").values_list("pk", "namespace_path", "depth", "key").iterator(chunk_size=2000):
            count += 1
            try:
                namespace = namespace_from_path(path)
            except InvalidInput as exc:
                self._report("store_namespace", f"store:{path}/{key}", exc.message)
                continue
            if not namespace or len(namespace) != depth:
                self._report("store_namespace", f"store:{path}/{key}", f"depth {depth} does not match {len(namespace)} labels")
        return count
