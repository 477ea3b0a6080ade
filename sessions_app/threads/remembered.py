"""Thread rows as this process's last write left them: a prediction that spares a read.

An agent's next save or checkpoint put reads its thread's row first (the guarded columns and
the chain head) and then runs one statement guarded by exactly those columns
(`services.guarded_append`, `sessions_app.checkpoints.fastpath`). When the same server
process made the thread's previous write, it knows what that write left in the row, and the
read can be skipped: the guard still decides, so a row that moved since (another process,
another path, a clear) makes the statement write nothing, and the write is made again from
the row as read. What is remembered is never a decision, only what to try first.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any

from django.db import connection


class Remembered:
    """The last row of each of up to `size` threads (least recently used forgotten first)."""

    def __init__(self, size: int = 10_000) -> None:
        self.size = size
        self._rows: OrderedDict[tuple, Any] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def key(actor, thread_id: str, *more: Any) -> tuple:
        return (connection.alias, connection.settings_dict.get("NAME"), actor.pk, thread_id, *more)

    def get(self, key: tuple) -> Any:
        with self._lock:
            row = self._rows.get(key)
            if row is not None:
                self._rows.move_to_end(key)
            return row

    def put(self, key: tuple, row: Any) -> None:
        with self._lock:
            if row is None:
                self._rows.pop(key, None)
                return
            self._rows[key] = row
            self._rows.move_to_end(key)
            while len(self._rows) > self.size:
                self._rows.popitem(last=False)

    def rows(self, key: tuple, read: Callable[[], Any]) -> Iterator[Any]:
        """The remembered row, then (if the caller asks for another) the row as `read` gives it;
        a row remembered and not used is forgotten. Nothing when there is no row."""
        row = self.get(key)
        if row is not None:
            yield row
            self.put(key, None)
        row = read()
        if row is not None:
            yield row


# The conversation store's saves: HEAD_SQL's row for (thread, agent).
saves = Remembered()
