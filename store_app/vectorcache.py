"""The vectors a server process has read for semantic searches, kept for the next ones (docs/store.md, "Semantic search").

Without pgvector a search scores its candidates' vectors in the process; reading
them from the database (a kilobyte each for 256 dimensions) is most of its cost.
This cache keeps them, per database alias and `dims`, keyed by (item id, the
item's `vectors_version`). The key is the proof of freshness: every put writes a
version never used before in the transaction that replaces the item's vectors
(store_app.puts; a PostgreSQL sequence, random 63 bits on SQLite), ids are never
used again, and nothing else writes vectors. So a search reads each candidate's
id and version with its candidates (store_app.semantic) and finds here exactly
the vectors the database holds for it; any other process's put changes the
version and the entry is not found. Entries are never wrong, only unused: an
item deleted or rewritten leaves its old vectors behind until the space is
taken back.

Memory: at most MEMORYADMIN_STORE_VECTOR_CACHE_MB per process (0 turns the cache
off): the float32 numbers and the norm of each vector kept, plus 32 bytes an
item. When an addition does not fit, the space of rewritten items is taken back
first, then every other `dims` is dropped, then everything; a search whose
vectors do not fit on their own is not cached (it reads them, as without a cache).

Threads: readers take the current snapshot (one dict read) and never lock; an
addition, under the lock, writes rows past every snapshot's end or makes new
arrays, and then publishes a new snapshot, so a reader never sees a row change.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np
from django.conf import settings

_ITEM_BYTES = 32  # item id, version, first row and row count


@dataclass(frozen=True)
class Snapshot:
    """What one (alias, dims) holds: items sorted by id, each with its version and its rows of
    `matrix` (float32, one vector a row) and `norms`; rows past `used` are not written yet."""

    item_ids: np.ndarray
    versions: np.ndarray
    starts: np.ndarray
    counts: np.ndarray
    matrix: np.ndarray
    norms: np.ndarray
    used: int

    @property
    def live_rows(self) -> int:
        return int(self.counts.sum())

    @property
    def nbytes(self) -> int:
        return self.matrix.nbytes + self.norms.nbytes + len(self.item_ids) * _ITEM_BYTES


@dataclass(frozen=True)
class Found:
    """Which candidates (by place) the cache holds at their version, and their vectors' rows."""

    snapshot: Snapshot | None
    hit: np.ndarray  # bool, by place
    rows: np.ndarray  # the hits' vectors: rows of snapshot.matrix
    places: np.ndarray  # and the place of each one's candidate


def _empty(dims: int) -> Snapshot:
    none = np.zeros(0, dtype=np.int64)
    return Snapshot(none, none, none, none, np.zeros((0, dims), dtype="<f4"), np.zeros(0), 0)


