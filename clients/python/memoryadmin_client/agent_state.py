"""A thread's conversation state over the API: the calls the AgentScope and LangChain adapters share.

    GET  /threads/{id}/agent-state          the active context, extra_state, its chain head and the thread's ETag
                                            (None: no such thread)
    PUT  /threads/{id}/agent-state          the full context: the server appends, rewrites (archiving) or does nothing
    POST /threads/{id}/agent-state/append   only the new messages, after the chain head the client last saw

Rules kept here (the server's are docs/api.md, "Conversation state"):

- A thread id is 1 to 64 characters of `A-Z a-z 0-9 _ . : @ $ -`, and not
  `search`, `.` or `..` (`ids.THREAD_ID_RE`); `thread_id_validate` refuses anything else
  before a request is sent.
- A save sends the whole context. When it extends what is stored the server
  writes only the new tail (or nothing, for a repeat), so a retried save is
  harmless; when it is shorter or differs, the stored blocks are archived, never
  deleted, and the context is written anew.
- `append` adds messages without ever losing one to a concurrent writer, and
  sends only them: the append-only save, guarded by the chain head this client
  last saw of the thread (`If-None-Match: *` for a thread it has never seen). A
  412 means the thread moved: it reads the state again (which also tells an
  append that reached the server before a retry of it from one that lost to
  another writer) and appends after the new head. Every request stays safe to
  retry, as the HTTP layer does.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx

from .errors import MemoryAdminPreconditionFailed
from .http import Call, HTTPClient, encode_json
from .ids import THREAD_ID_RE, THREAD_ID_RULE

# How many times `append` reads and saves again after a 412 before it gives up.
APPEND_ATTEMPTS = 10
# `extra_state` left out of a save: the server keeps the stored one.
KEEP = object()


def thread_id_validate(*, thread_id: Any) -> str:
    """The thread id, if the server would take it; a ValueError naming the rule otherwise."""
    if not isinstance(thread_id, str) or not THREAD_ID_RE.match(thread_id):
        raise ValueError(f"a thread id is {THREAD_ID_RULE}: {thread_id!r}")
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
    # The chain digest of the last active message ("" for none): what an append continues from.
    head: str = ""


@dataclass(frozen=True, kw_only=True)
class SaveResult:
    """What a save did: `mode` is append, rewrite or noop; `etag` is the thread's new ETag, `head` its chain head."""

    thread_id: str
    mode: str
    appended: int
    archived: int
    active: int
    etag: str | None
    head: str = ""


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
        head=body.get("head") or "",
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
        head=body.get("head") or "",
    )


def append_call(
    *,
    thread_id: str,
    agent_code: str,
    messages: Sequence[dict[str, Any]],
    extra_state: Any = KEEP,
    head: str | None = None,
    if_match: str | None = None,
    new_thread: bool = False,
) -> Call:
    """The POST of new messages only: after the chain `head`, at the ETag `if_match`, or into a `new_thread`.

    Without one of the three guards a retried request could append twice, so one is required.
    """
    if head is None and not if_match and not new_thread:
        raise ValueError("an append needs a guard: the chain head, an ETag, or new_thread=True")
    body: dict[str, Any] = {"agent_code": agent_code, "messages": list(messages)}
    if extra_state is not KEEP:
        body["extra_state"] = extra_state
    if head is not None:
        body["head"] = head
    headers = {"If-Match": if_match} if if_match else {}
    if new_thread:
        headers["If-None-Match"] = "*"
    return Call("POST", f"{state_path(thread_id=thread_id_validate(thread_id=thread_id))}/append", body=body, headers=headers or None)


def appended_after(*, state: AgentState | None, count: int, messages: Sequence[dict[str, Any]]) -> bool:
    """Whether `messages` are what the context holds after its first `count` messages, and nothing more:
    an append that reached the server before a retry of it (the retry then met a moved head)."""
    if state is None:
        return False
    sent = as_json(value=list(messages))
    return len(state.context) == count + len(sent) and state.context[count:] == sent


