"""A thread's conversation state over the API: the calls the AgentScope and LangChain adapters share.

    GET  /threads/{id}/agent-state   the active context, extra_state and the thread's ETag (None: no such thread)
    PUT  /threads/{id}/agent-state   the full context: the server appends, rewrites (archiving) or does nothing
    POST /threads                    {"thread_id", "if_exists": "do_nothing"}: the thread made empty, race-free

Rules kept here (the server's are docs/api.md, "Conversation state"):

- A thread id is 1 to 64 characters of `A-Z a-z 0-9 _ . : @ $ -`, and not
  `search`; `thread_id_validate` refuses anything else before a request is sent.
- A save sends the whole context. When it extends what is stored the server
  writes only the new tail (or nothing, for a repeat), so a retried save is
  harmless; when it is shorter or differs, the stored blocks are archived, never
  deleted, and the context is written anew.
- `append` adds messages without ever losing one to a concurrent writer: it
  reads the context with its ETag, saves context + new with `If-Match`, and on
  412 reads again and retries. A thread that does not exist yet is first made
  empty with `POST /threads` (`if_exists: do_nothing`), so two first writers
  cannot overwrite each other either.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx

from .errors import MemoryAdminPreconditionFailed
from .http import Call, HTTPClient, encode_json

THREAD_ID_RE = re.compile(r"^(?!search$)[A-Za-z0-9_.:@$-]{1,64}$")
THREAD_ID_RULE = 'a thread id is 1 to 64 characters of A-Z a-z 0-9 _ . : @ $ -, and not "search"'
# How many times `append` reads and saves again after a 412 before it gives up.
APPEND_ATTEMPTS = 10
# `extra_state` left out of a save: the server keeps the stored one.
KEEP = object()


def thread_id_validate(*, thread_id: Any) -> str:
    """The thread id, if the server would take it; a ValueError naming the rule otherwise."""
    if not isinstance(thread_id, str) or not THREAD_ID_RE.match(thread_id):
        raise ValueError(f"{THREAD_ID_RULE}: {thread_id!r}")
    return thread_id


def thread_path(*, thread_id: str) -> str:
    # Every character a thread id may hold is allowed in a path segment; quoting stays for safety.
    return f"/threads/{quote(thread_id, safe=':@$-._')}"


def state_path(*, thread_id: str) -> str:
    return f"{thread_path(thread_id=thread_id)}/agent-state"


def as_json(*, value: Any) -> Any:
    """`value` as the server hands it back: what JSON makes of it (tuples become lists, and so on)."""
    return json.loads(encode_json(body=value))


@dataclass(frozen=True, kw_only=True)
class AgentState:
    """What `GET /threads/{id}/agent-state` answers, with the thread's ETag."""

    thread_id: str
    agent_code: str
    context: list[dict[str, Any]]
    extra_state: dict[str, Any] | None
    etag: str | None


@dataclass(frozen=True, kw_only=True)
class SaveResult:
    """What a save did: `mode` is append, rewrite or noop; `etag` is the thread's new ETag."""

    thread_id: str
    mode: str
    appended: int
    archived: int
    active: int
    etag: str | None


def load_call(*, thread_id: str) -> Call:
    return Call("GET", state_path(thread_id=thread_id_validate(thread_id=thread_id)), tolerate=(404,))


def state_from(*, response: httpx.Response | None) -> AgentState | None:
    """The state in a load's answer; None when the thread does not exist (a 404)."""
    if response is None:
        return None
    body = response.json()
    return AgentState(
        thread_id=body["thread_id"],
        agent_code=body.get("agent_code") or "",
        context=list(body.get("context") or []),
        extra_state=body.get("extra_state"),
        etag=response.headers.get("ETag"),
    )


def save_call(
    *,
    thread_id: str,
    agent_code: str,
    context: Sequence[dict[str, Any]],
    extra_state: Any = KEEP,
    if_match: str | None = None,
    tolerate: tuple[int, ...] = (),
) -> Call:
    """The PUT of a full context; `extra_state` is overwritten unless KEEP, `if_match` makes it conditional."""
    body: dict[str, Any] = {"agent_code": agent_code, "context": list(context)}
    if extra_state is not KEEP:
        body["extra_state"] = extra_state
    return Call(
        "PUT",
        state_path(thread_id=thread_id_validate(thread_id=thread_id)),
        body=body,
        tolerate=tolerate,
        headers={"If-Match": if_match} if if_match else None,
    )


