"""`MemoryAdminChatMessageHistory`: LangChain's `BaseChatMessageHistory` kept in a memoryadmin thread.

    history = MemoryAdminChatMessageHistory("http://127.0.0.1:8000", api_key, "support-42")
    history.add_messages([HumanMessage("hi"), AIMessage("hello")])
    history.messages          # [HumanMessage("hi"), AIMessage("hello")]
    history.clear()           # archived, never deleted

The rules (H1–H4):

H1. A history is one thread: `messages` / `aget_messages` read the thread's
    active context (`GET /threads/{id}/agent-state`), each message mapped by
    `message_from_memoryadmin`; a thread that does not exist is an empty
    history. Another member's thread is `MemoryAdminForbidden`.
H2. `add_messages` / `aadd_messages` append without losing a message to another
    writer: they read the context with its ETag and save context + new with
    `If-Match`; on 412 they read again and retry (10 attempts, then
    `MemoryAdminPreconditionFailed`). A new thread is first made empty with
    `POST /threads`, so two first writers cannot overwrite each other either.
    The server stores only the new tail.
H3. `clear` / `aclear` archive the history: the owner's key saves an empty
    context, which the server's rewrite rule turns into "every block archived,
    none deleted"; on another user's thread an admin's key uses the admin clear
    (`POST /threads/{id}/clear`, which also drops the thread's extra state). A
    thread that does not exist is left alone.
H4. A thread holds one agent's conversation: the history saves as `agent_code`
    ("langchain" unless given) and reads whichever agent's context the thread
    holds, so give the histories of one thread one agent code.

Histories are cheap: pass `client=` one `HTTPClient` to share its connections
between the many a `RunnableWithMessageHistory` makes (one per call); a history
that made its own client closes it with `close()`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..agent_state import APPEND_ATTEMPTS, AgentStateAPI, save_call, thread_id_validate, thread_path
from ..errors import MemoryAdminForbidden
from ..http import RETRIES, Call, HTTPClient, RetryPolicy
from .messages import message_from_memoryadmin, message_to_memoryadmin

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import BaseMessage

AGENT_CODE = "langchain"


class MemoryAdminChatMessageHistory(BaseChatMessageHistory):
    """A LangChain chat history in memoryadmin's thread `thread_id` (rules H1–H4 above).

    `base_url` is the server, `api_key` a memoryadmin key; `agent_code` names
    the agent in the dashboard; `client` shares an `HTTPClient` (then `timeout`,
    `retries`, `headers`, `transport` and `async_transport` are its own).
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        thread_id: str,
        *,
        agent_code: str = AGENT_CODE,
        client: HTTPClient | None = None,
        attempts: int = APPEND_ATTEMPTS,
        timeout: float = 30.0,
        retries: int = RETRIES,
        headers: Mapping[str, str] | None = None,
        transport: Any = None,
        async_transport: Any = None,
    ) -> None:
        super().__init__()
        self.thread_id = thread_id_validate(thread_id=thread_id)
        self.agent_code = agent_code
        self._owns_client = client is None
        self.http = client or HTTPClient(
            base_url,
            api_key,
            timeout=timeout,
            retry=RetryPolicy(retries=retries),
            headers=headers,
            transport=transport,
            async_transport=async_transport,
        )
        self.api = AgentStateAPI(http=self.http, attempts=attempts)

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """The thread's messages, oldest first (rule H1)."""
        state = self.api.load(thread_id=self.thread_id)
        return [message_from_memoryadmin(message=m) for m in state.context] if state else []

    async def aget_messages(self) -> list[BaseMessage]:
        state = await self.api.aload(thread_id=self.thread_id)
        return [message_from_memoryadmin(message=m) for m in state.context] if state else []

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Append `messages` to the thread, conditional on its ETag and retried on 412 (rule H2)."""
        posted = [message_to_memoryadmin(message=m) for m in messages]
        if posted:
            self.api.append(thread_id=self.thread_id, agent_code=self.agent_code, messages=posted)

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        posted = [message_to_memoryadmin(message=m) for m in messages]
        if posted:
            await self.api.aappend(thread_id=self.thread_id, agent_code=self.agent_code, messages=posted)

    def _clear_call(self) -> Call:
        # If-Match: * saves only into a thread that exists (412 otherwise): clearing never creates one.
        return save_call(thread_id=self.thread_id, agent_code=self.agent_code, context=[], if_match="*", tolerate=(412,))

    def _admin_clear_call(self) -> Call:
        return Call("POST", f"{thread_path(thread_id=self.thread_id)}/clear", body={})

    def clear(self) -> None:
        """Archive every message of the history (rule H3)."""
        try:
            self.http.send(self._clear_call())
        except MemoryAdminForbidden as refused:
            try:
                self.http.send(self._admin_clear_call())
            except MemoryAdminForbidden:
                raise refused from None

    async def aclear(self) -> None:
        try:
            await self.http.asend(self._clear_call())
        except MemoryAdminForbidden as refused:
            try:
                await self.http.asend(self._admin_clear_call())
            except MemoryAdminForbidden:
                raise refused from None

    def close(self) -> None:
        """Close the sync connections of a client this history made (a shared `client=` stays open)."""
        if self._owns_client:
            self.http.close()

    async def aclose(self) -> None:
        if self._owns_client:
            await self.http.aclose()


__all__ = ["AGENT_CODE", "MemoryAdminChatMessageHistory"]
