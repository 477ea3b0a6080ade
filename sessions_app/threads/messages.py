"""Messages as agents post them: validation, canonical form and the hash chain.

Pure functions, no database: the services call them before they open a transaction.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from memoryadmin.json import canonical as json_canonical
from memoryadmin.jsoncheck import (
    DOCUMENT_DEPTH_MAX,
    document_bytes_max,
    json_size,
    json_storage_problem,
)

ROLE_ALIASES = {
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "ai": "assistant",
    "system": "system",
    "tool": "tool",
}
SUMMARY_NAMES = {"__compaction_summary__", "compaction_summary"}
BLOCK_TYPE_MAX = 32


@dataclass(frozen=True)
class ParsedMessage:
    role: str
    content: str
    block_type: str
    message: dict[str, Any]


def content_text(content: Any) -> str:
    """The displayable text of a message's content (a string or a list of parts)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for part in content:
        if isinstance(part, str):
            parts.append(part)
        elif isinstance(part, dict):
            text = part.get("text")
            if isinstance(text, str):
                parts.append(text)
    return "\n".join(parts)


def _own_fields(message: dict[str, Any]) -> dict[str, Any]:
    """A message's own fields: as posted, or inside LangChain's serialised envelope
    (`{"lc": 1, "type": "constructor", "kwargs": {...}}`), as a LangGraph thread's blocks hold them."""
    kwargs = message.get("kwargs")
    if message.get("lc") in (1, 2) and message.get("type") == "constructor" and isinstance(kwargs, dict):
        return kwargs
    return message


def _block_type(role: str, message: dict[str, Any]) -> str:
    explicit = message.get("block_type")
    if isinstance(explicit, str) and explicit.strip():
        return explicit.strip()[:BLOCK_TYPE_MAX]
    fields = _own_fields(message)
    name = fields.get("name")
    if isinstance(name, str) and name in SUMMARY_NAMES:  # (a name of any other JSON type is kept as posted)
        return "summary"
    if role == "assistant" and fields.get("tool_calls"):
        return "tool_call"
    if role == "tool":
        return "tool_result"
    return "message"


def parse_message(message: Any, where: str) -> tuple[ParsedMessage | None, dict[str, list[str]]]:
    """Validate one posted message; return it parsed, or the field errors naming `where`."""
    if not isinstance(message, dict):
        return None, {where: ["must be a JSON object with at least 'role' and 'content'."]}
    errors: dict[str, list[str]] = {}
    role = message.get("role")
    if role is None:
        errors[f"{where}.role"] = ["is required."]
    elif not isinstance(role, str) or role not in ROLE_ALIASES:
        errors[f"{where}.role"] = [
            f"unknown role {str(role)[:40]!r}; expected one of user, assistant, system, tool (or human, ai)."
        ]
    content = message.get("content")
    if "content" not in message and not message.get("tool_calls"):
        errors[f"{where}.content"] = ["is required (a string or a list of content parts)."]
    elif content is not None and not isinstance(content, str | list):
        errors[f"{where}.content"] = ["must be a string or a list of content parts."]
    elif isinstance(content, list) and not all(isinstance(part, str | dict) for part in content):
        errors[f"{where}.content"] = ["content parts must be strings or objects."]
    if "block_type" in message and not isinstance(message["block_type"], str):
        errors[f"{where}.block_type"] = ["must be a string."]
    problem = json_storage_problem(message, depth_max=DOCUMENT_DEPTH_MAX)
    if problem:
        errors[where] = [f"{problem}."]
    elif json_size(message) > document_bytes_max():
        errors[where] = [f"is larger than {document_bytes_max()} bytes of JSON."]
    if errors:
        return None, errors
    normalized = ROLE_ALIASES[role]
    return (
        ParsedMessage(
            role=normalized,
            content=content_text(content),
            block_type=_block_type(normalized, message),
            message=message,
        ),
        {},
    )


def canonical(value: Any) -> bytes:
    """Canonical JSON: sorted keys, no spaces, UTF-8, integers exact, -0.0 as 0.0 (the form
    every database gives back). Raises TypeError on what JSON cannot hold."""
    return json_canonical(value)


def chain_next(previous: str, message_bytes: bytes) -> str:
    """The chain digest after one more message: SHA-256 of the previous digest (32 bytes,
    none before the first message) followed by the message's canonical JSON."""
    return hashlib.sha256(bytes.fromhex(previous) + message_bytes).hexdigest()


def chain_continue(head: str, messages: list[dict[str, Any]]) -> list[str]:
    """The chain digests of `messages` appended after a context whose digest is `head`
    ("" for an empty context): the work of an append depends on the new messages only.
    Raises TypeError on what JSON cannot hold."""
    sha256 = hashlib.sha256
    state = bytes.fromhex(head)
    digests: list[str] = []
    for message in messages:
        step = sha256(state + canonical(message))
        state = step.digest()
        digests.append(step.hexdigest())
    return digests


class ContextHasher:
    """The hash chain of a context.

    The digest after message i is SHA-256(digest after message i-1 ‖ canonical JSON of
    message i) (nothing before the first message), so it commits to messages 0..i and
    it can be continued from the stored digest alone: an append hashes the new messages
    only (`chain_continue`). Checking that a posted context still starts with what is
    stored hashes the posted prefix, one canonical serialisation and one SHA-256 per
    message, and reads nothing from the database.
    """

    def __init__(self, context: list[dict[str, Any]]):
        self.context = context
        self._digest_at = 0
        self._digest = b""

    def _state(self, k: int) -> bytes:
        # The digest after the first k messages, continuing from the furthest computed
        # (a save asks for the stored prefix first and the digests after it next).
        if k < self._digest_at:
            self._digest_at, self._digest = 0, b""
        sha256 = hashlib.sha256
        state = self._digest
        for index in range(self._digest_at, k):
            state = sha256(state + canonical(self.context[index])).digest()
        self._digest_at, self._digest = k, state
        return state

    def prefix_digest(self, k: int) -> str:
        return self._state(k).hex()

    def digests_from(self, start: int) -> list[str]:
        """The chain digests for messages start..end, continuing from the prefix."""
        return chain_continue(self._state(start).hex(), self.context[start:])
