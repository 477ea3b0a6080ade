"""`MemoryAdminSession`: AgentScope's `SessionBase` kept in memoryadmin, one session one thread.

    session = MemoryAdminSession("http://127.0.0.1:8000", api_key)
    await session.save_session_state("trip-42", agent=agent)
    await session.load_session_state("trip-42", agent=new_agent)

What goes where (rules A1–A5):

A1. The thread is `thread_id_for(session_id=, user_id=)`: the session id itself
    when it is a valid thread id and no `user_id` is given; `<user_id>:<session_id>`
    when that is valid and the user id holds no `:`; otherwise a readable,
    stable form — the id with every other character made `-`, cut to 40
    characters, then `-` and 16 hex digits of its SHA-256 — so that any
    AgentScope id maps to one thread and two ids never share one. Thread ids are
    global in memoryadmin: another user's thread is a 403, so choose ids unique
    across users (or pass `thread_id=` a function of your own).
A2. The context is the messages of one memory: the one named by
    `context_module` ("agent.memory"), else the first memory found walking the
    state modules in the order given (an agent's `memory` before its other
    modules) that keeps its messages in its state, as `InMemoryMemory`, the
    default of `ReActAgent`, does. Each message is mapped by `msg_to_message`
    (memoryadmin_client.agentscope.messages). Other memories stay whole in the
    extra state.
A3. The extra state is `{"agentscope": {"context_module": "agent.memory",
    "modules": {name: state_dict()}}}`: every state module's `state_dict()` as
    AgentScope makes it (the plan notebook, the toolkit's active groups, the
    agent's name and system prompt, the memory's compressed summary …), less
    the context memory's `content`, which is the thread's context.
A4. A save sends only what is new when it can: when the memory still starts with
    the context this session last loaded or saved, the new messages go by the
    append-only save, guarded by the chain head the session saw, so a turn costs
    the same at message 10 and at message 10 000. Otherwise (the session's first
    save of the thread, or the memory was cleared or shortened: a compaction) it
    sends the full context, and the server archives the old blocks, never
    deleting them, and stores the new context. An append that meets a moved
    head (another writer) is sent again as a full save: the agent's memory is
    what the thread must hold.
A5. A load calls each given module's `load_state_dict` with its saved state and
    the thread's context put back as the memory's `content`. A module the
    thread has no saved state for is skipped, except the memory of the context,
    which is loaded from the thread's messages even when another client wrote
    them. A thread that does not exist loads nothing with
    `allow_not_exist=True` and is a ValueError otherwise, as AgentScope's own
    sessions do. With `optimistic=True` a save is conditional on the thread
    being as this session last loaded or saved it (`If-Match`); otherwise
    `MemoryAdminPreconditionFailed` and nothing is written.

Refusals are the client's errors: another member's thread is
`MemoryAdminForbidden` (nothing is written), a bad thread id a ValueError
before anything is sent.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping
from typing import Any

from agentscope.memory import MemoryBase
from agentscope.module import StateModule
from agentscope.session import SessionBase

from ..agent_state import THREAD_ID_RE, AgentStateAPI, as_json
from ..errors import MemoryAdminPreconditionFailed
from ..http import RETRIES, HTTPClient, RetryPolicy
from .messages import message_to_msg, msg_as_state, msg_from_state, msg_to_message

EXTRA_KEY = "agentscope"
AGENT_CODE = "agentscope"
READABLE_CHARS = 40
DIGEST_CHARS = 16
NOT_IN_THREAD_ID = re.compile(r"[^A-Za-z0-9_.:@$-]")

Path = tuple[str, ...]


def thread_id_for(*, session_id: str, user_id: str = "") -> str:
    """The thread of an AgentScope session (rule A1)."""
    if not user_id and THREAD_ID_RE.match(session_id):
        return session_id
    joined = f"{user_id}:{session_id}" if user_id else session_id
    if user_id and ":" not in user_id and THREAD_ID_RE.match(joined):
        return joined
    # The digest is of the unambiguous pair, so "a:b" + "c" and "a" + "b:c" differ.
    digest = hashlib.sha256(f"{len(user_id)}:{user_id}:{session_id}".encode()).hexdigest()[:DIGEST_CHARS]
    readable = NOT_IN_THREAD_ID.sub("-", joined)[:READABLE_CHARS]
    return f"{readable}-{digest}"


def _holds_messages(module: Any) -> bool:
    """A memory whose messages are in its state: InMemoryMemory and its kind keep them in a `content` list."""
    return isinstance(module, MemoryBase) and isinstance(getattr(module, "content", None), list)


def _walk(module: Any, path: Path) -> Path | None:
    if _holds_messages(module):
        return path
    for key, child in getattr(module, "_module_dict", {}).items():
        found = _walk(child, (*path, key))
        if found:
            return found
    return None


def context_path(*, modules: Mapping[str, StateModule], context_module: str | None = None) -> Path | None:
    """Where the context memory is among `modules` (rule A2), as a path of attribute names; None if none."""
    if context_module:
        path = tuple(context_module.split("."))
        target: Any = modules.get(path[0])
        for key in path[1:]:
            target = getattr(target, key, None)
        if not _holds_messages(target):
            raise ValueError(f"context_module {context_module!r} is not a memory that keeps its messages")
        return path
    for name, module in modules.items():
        found = _walk(module, (name,))
        if found:
            return found
    return None


def _state_at(state: dict[str, Any], path: Path) -> dict[str, Any]:
    """The dict at `path` inside a state, each dict on the way copied so the caller's state is not changed."""
    node = state
    for key in path:
        child = dict(node.get(key) or {})
        node[key] = child
        node = child
    return node


