"""What `MemoryAdminSaver` knows of a thread's messages on the server, and whether a step goes as a delta.

After each put (or read) of a root checkpoint the saver remembers the messages the server then
holds (`_Sent`: the very list sent, each message's content, the chain head the server answered);
the next step of that thread goes as a delta when `_kept` finds them still at its start
(docs/checkpoints.md, "Conversation"). A put's `_Plan` says how its step goes. The thread's
latest checkpoint as put or read (`_Latest`) answers the next read of it while the server says,
by a 304, that it is still the latest. `ThreadMemory` keeps all three per thread, bounded, under
one lock (LangGraph calls one saver from many threads and event loops).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import BaseMessage

from .codec import contents_of

# Threads whose last put the saver remembers, to send the next step as a delta.
REMEMBERED_THREADS = 1024
# The latest checkpoints kept for a conditional read (`_Latest`): at most this many bytes of their
# channels and metadata on the wire in all, none over a quarter of it (the oldest go first).
LATEST_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class _Sent:
    """What the server holds of a thread's messages after the saver's last put there."""

    checkpoint_id: str
    channel: str
    messages: list[Any]  # a copy of the list sent
    contents: list[Any]  # each message's content then (`codec.contents_of`)
    head: str


@dataclass(frozen=True)
class _Latest:
    """A thread's latest checkpoint as the saver last put or read it, and the server's state tag
    for it: while the tag holds, a read of the latest checkpoint answers 304 and the saver
    gives this one back. `rest` and `metadata` are as on the wire (read back fresh each time),
    the checkpoint's messages channel apart (`sent`: the very message objects, their contents
    checked unchanged before the tag is sent; None when the checkpoint has no list there)."""

    thread_id: str
    checkpoint_id: str
    tag: str
    parent: str | None
    rest: dict[str, Any]
    metadata: Any
    sent: _Sent | None
    size: int = 0  # bytes of `rest` and `metadata` on the wire (what the saver's memory of them is bounded by)

    def intact(self) -> bool:
        """Whether its messages are still as they were put or read (none edited in place since)."""
        sent = self.sent
        try:
            return sent is None or contents_of(sent.messages) == sent.contents
        except Exception:  # a content whose comparison fails
            return False


@dataclass(frozen=True)
class _Plan:
    """How a put sends its step: `kept` messages held by the server (None: the step goes whole),
    and from which of its messages on they are encoded item by item (`start`; None: they are not,
    a serializer other than JSON's making the channel one blob)."""

    thread_id: str
    ns: str
    parent: str | None
    sent: _Sent | None
    channel: str
    messages: Any
    kept: int | None
    contents: list[Any]
    start: int | None


def conversation_channel(values: dict[str, Any]) -> str:
    """The channel the server keeps as a new thread's conversation, found as it finds it
    (docs/checkpoints.md, "Conversation"): `messages` when the checkpoint has it, else the first
    by name holding a non-empty list of LangChain messages (a state's `chat_history`, the
    functional API's `__previous__`). The server's answer names the channel it kept (it may be
    configured otherwise), and the thread's next steps use that one."""
    if "messages" in values:
        return "messages"
    for name in sorted(values):
        value = values[name]
        if type(value) is list and value and all(isinstance(item, BaseMessage) for item in value):
            return name
    return "messages"


def _kept(sent: _Sent | None, parent: str | None, messages: Any) -> tuple[int | None, list[Any]]:
    """How many messages the server already holds at the start of `messages`, when the step
    can go as a delta: its parent is the checkpoint last put, and the messages then sent are
    still the first ones, with the same content (None otherwise); and those messages' contents.
    The comparisons run in C, the list's own (an object is equal to itself at once), so a step
    costs Python's work only for the messages it adds, however long the conversation."""
    if sent is None or sent.checkpoint_id != parent or type(messages) is not list or len(messages) < len(sent.messages):
        return None, []
    count = len(sent.messages)
    try:
        if messages[:count] != sent.messages or contents_of(messages[:count]) != sent.contents:
            return None, []
    except Exception:  # an item whose comparison fails: the step goes whole
        return None, []
    return count, sent.contents


class ThreadMemory:
    """What the saver remembers of each thread, under one lock: the messages the server holds
    after the last put or read (`sent`), those of the put on its way (`putting`: its tasks'
    writes, which LangGraph sends while that put may still be travelling, refer to them too),
    and the latest checkpoint with its state tag (`latest`). At most `threads` threads of each
    (the least recently stored go first), and latest checkpoints of `latest_bytes` on the wire in
    all, none over a quarter of it."""

    def __init__(self, *, threads: int = REMEMBERED_THREADS, latest_bytes: int = LATEST_BYTES) -> None:
        self.threads = threads
        self.latest_bytes = latest_bytes
        self._sent: OrderedDict[str, _Sent] = OrderedDict()
        self._putting: OrderedDict[str, _Sent] = OrderedDict()
        self._latest: OrderedDict[str, _Latest] = OrderedDict()
        self._latest_size = 0
        self._lock = threading.Lock()

    def sent(self, thread_id: str) -> _Sent | None:
        """What the server holds of the thread's messages after the saver's last put or read there."""
        with self._lock:
            return self._sent.get(thread_id)

    def held(self, thread_id: str) -> list[_Sent]:
        """The checkpoints of that thread whose messages the server holds: last put or read, being put."""
        with self._lock:
            found = [self._sent.get(thread_id), self._putting.get(thread_id)]
        return [sent for sent in found if sent is not None and sent.messages]

    def keep_sent(self, thread_id: str, sent: _Sent) -> None:
        with self._lock:
            self._bounded(self._sent, thread_id, sent)

    def keep_putting(self, thread_id: str, sent: _Sent) -> None:
        with self._lock:
            self._bounded(self._putting, thread_id, sent)

    def latest(self, thread_id: str) -> _Latest | None:
        with self._lock:
            return self._latest.get(thread_id)

    def keep_latest(self, latest: _Latest) -> None:
        """Keep a thread's latest checkpoint (in place of its older one), within the bounds."""
        with self._lock:
            self._drop_latest(latest.thread_id)
            if latest.size > self.latest_bytes // 4:
                return
            self._latest[latest.thread_id] = latest
            self._latest_size += latest.size
            while len(self._latest) > self.threads or self._latest_size > self.latest_bytes:
                _, oldest = self._latest.popitem(last=False)
                self._latest_size -= oldest.size

    def forget(self, thread_id: str) -> None:
        """The thread's messages and latest checkpoint are no longer known (a failed put, a delete)."""
        with self._lock:
            self._sent.pop(thread_id, None)
            self._drop_latest(thread_id)

    def forget_latest(self, thread_id: str) -> None:
        """A task's writes: the latest checkpoint as held is no longer the whole answer (the server
        would not say unchanged, with writes stored; this saves asking)."""
        with self._lock:
            self._drop_latest(thread_id)

    def latest_threads(self) -> list[str]:
        """The threads whose latest checkpoint is kept, the oldest first."""
        with self._lock:
            return list(self._latest)

    def latest_size(self) -> int:
        """Bytes on the wire of the latest checkpoints kept."""
        with self._lock:
            return self._latest_size

    def _bounded(self, memory: OrderedDict[str, _Sent], thread_id: str, sent: _Sent) -> None:
        memory.pop(thread_id, None)
        memory[thread_id] = sent
        while len(memory) > self.threads:
            memory.popitem(last=False)

    def _drop_latest(self, thread_id: str) -> None:
        dropped = self._latest.pop(thread_id, None)
        if dropped is not None:
            self._latest_size -= dropped.size