class AgentStateAPI:
    """Load, save and append a thread's conversation state through one `HTTPClient` (sync and async).

    It remembers, per thread, the chain head and the context's length as it last saw
    them (a load or a save of this agent), so an append costs one request.
    """

    def __init__(self, *, http: HTTPClient, attempts: int = APPEND_ATTEMPTS) -> None:
        self.http = http
        self.attempts = attempts
        self._heads: dict[tuple[str, str], tuple[str, int]] = {}

    def _seen(self, *, thread_id: str, agent_code: str, head: str, count: int) -> None:
        self._heads[(thread_id, agent_code)] = (head, count)

    def _loaded(self, state: AgentState | None) -> AgentState | None:
        if state is not None:
            self._seen(thread_id=state.thread_id, agent_code=state.agent_code, head=state.head, count=len(state.context))
        return state

    def _saved(self, result: SaveResult, *, agent_code: str) -> SaveResult:
        self._seen(thread_id=result.thread_id, agent_code=agent_code, head=result.head, count=result.active)
        return result

    def known_head(self, *, thread_id: str, agent_code: str) -> tuple[str, int] | None:
        """(chain head, context length) of the agent's context as last seen, or None."""
        return self._heads.get((thread_id, agent_code))

    def load(self, *, thread_id: str) -> AgentState | None:
        """The thread's state, or None when it does not exist; 403 (another member's) is raised."""
        return self._loaded(state_from(response=self.http.send(load_call(thread_id=thread_id))))

    async def aload(self, *, thread_id: str) -> AgentState | None:
        return self._loaded(state_from(response=await self.http.asend(load_call(thread_id=thread_id))))

    def save(self, **save: Any) -> SaveResult:
        """One PUT (`save_call`'s arguments); a 412 is raised as `MemoryAdminPreconditionFailed`."""
        return self._saved(saved_from(response=self.http.send(save_call(**save))), agent_code=save["agent_code"])

    async def asave(self, **save: Any) -> SaveResult:
        return self._saved(saved_from(response=await self.http.asend(save_call(**save))), agent_code=save["agent_code"])

    def append_only(self, **call: Any) -> SaveResult:
        """One POST of new messages (`append_call`'s arguments); a 412 is raised as `MemoryAdminPreconditionFailed`."""
        return self._saved(saved_from(response=self.http.send(append_call(**call))), agent_code=call["agent_code"])

    async def aappend_only(self, **call: Any) -> SaveResult:
        return self._saved(saved_from(response=await self.http.asend(append_call(**call))), agent_code=call["agent_code"])

    def _guard(self, *, thread_id: str, agent_code: str, state: AgentState | None) -> dict[str, Any]:
        known = self.known_head(thread_id=thread_id, agent_code=agent_code)
        if known is not None:
            return {"head": known[0]}
        if state is not None:
            # The thread's current agent is another: its ETag guards the append instead.
            return {"if_match": state.etag} if state.etag else {"head": ""}
        return {"new_thread": True}

    def append(self, *, thread_id: str, agent_code: str, messages: Sequence[dict[str, Any]]) -> SaveResult | None:
        """Add `messages` after the thread's context, sending only them and losing nothing to concurrent
        writers (module docstring). Returns the save, or None when an append that reached the server before
        its retry was found already there. Gives up after `attempts` 412s in a row."""
        failure: MemoryAdminPreconditionFailed | None = None
        state: AgentState | None = None
        for _ in range(self.attempts):
            known = self.known_head(thread_id=thread_id, agent_code=agent_code)
            guard = self._guard(thread_id=thread_id, agent_code=agent_code, state=state)
            try:
                return self.append_only(thread_id=thread_id, agent_code=agent_code, messages=messages, **guard)
            except MemoryAdminPreconditionFailed as refused:
                failure = refused
                state = self.load(thread_id=thread_id)
                if guard.get("if_match") is None and appended_after(
                    state=state, count=known[1] if known else 0, messages=messages
                ):
                    return None
        assert failure is not None
        raise failure

    async def aappend(self, *, thread_id: str, agent_code: str, messages: Sequence[dict[str, Any]]) -> SaveResult | None:
        failure: MemoryAdminPreconditionFailed | None = None
        state: AgentState | None = None
        for _ in range(self.attempts):
            known = self.known_head(thread_id=thread_id, agent_code=agent_code)
            guard = self._guard(thread_id=thread_id, agent_code=agent_code, state=state)
            try:
                return await self.aappend_only(thread_id=thread_id, agent_code=agent_code, messages=messages, **guard)
            except MemoryAdminPreconditionFailed as refused:
                failure = refused
                state = await self.aload(thread_id=thread_id)
                if guard.get("if_match") is None and appended_after(
                    state=state, count=known[1] if known else 0, messages=messages
                ):
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
