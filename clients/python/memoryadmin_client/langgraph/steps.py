"""What `MemoryAdminSaver` knows of a thread's messages on the server, and whether a step goes as a delta.

After each put (or read) of a root checkpoint the saver remembers the messages the server then
holds (`_Sent`: the very list sent, each message's content, the chain head the server answered);
the next step of that thread goes as a delta when `_kept` finds them still at its start
(docs/checkpoints.md, "Conversation"). A put's `_Plan` says how its step goes. The thread's
latest checkpoint as put or read (`_Latest`) answers the next read of it while the server says,
by a 304, that it is still the latest.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .codec import contents_of


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