class MemoryAdminSession(SessionBase):
    """AgentScope's session interface over memoryadmin's conversation state (rules A1–A5 above).

    `base_url` is the server, `api_key` a memoryadmin key. `agent_code` names the
    agent in the dashboard; `thread_id` maps (session_id, user_id) to a thread;
    `context_module` names the memory whose messages are the thread's context;
    `optimistic` makes saves conditional. `timeout`, `retries`, `headers`,
    `transport` and `async_transport` go to the client's HTTP layer.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        agent_code: str = AGENT_CODE,
        thread_id: Callable[..., str] = thread_id_for,
        context_module: str | None = None,
        optimistic: bool = False,
        timeout: float = 30.0,
        retries: int = RETRIES,
        headers: Mapping[str, str] | None = None,
        transport: Any = None,
        async_transport: Any = None,
    ) -> None:
        self.agent_code = agent_code
        self.thread_id_for = thread_id
        self.context_module = context_module
        self.optimistic = optimistic
        self.http = HTTPClient(
            base_url,
            api_key,
            timeout=timeout,
            retry=RetryPolicy(retries=retries),
            headers=headers,
            transport=transport,
            async_transport=async_transport,
        )
        self.api = AgentStateAPI(http=self.http)
        # The ETag of each thread as this session last loaded or saved it (for `optimistic`).
        self._etags: dict[str, str] = {}
        # The context of each thread as this session last loaded or saved it (as JSON): a
        # save that extends it sends only the new messages (rule A4).
        self._contexts: dict[str, list[Any]] = {}

    def thread_of(self, *, session_id: str, user_id: str = "") -> str:
        """The thread id a session is kept in."""
        return self.thread_id_for(session_id=session_id, user_id=user_id)

    def _split(self, modules: Mapping[str, StateModule]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """The context (the memory's messages, mapped) and the extra state of `modules` (rules A2, A3)."""
        path = context_path(modules=modules, context_module=self.context_module)
        states = {name: module.state_dict() for name, module in modules.items()}
        context: list[dict[str, Any]] = []
        if path is not None:
            memory = _state_at(states, path)
            for item in memory.pop("content", []):
                # InMemoryMemory keeps [message, marks] pairs; its older states, messages alone.
                msg_state, marks = item if isinstance(item, (list, tuple)) and len(item) == 2 else (item, [])
                context.append(msg_to_message(msg=msg_from_state(state=msg_state), marks=marks))
        extra = {EXTRA_KEY: {"context_module": ".".join(path) if path else None, "modules": states}}
        return context, extra

    async def save_session_state(self, session_id: str, user_id: str = "", **state_modules_mapping: StateModule) -> None:
        """Save the modules' state in the session's thread: the memory as its context, the rest as its extra state."""
        thread_id = self.thread_of(session_id=session_id, user_id=user_id)
        context, extra = self._split(state_modules_mapping)
        sent = as_json(value=context)
        if_match = self._etags.get(thread_id) if self.optimistic else None
        result = await self._append(thread_id=thread_id, sent=sent, extra=extra, if_match=if_match)
        if result is None:
            save = {"thread_id": thread_id, "agent_code": self.agent_code, "context": sent, "extra_state": extra}
            try:
                result = await self.api.asave(**save, if_match=if_match)
            except MemoryAdminPreconditionFailed:
                # The same save may have reached the server before a retry of it: then it is done.
                if await self._landed(thread_id=thread_id, sent=sent, extra=extra) is None:
                    raise
                return
        self._contexts[thread_id] = sent
        if result.etag:
            self._etags[thread_id] = result.etag

    async def _append(self, *, thread_id: str, sent: list[Any], extra: dict[str, Any], if_match: str | None) -> Any:
        """The save as an append of the new messages (rule A4), or None when it must be a full save."""
        previous = self._contexts.get(thread_id)
        known = self.api.known_head(thread_id=thread_id, agent_code=self.agent_code)
        if previous is None or known is None or known[1] != len(previous) or sent[: len(previous)] != previous:
            return None
        guard = {"if_match": if_match} if if_match else {"head": known[0]}
        try:
            return await self.api.aappend_only(
                thread_id=thread_id, agent_code=self.agent_code, messages=sent[len(previous):], extra_state=extra, **guard
            )
        except MemoryAdminPreconditionFailed:
            state = await self._landed(thread_id=thread_id, sent=sent, extra=extra)
            if state is not None:
                return state
            if if_match:
                raise
            return None

    async def _landed(self, *, thread_id: str, sent: list[Any], extra: dict[str, Any]) -> Any:
        """The thread's state if it already holds exactly this save (one that reached the server before
        its retry), else None."""
        state = await self.api.aload(thread_id=thread_id)
        if state is None or [state.context, state.extra_state] != [sent, as_json(value=extra)]:
            return None
        self._contexts[thread_id] = sent
        if state.etag:
            self._etags[thread_id] = state.etag
        return state

    async def load_session_state(
        self, session_id: str, user_id: str = "", allow_not_exist: bool = True, **state_modules_mapping: StateModule
    ) -> None:
        """Load the session's thread into the modules (rule A5)."""
        thread_id = self.thread_of(session_id=session_id, user_id=user_id)
        state = await self.api.aload(thread_id=thread_id)
        if state is None:
            if allow_not_exist:
                return
            raise ValueError(f"Failed to load session state: memoryadmin has no thread {thread_id!r}.")
        if state.etag:
            self._etags[thread_id] = state.etag
        if state.agent_code == self.agent_code:
            self._contexts[thread_id] = state.context
        saved = (state.extra_state or {}).get(EXTRA_KEY) if isinstance(state.extra_state, dict) else None
        saved = saved if isinstance(saved, dict) else {}
        modules_state = saved.get("modules") if isinstance(saved.get("modules"), dict) else {}
        if "context_module" in saved:
            named = saved["context_module"]
            path = tuple(named.split(".")) if isinstance(named, str) and named else None
        else:
            path = context_path(modules=state_modules_mapping, context_module=self.context_module)
        content = []
        for message in state.context:
            msg, marks = message_to_msg(message=message)
            content.append([msg_as_state(msg=msg), marks])
        for name, module in state_modules_mapping.items():
            holds_context = path is not None and path[0] == name
            if name in modules_state:
                module_state = dict(modules_state[name])
                if holds_context:
                    _state_at(module_state, path[1:])["content"] = content
                module.load_state_dict(module_state)
            elif holds_context:
                # No AgentScope state for this module (another client wrote the thread): only its memory.
                module_state: dict[str, Any] = {}
                _state_at(module_state, path[1:])["content"] = content
                module.load_state_dict(module_state, strict=False)

    async def close(self) -> None:
        """Close the connections (the running loop's async client and the sync one)."""
        await self.http.aclose()
        self.http.close()

    async def __aenter__(self) -> MemoryAdminSession:
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.close()


__all__ = ["EXTRA_KEY", "MemoryAdminSession", "context_path", "thread_id_for"]
