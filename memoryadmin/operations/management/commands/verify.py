"""`manage.py verify`: scan the stored data and report every broken invariant.

Exit status 0 when everything holds, 1 when something is broken (for monitoring
and cron), so it can run after a crash, a restore or a manual SQL fix. A thread whose
stored data cannot be processed at all is reported (`unreadable`, with the reason)
and the check goes on with the others.
"""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand
from django.db.models import Exists, F, OuterRef, Subquery, TextField
from django.db.models.functions import Cast

from memoryadmin.json import stored_loads

from sessions_app.models import Block, Checkpoint, CheckpointWrite, Thread
from sessions_app.threads.messages import ContextHasher


class Command(BaseCommand):
    help = "Check every thread, checkpoint and store item for broken invariants; exit 1 if any."

    def add_arguments(self, parser):
        parser.add_argument("--thread", help="check this thread only")
        parser.add_argument("--json", action="store_true", help="print the problems as JSON lines")
        parser.add_argument("--max-problems", type=int, default=1000, help="stop listing after this many")

    def handle(self, *args, **options):
        self.problems: list[dict] = []
        self.max_problems = options["max_problems"]
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
        items = self._check_store_items() if not options["thread"] else 0
        for problem in self.problems[: self.max_problems]:
            self.stdout.write(json.dumps(problem) if options["json"] else f"{problem['kind']}: {problem['where']}: {problem['detail']}")
        summary = f"checked {checked} threads and {items} store items: {len(self.problems)} problem(s)"
        if self.problems:
            self.stderr.write(summary)
            raise SystemExit(1)
        self.stdout.write(summary)

    def _report(self, kind: str, where: str, detail: str) -> None:
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
        self._check_checkpoint_messages(threads)
        self._check_checkpoint_values(threads)

    def _check_checkpoint_messages(self, threads) -> None:
        """Every checkpoint holding its messages by reference finds them all among the thread's blocks."""
        from sessions_app.checkpoints.conversation import checkpoints_hydrate

        referring = (
            Checkpoint.objects.filter(thread__in=threads, messages_ref__isnull=False)
            .order_by("pk")
            .only("pk", "thread_id", "checkpoint_ns", "checkpoint_id", "messages_ref")
            .annotate(thread_name=F("thread__thread_id"))
        )
        last = 0
        while True:
            rows = list(referring.filter(pk__gt=last)[:200])
            if not rows:
                return
            last = rows[-1].pk
            for row in rows:
                row.checkpoint = {"channel_values": {}}
            for row in checkpoints_hydrate(rows):
                ref = row.messages_ref if isinstance(row.messages_ref, dict) else {}
                found = row.checkpoint["channel_values"].get(ref.get("channel"))
                if not isinstance(found, list) or len(found) != ref.get("count"):
                    self._report(
                        "missing_messages",
                        f"thread:{row.thread_name}/{row.checkpoint_ns}/{row.checkpoint_id}",
                        f"holds {ref.get('count')} messages by reference; {len(found or [])} blocks found",
                    )

    def _check_checkpoint_values(self, threads) -> None:
        """Every channel value a checkpoint holds by version is stored (sessions_app/checkpoints/versions.py)."""
        from sessions_app.models import CheckpointValue

        stored = set(
            CheckpointValue.objects.filter(thread__in=threads).values_list("thread_id", "checkpoint_ns", "channel", "version", "digest")
        )
        referring = Checkpoint.objects.filter(thread__in=threads, values_ref__isnull=False).values_list(
            "thread_id", "thread__thread_id", "checkpoint_ns", "checkpoint_id", "values_ref"
        )
        for thread_pk, thread_id, ns, checkpoint_id, refs in referring.iterator(chunk_size=1000):
            for channel, ref in (refs.items() if isinstance(refs, dict) else ()):
                if not (isinstance(ref, list) and (thread_pk, ns, channel, *ref) in stored):
                    self._report("missing_value", f"thread:{thread_id}/{ns}/{checkpoint_id}", f"channel {channel} at {ref} is not stored")

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