def _ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The rows starts[i] .. starts[i] + counts[i] - 1 of every i, in order."""
    if (counts == 1).all():  # one vector an item, the usual case
        return starts.copy()
    ends = np.cumsum(counts)
    return np.repeat(starts - (ends - counts), counts) + np.arange(int(ends[-1]) if len(ends) else 0)


class VectorCache:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._snapshots: dict[tuple[str, int], Snapshot] = {}

    @staticmethod
    def budget() -> int:
        return settings.MEMORYADMIN_STORE_VECTOR_CACHE_MB * 2**20

    def enabled(self) -> bool:
        return self.budget() > 0

    def holds_any(self, alias: str, dims: int) -> bool:
        snapshot = self._snapshots.get((alias, dims))
        return snapshot is not None and len(snapshot.item_ids) > 0

    def nbytes(self) -> int:
        return sum(snapshot.nbytes for snapshot in list(self._snapshots.values()))

    def clear(self) -> None:
        with self._lock:
            self._snapshots.clear()

    def lookup(self, alias: str, dims: int, ids: np.ndarray, versions: np.ndarray) -> Found:
        """The candidates `ids` (by place) held at exactly `versions`, and their vectors' rows."""
        snapshot = self._snapshots.get((alias, dims))
        if snapshot is None or not len(snapshot.item_ids) or not len(ids):
            none = np.zeros(0, dtype=np.int64)
            return Found(snapshot, np.zeros(len(ids), dtype=bool), none, none)
        at = np.minimum(np.searchsorted(snapshot.item_ids, ids), len(snapshot.item_ids) - 1)
        hit = (snapshot.item_ids[at] == ids) & (snapshot.versions[at] == versions)
        held = at[hit]
        counts = snapshot.counts[held]
        rows = _ranges(snapshot.starts[held], counts)
        places = np.repeat(np.flatnonzero(hit), counts)
        return Found(snapshot, hit, rows, places)

    def add(
        self, alias: str, dims: int, item_ids: np.ndarray, versions: np.ndarray, counts: np.ndarray, norms: np.ndarray, matrix: np.ndarray
    ) -> bool:
        """Keep the vectors of items (distinct ids, each at its version, `counts[i]` rows of `matrix`
        and `norms` in item order; 0 for an item without a vector of these dims). False when they
        do not fit in the budget on their own (nothing is kept then)."""
        rows = len(matrix)
        row_bytes = 4 * dims + 8
        wanted = rows * row_bytes + len(item_ids) * _ITEM_BYTES
        budget = self.budget()
        if wanted > budget or not len(item_ids):
            return False
        key = (alias, dims)
        with self._lock:
            snapshot = self._snapshots.get(key) or _empty(dims)
            # The items' earlier entries, if any, are replaced: their rows become unused.
            kept = ~np.isin(snapshot.item_ids, item_ids, assume_unique=True)
            old_ids, old_versions = snapshot.item_ids[kept], snapshot.versions[kept]
            old_starts, old_counts = snapshot.starts[kept], snapshot.counts[kept]
            others = sum(s.nbytes for k, s in self._snapshots.items() if k != key)
            items = len(old_ids) + len(item_ids)

            def fits(capacity: int) -> bool:
                return others + capacity * (4 * dims + 8) + items * _ITEM_BYTES <= budget

            matrix_all, norms_all, used = snapshot.matrix, snapshot.norms, snapshot.used
            if used + rows > len(matrix_all) or not fits(len(matrix_all)):
                live = int(old_counts.sum())
                capacity = live + rows + max((live + rows) // 4, 1024)  # room for the next few
                if not fits(capacity):
                    self._snapshots = {key: snapshot}  # the other dims go first
                    others = 0
                    capacity = min(capacity, (budget - items * _ITEM_BYTES) // row_bytes)
                if capacity < live + rows:
                    # Even without unused rows the items do not fit with the others: these alone.
                    old_ids, old_versions, old_starts, old_counts = (a[:0] for a in (old_ids, old_versions, old_starts, old_counts))
                    live, items = 0, len(item_ids)
                    capacity = min(rows + max(rows // 4, 1024), (budget - items * _ITEM_BYTES) // row_bytes)
                # New arrays: the rows in use first, in the order of their items, then room.
                source = _ranges(old_starts, old_counts)
                matrix_all = np.empty((capacity, dims), dtype="<f4")
                norms_all = np.empty(capacity)
                matrix_all[:live] = snapshot.matrix[source]
                norms_all[:live] = snapshot.norms[source]
                old_starts = np.cumsum(old_counts) - old_counts
                used = live
            matrix_all[used : used + rows] = matrix
            norms_all[used : used + rows] = norms
            ids_all = np.concatenate([old_ids, item_ids])
            order = np.argsort(ids_all, kind="stable")
            self._snapshots[key] = Snapshot(
                item_ids=ids_all[order],
                versions=np.concatenate([old_versions, versions])[order],
                starts=np.concatenate([old_starts, used + np.cumsum(counts) - counts])[order],
                counts=np.concatenate([old_counts, counts])[order],
                matrix=matrix_all,
                norms=norms_all,
                used=used + rows,
            )
            return True


cache = VectorCache()
