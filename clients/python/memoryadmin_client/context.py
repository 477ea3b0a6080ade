"""Build the messages a model receives: injected long-term memory, then recent history in a token budget.

Pure Python, no Django: an agent calls `build_context` before invoking its model,
and memoryadmin's context preview calls the same function, so what the preview
shows is what the model gets (docs/turns.md, "Context preview").

The rules, in order:

1. Memories whose `score` is below `min_score` are left out (a memory without a
   score, from a search without a query, is kept: there is nothing to judge it by).
2. The kept memories become one system message. If that message alone does not
   fit in the budget, it is replaced by a short notice (`MEMORY_NOTICE`) so
   that the history still gets room.
3. The thread's system message (the first message, when its role is system) is
   kept; if it does not fit what is left, it is cut with a marker.
4. The other messages are taken newest first while they fit; the first one that
   does not fit ends the walk (older messages never jump the queue).
5. If not even the newest message fits, it is cut to the room left, with a marker:
   a model always sees the last thing said.

Token counts are approximate and documented: `approx_tokens(text)` =
ceil(UTF-8 bytes / 4), plus MESSAGE_OVERHEAD per message for its role and
framing. No tokenizer model is downloaded; the count is a budget guide, close to
BPE tokenizers on English text and conservative on other scripts.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

MESSAGE_OVERHEAD = 4
TRUNCATION_MARKER = " […truncated]"
MEMORY_NOTICE = "Long-term memory omitted: it alone exceeds the token budget."
MEMORY_HEADER = "Relevant long-term memory:"
DEFAULT_MIN_SCORE = 0.25
ROLE_ALIASES = {"human": "user", "ai": "assistant"}


def approx_tokens(text: str) -> int:
    """ceil(UTF-8 bytes / 4): about one token per four bytes, as BPE tokenizers average on English."""
    return math.ceil(len(text.encode("utf-8")) / 4)


def message_text(content: Any) -> str:
    """A message's content as text: a string as is, content parts joined (text parts by their text)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, Mapping) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            else:
                parts.append(json.dumps(part, ensure_ascii=False, sort_keys=True, default=str))
        return "\n".join(parts)
    return json.dumps(content, ensure_ascii=False, sort_keys=True, default=str)


def memory_text(value: Any) -> str:
    """A store item's value as one line: its `text` (or `content`) field, else the JSON."""
    if isinstance(value, Mapping):
        for name in ("text", "content", "memory"):
            if isinstance(value.get(name), str):
                return value[name]
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


@dataclass
class ContextMessage:
    role: str
    content: str
    tokens: int
    source: str  # memory | notice | system | history
    truncated: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {
            "role": self.role, "content": self.content, "tokens": self.tokens,
            "source": self.source, "truncated": self.truncated,
        }


@dataclass
class BuiltContext:
    messages: list[ContextMessage]
    budget: int
    dropped: int = 0
    memories_used: int = 0
    memories_below_threshold: int = 0
    memory_omitted: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def total_tokens(self) -> int:
        return sum(message.tokens for message in self.messages)

    def as_dict(self) -> dict[str, Any]:
        return {
            "messages": [message.as_dict() for message in self.messages],
            "budget": self.budget,
            "total_tokens": self.total_tokens,
            "dropped": self.dropped,
            "memories_used": self.memories_used,
            "memories_below_threshold": self.memories_below_threshold,
            "memory_omitted": self.memory_omitted,
        }


Counter = Callable[[str], int]


def _cost(text: str, count: Counter) -> int:
    return count(text) + MESSAGE_OVERHEAD


def _cut(role: str, text: str, room: int, source: str, count: Counter) -> ContextMessage | None:
    """The message cut (with the marker) to at most `room` tokens; None when not even the marker fits."""
    if _cost(TRUNCATION_MARKER, count) > room:
        return None
    low, high = 0, len(text)
    # Binary search on characters: the counter is any monotone function of the text.
    while low < high:
        middle = (low + high + 1) // 2
        if _cost(text[:middle] + TRUNCATION_MARKER, count) <= room:
            low = middle
        else:
            high = middle - 1
    content = text[:low] + TRUNCATION_MARKER
    return ContextMessage(role, content, _cost(content, count), source, truncated=True)


def build_context(
    *,
    messages: Iterable[Mapping[str, Any]],
    budget: int,
    memories: Iterable[Mapping[str, Any]] = (),
    min_score: float | None = DEFAULT_MIN_SCORE,
    count_tokens: Counter = approx_tokens,
) -> BuiltContext:
    """The messages a model receives, in order, with their token counts (rules in the module docstring).

    `messages`: the thread's context ({"role", "content"} dicts, LangChain's human/ai
    accepted). `memories`: store search results ({"value", "score"?, "key"?}), best first.
    """
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise ValueError("budget must be a positive integer")
    result = BuiltContext(messages=[], budget=budget)
    room = budget

    kept = []
    for memory in memories:
        score = memory.get("score")
        if min_score is not None and score is not None and score < min_score:
            result.memories_below_threshold += 1
            continue
        kept.append(memory)
    if kept:
        text = "\n".join([MEMORY_HEADER] + [f"- {memory_text(m.get('value'))}" for m in kept])
        cost = _cost(text, count_tokens)
        if cost <= room:
            result.messages.append(ContextMessage("system", text, cost, "memory"))
            result.memories_used = len(kept)
        else:
            result.memory_omitted = True
            cost = _cost(MEMORY_NOTICE, count_tokens)
            if cost <= room:
                result.messages.append(ContextMessage("system", MEMORY_NOTICE, cost, "notice"))
            else:
                cost = 0
        room -= cost

    normalised = [
        (ROLE_ALIASES.get(str(m.get("role", "")), str(m.get("role", ""))), message_text(m.get("content")))
        for m in messages
    ]
    system = None
    if normalised and normalised[0][0] == "system":
        role, text = normalised.pop(0)
        cost = _cost(text, count_tokens)
        system = ContextMessage(role, text, cost, "system") if cost <= room else _cut(role, text, room, "system", count_tokens)
        if system is None:
            result.dropped += 1
        else:
            room -= system.tokens

    history: list[ContextMessage] = []
    for index in range(len(normalised) - 1, -1, -1):
        role, text = normalised[index]
        cost = _cost(text, count_tokens)
        if cost > room:
            if not history:
                cut = _cut(role, text, room, "history", count_tokens)
                if cut is not None:
                    history.append(cut)
                    room -= cut.tokens
                    index -= 1
            result.dropped += index + 1
            break
        history.append(ContextMessage(role, text, cost, "history"))
        room -= cost
    if system is not None:
        result.messages.append(system)
    result.messages.extend(reversed(history))
    return result