def saved_from(*, response: httpx.Response) -> SaveResult:
    body = response.json()
    return SaveResult(
        thread_id=body["thread_id"],
        mode=body["mode"],
        appended=body["appended"],
        archived=body["archived"],
        active=body["active"],
        etag=response.headers.get("ETag"),
    )


def create_call(*, thread_id: str) -> Call:
    """`POST /threads` that makes the thread empty for the caller, or leaves an existing one (403: another's)."""
    return Call("POST", "/threads", body={"thread_id": thread_id_validate(thread_id=thread_id), "if_exists": "do_nothing"})


def landed(*, state: AgentState | None, context: Sequence[dict[str, Any]]) -> bool:
    """Whether a save of `context` is already in the thread (what it holds starts with it).

    After a 412 this tells a save that reached the server before a retry of it
    (a dropped answer, a 503 retried) from one that lost to another writer.
    """
    if state is None or not context:
        return False
    sent = as_json(value=list(context))
    return state.context[: len(sent)] == sent


class AgentStateAPI:
    """Load, save and append a thread's conversation state through one `HTTPClient` (sync and async)."""

    def __init__(self, *, http: HTTPClient, attempts: int = APPEND_ATTEMPTS) -> None:
        self.http = http
        self.attempts = attempts

    def load(self, *, thread_id: str) -> AgentState | None:
        """The thread's state, or None when it does not exist; 403 (another member's) is raised."""
        return state_from(response=self.http.send(load_call(thread_id=thread_id)))

    async def aload(self, *, thread_id: str) -> AgentState | None:
        return state_from(response=await self.http.asend(load_call(thread_id=thread_id)))

    def save(self, **save: Any) -> SaveResult:
        """One PUT (`save_call`'s arguments); a 412 is raised as `MemoryAdminPreconditionFailed`."""
        return saved_from(response=self.http.send(save_call(**save)))

    async def asave(self, **save: Any) -> SaveResult:
        return saved_from(response=await self.http.asend(save_call(**save)))

    def create(self, *, thread_id: str) -> None:
        self.http.send(create_call(thread_id=thread_id))

    async def acreate(self, *, thread_id: str) -> None:
        await self.http.asend(create_call(thread_id=thread_id))

    def append(self, *, thread_id: str, agent_code: str, messages: Sequence[dict[str, Any]]) -> SaveResult | None:
        """Add `messages` after the thread's context, losing nothing to concurrent writers (module docstring).

        Returns the save, or None when a save that reached the server before its
        retry was found already there. Gives up after `attempts` 412s in a row.
        """
        failure: MemoryAdminPreconditionFailed | None = None
        for _ in range(self.attempts):
            state = self.load(thread_id=thread_id)
            if state is None:
                self.create(thread_id=thread_id)
                state = self.load(thread_id=thread_id)
            context = [*state.context, *messages] if state else list(messages)
            try:
                return self.save(
                    thread_id=thread_id, agent_code=agent_code, context=context, if_match=state.etag if state else None
                )
            except MemoryAdminPreconditionFailed as refused:
                failure = refused
                if landed(state=self.load(thread_id=thread_id), context=context):
                    return None
        assert failure is not None
        raise failure

    async def aappend(self, *, thread_id: str, agent_code: str, messages: Sequence[dict[str, Any]]) -> SaveResult | None:
        failure: MemoryAdminPreconditionFailed | None = None
        for _ in range(self.attempts):
            state = await self.aload(thread_id=thread_id)
            if state is None:
                await self.acreate(thread_id=thread_id)
                state = await self.aload(thread_id=thread_id)
            context = [*state.context, *messages] if state else list(messages)
            try:
                return await self.asave(
                    thread_id=thread_id, agent_code=agent_code, context=context, if_match=state.etag if state else None
                )
            except MemoryAdminPreconditionFailed as refused:
                failure = refused
                if landed(state=await self.aload(thread_id=thread_id), context=context):
                    return None
        assert failure is not None
        raise failure


__all__ = [
    "APPEND_ATTEMPTS",
    "AgentState",
    "AgentStateAPI",
    "KEEP",
    "SaveResult",
    "THREAD_ID_RE",
    "thread_id_validate",
    "thread_path",
]
