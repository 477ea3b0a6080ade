"""`MemoryAdminSaver`: a LangGraph checkpointer kept in memoryadmin, over its HTTP API.

    from memoryadmin_client.langgraph import MemoryAdminSaver

    saver = MemoryAdminSaver("http://127.0.0.1:8000", api_key)
    graph = builder.compile(checkpointer=saver)
    graph.invoke(inputs, {"configurable": {"thread_id": "t-1"}})

Every checkpointer method is one or a few requests to the checkpoint endpoints
(docs/checkpoints.md), sent through the client's one HTTP layer
(`memoryadmin_client.http`): one pooled connection for the sync methods, one
per event loop for the async ones, and its retry policy (503, 429 after its
`Retry-After`, dropped connections), which is safe here because every request
is idempotent: a put is an upsert by checkpoint id, a write an upsert by task
and index, deletes and reads are repeatable.

State is stored readable: channel values travel as JSON where they round-trip
and as typed blobs otherwise (`codec.ValueCodec`).

Steps travel as deltas. The server keeps a thread's messages channel (root namespace)
as the thread's conversation and answers each put with the chain head of those
messages. The next put of that thread, when its parent is the checkpoint last put and
its messages start with the message objects then sent (compared in C), carries only the messages
added since, with that head (`{"messages": {"channel", "head", "append"}}`; the channel
is `messages` or the one the server answered it keeps, `steps.conversation_channel`); the server refuses
it with a 412, writing nothing, when its head is another (a fork, another writer), and
the saver then sends the step whole. In the async methods a step is encoded on the event
loop in turns of its passes (`turns.take_turn`), its messages a slice at a time.

Messages inside other values (`Send` packets, task writes) travel by reference to a
checkpoint's messages (`codec.MessageRefs`); writes the server cannot resolve (a 412:
their checkpoint not stored yet) are sent again whole.

Reads of the latest checkpoint are conditional. The server answers a put (and a read) of a
root checkpoint without pending writes with its `state_tag`; the saver keeps that checkpoint
(`steps._Latest`) and sends the tag with the thread's next read of its latest checkpoint
(`If-None-Match`). While nothing changed the server answers 304 with no body, and the saver
gives the checkpoint back: its channels and metadata read from the wire form it kept, its
messages the objects it put, once their contents are checked unchanged (docs/checkpoints.md,
"MemoryAdminSaver").

Errors are the client's `MemoryAdminError` subclasses (`memoryadmin_client.errors`):
401 `MemoryAdminAuthError`, 403 `MemoryAdminForbidden` (another user's thread,
or a read-only key), 404 `MemoryAdminNotFound`, 400 `MemoryAdminInvalid` (also
a `ValueError`), 409 `MemoryAdminConflict`. Reads of a thread or checkpoint that
does not exist answer None or nothing, as LangGraph's savers do.

Thread ids are memoryadmin's (1 to 64 characters of `A-Z a-z 0-9 _ . : @ $ -`, not
`search`): any other id is refused before a request is sent, with
`MemoryAdminInvalid` naming `thread_id` (`memoryadmin_client.ids`), never read as
an empty thread.
"""

from __future__ import annotations

import json
import random
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import httpx
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from ..errors import (
    MemoryAdminAuthError,
    MemoryAdminConflict,
    MemoryAdminError,
    MemoryAdminForbidden,
    MemoryAdminInvalid,
    MemoryAdminNotFound,
)
from ..http import RETRIES, Call, HTTPClient, RetryPolicy, json_of
from ..ids import path_segment, thread_id_checked
from ..turns import Turn, take_turn
from .codec import BLOB_KEY, MessageRefs, ValueCodec, contents_of
from .steps import ThreadMemory, _kept, _Latest, _Plan, _Sent, conversation_channel

PAGE_SIZE = 100
BATCH = 1000
# A body up to this size stands for its checkpoint's size; a larger one's is measured.
_SMALL_BODY = 64 * 1024


@dataclass(frozen=True)
class _Put:
    call: Call
    thread_id: str
    sent: _Sent | None  # the messages channel's value as sent, when it is a list (its head still unknown)
    delta: bool
    latest: _Latest | None = None  # the checkpoint as the next read of the latest may give it back (its tag still unknown)


def _q(value: str) -> str:
    return path_segment(value)


def _config(thread_id: str, ns: str, checkpoint_id: str) -> RunnableConfig:
    """The config naming one checkpoint, as a read or a put answers it."""
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": checkpoint_id}}


def _message_envelope(item: Any) -> bool:
    """Whether a dumped item is a LangChain message's envelope, which the server keeps as a block."""
    if type(item) is not dict or item.get("lc") != 1 or "kwargs" not in item:
        return False
    ident = item.get("id")
    return type(ident) is list and bool(ident) and type(ident[-1]) is str and ident[-1].endswith(("Message", "MessageChunk"))


def _without(values: dict[str, Any], channel: str) -> dict[str, Any]:
    return {name: value for name, value in values.items() if name != channel}


def _configurable(config: RunnableConfig) -> dict[str, Any]:
    """The config's `configurable`, its thread id checked before any request (`ids.thread_id_checked`)."""
    configurable = (config or {}).get("configurable") or {}
    if not configurable.get("thread_id"):
        raise ValueError("MemoryAdminSaver needs config['configurable']['thread_id'].")
    thread_id_checked(configurable["thread_id"])
    return configurable


class MemoryAdminSaver(BaseCheckpointSaver[str]):
    """A `BaseCheckpointSaver` whose checkpoints live in memoryadmin (see the module docstring).

    `base_url` is the server (`http://127.0.0.1:8000`; `/api/v1` is added unless
    given); `api_key` a memoryadmin API key. `retries` bounds the retries of one
    request (0 turns them off). `transport` / `async_transport` are passed to
    httpx (tests and in-process use).
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        serde: SerializerProtocol | None = None,
        timeout: float = 30.0,
        page_size: int = PAGE_SIZE,
        retries: int = RETRIES,
        headers: dict[str, str] | None = None,
        transport: httpx.BaseTransport | None = None,
        async_transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        super().__init__(serde=serde)
        self.http = HTTPClient(
            base_url,
            api_key,
            timeout=timeout,
            retry=RetryPolicy(retries=retries),
            headers=headers,
            transport=transport,
            async_transport=async_transport,
        )
        self.base_url = self.http.base_url
        self.page_size = page_size
        self.retries = retries
        self.codec = ValueCodec(self.serde)
        # Per thread: the messages the server holds, those being put, the latest checkpoint (`steps`).
        self._memory = ThreadMemory()

    # connection handling

    def close(self) -> None:
        self.http.close()

    async def aclose(self) -> None:
        await self.http.aclose()

    def __enter__(self) -> MemoryAdminSaver:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    async def __aenter__(self) -> MemoryAdminSaver:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    # request builders and answer readers, shared by the sync and async methods

    def _tuple_request(self, config: RunnableConfig) -> tuple[Call, _Latest | None]:
        """The read's request, and the checkpoint it may answer is unchanged (a 304) for a read of
        the latest one: the thread's latest as last put or read, its messages as they were then."""
        configurable = _configurable(config)
        thread_id = configurable["thread_id"]
        thread, ns = _q(thread_id), configurable.get("checkpoint_ns") or ""
        checkpoint_id = get_checkpoint_id(config)
        if checkpoint_id:
            path = f"/threads/{thread}/checkpoints/{_q(checkpoint_id)}"
            return Call("GET", path, {"checkpoint_ns": ns}, tolerate=(404,)), None
        held = self._memory.latest(thread_id) if not ns else None
        if held is not None and not held.intact():
            held = None
        headers = {"If-None-Match": held.tag} if held is not None else None
        path = f"/threads/{thread}/checkpoints/latest"
        return Call("GET", path, {"checkpoint_ns": ns}, tolerate=(404,), headers=headers), held

    def _tuple(self, data: dict[str, Any]) -> CheckpointTuple:
        def config_of(checkpoint_id: str) -> RunnableConfig:
            return _config(data["thread_id"], data["checkpoint_ns"], checkpoint_id)

        return CheckpointTuple(
            config=config_of(data["checkpoint_id"]),
            checkpoint=self.codec.load_checkpoint(data["checkpoint"]),
            metadata=self.codec.load(data["metadata"]),
            parent_config=config_of(data["parent_checkpoint_id"]) if data.get("parent_checkpoint_id") else None,
            pending_writes=[
                (write["task_id"], write["channel"], self.codec.load(write["value"])) for write in data["pending_writes"]
            ],
        )

    def _tuple_held(self, held: _Latest) -> CheckpointTuple:
        """The latest checkpoint the server said is unchanged, as `_tuple` reads it from an answer:
        its channels and metadata read back from the wire form, its messages the objects held."""
        checkpoint = self.codec.load_checkpoint(held.rest)
        if held.sent is not None:
            checkpoint["channel_values"][held.sent.channel] = held.sent.messages[:]

        return CheckpointTuple(
            config=_config(held.thread_id, "", held.checkpoint_id),
            checkpoint=checkpoint,
            metadata=self.codec.load(held.metadata),
            parent_config=_config(held.thread_id, "", held.parent) if held.parent else None,
            pending_writes=[],
        )

    def _list_request(
        self, config: RunnableConfig, filter: dict[str, Any] | None, before: RunnableConfig | None, page: int
    ) -> Call:
        configurable = _configurable(config)
        params: dict[str, Any] = {"limit": page}
        if configurable.get("checkpoint_ns") is not None:
            params["checkpoint_ns"] = configurable["checkpoint_ns"]
        if before is not None and get_checkpoint_id(before):
            params["before"] = get_checkpoint_id(before)
        if filter:
            params["metadata"] = json.dumps(self.codec.dump(filter), allow_nan=False)
        return Call("GET", f"/threads/{_q(configurable['thread_id'])}/checkpoints", params, tolerate=(404,))

    def _matches(self, found: CheckpointTuple | None, filter: dict[str, Any] | None) -> bool:
        if found is None:
            return False
        return not filter or all(found.metadata.get(key) == value for key, value in filter.items())

    def _put_plan(self, config: RunnableConfig, checkpoint: Checkpoint, *, whole: bool = False) -> _Plan:
        """Whether the step goes as a delta (see the module docstring), and which messages it encodes."""
        configurable = _configurable(config)
        thread_id, ns, parent = configurable["thread_id"], configurable.get("checkpoint_ns") or "", configurable.get("checkpoint_id")
        sent = None if whole or ns else self._memory.sent(thread_id)
        values = checkpoint.get("channel_values") or {}
        channel = sent.channel if sent is not None else conversation_channel(values) if not ns else "messages"
        messages = values.get(channel)
        kept, contents = _kept(sent, parent, messages)
        # The messages encoded item by item: the delta's new ones, or the whole channel's (one blob instead
        # with a serializer that is not JSON's).
        start = kept if kept is not None else 0 if type(messages) is list and self.codec.readable else None
        return _Plan(thread_id, ns, parent, sent, channel, messages, kept, contents, start)

    def _put_request(
        self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata, *, whole: bool = False,
        plan: _Plan | None = None, items: list[Any] | None = None,
    ) -> _Put:
        """The put's request; `items`, when given, are `plan`'s messages already encoded (`aput`)."""
        if plan is None:
            plan = self._put_plan(config, checkpoint, whole=whole)
        thread_id, ns, sent, channel, messages, kept, contents = (
            plan.thread_id, plan.ns, plan.sent, plan.channel, plan.messages, plan.kept, plan.contents
        )
        if items is None and plan.start is not None:
            items = self.codec.dump_items(messages, plan.start)
        if kept is not None and not all(map(_message_envelope, items)):
            # Something added that is not a message (a custom reducer's value): the server keeps
            # only messages as the conversation, so the step goes whole, the channel a plain value.
            kept, contents = None, []
            items = self.codec.dump_items(messages)
        refs = MessageRefs(channel, messages) if type(messages) is list and messages else None
        body = {
            "checkpoint_id": checkpoint["id"],
            "parent_checkpoint_id": plan.parent,
            "checkpoint_ns": ns,
            "metadata": self.codec.dump(dict(get_checkpoint_metadata(config, metadata))),
        }
        if kept is None:
            dumped = {channel: items} if items is not None else None
            body["checkpoint"] = self.codec.dump_checkpoint(checkpoint, refs=refs, dumped=dumped)
        else:
            body["checkpoint"] = self.codec.dump_checkpoint(checkpoint, leave_out=channel, refs=refs)
            body["messages"] = {"channel": channel, "head": sent.head, "append": items}
        if refs is not None and refs.marked:
            body["refs"] = refs.marked
        putting = None
        if type(messages) is list and not ns:
            # What the server will hold: the messages verified kept (their contents known) and the new ones.
            putting = _Sent(checkpoint["id"], channel, messages[:], contents + contents_of(messages[len(contents):]), "")
            if messages:
                self._memory.keep_putting(thread_id, putting)
        latest = None
        if not ns and not (refs is not None and refs.marked):  # a marker is the server's to resolve
            wire = body["checkpoint"]
            if putting is not None and channel in wire["channel_values"]:
                wire = {**wire, "channel_values": _without(wire["channel_values"], channel)}
            latest = _Latest(thread_id, checkpoint["id"], "", plan.parent, wire, body["metadata"], putting)
        content, exact = self.codec.written(body)
        if not exact:  # the server holds "?" for a lone surrogate: a later read gives that, as a full read does
            latest = None
        if latest is not None:
            latest = replace(latest, size=self._wire_size(content, latest))
        call = Call(
            "POST", f"/threads/{_q(thread_id)}/checkpoints", content=content,
            tolerate=(412,) if kept is not None else (),
        )
        return _Put(call, thread_id, putting, kept is not None, latest)

    def _remember(self, put: _Put, response: Any) -> None:
        """After a put: the server's head of the thread's messages, for the next step's delta."""
        answer = json_of(response) if response is not None else {}
        held = answer.get("messages") if isinstance(answer, dict) else None
        self._memory.forget(put.thread_id)
        sent = put.sent
        if isinstance(held, dict) and isinstance(held.get("head"), str) and sent is not None:
            # Kept when the server holds the very channel sent as the conversation (else the next
            # read of the thread, which names the one it holds, tells the saver).
            if held.get("count") == len(sent.messages) and held.get("channel") == sent.channel:
                self._memory.keep_sent(put.thread_id, replace(sent, head=held["head"]))
        tag = answer.get("state_tag") if isinstance(answer, dict) else None
        if isinstance(tag, str) and put.latest is not None:
            self._memory.keep_latest(replace(put.latest, tag=tag))

    def _wire_size(self, body: bytes, latest: _Latest) -> int:
        """What `latest` holds on the wire: its body's length when that is small, else measured."""
        if len(body) <= _SMALL_BODY:
            return len(body)
        return len(self.codec.encode({"rest": latest.rest, "metadata": latest.metadata}))

    @staticmethod
    def _put_answer(config: RunnableConfig, checkpoint: Checkpoint) -> RunnableConfig:
        configurable = _configurable(config)
        return _config(configurable["thread_id"], configurable.get("checkpoint_ns") or "", checkpoint["id"])

    def _writes_request(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str, *, whole: bool = False
    ) -> Call:
        """The writes' request, messages by reference to a checkpoint's (412 tolerated; `whole`: none)."""
        configurable = _configurable(config)
        checkpoint_id = configurable.get("checkpoint_id")
        if not checkpoint_id:
            raise ValueError("put_writes needs config['configurable']['checkpoint_id'].")
        ns = configurable.get("checkpoint_ns") or ""
        refs = None
        if not (whole or ns):
            # The task's values refer to the messages of the checkpoint they start with the most of.
            candidates = [
                MessageRefs(sent.channel, sent.messages, sent.contents, sent.checkpoint_id)
                for sent in self._memory.held(configurable["thread_id"])
            ]
            refs = max(candidates, key=lambda refs: refs.longest_in([value for _, value in writes]), default=None)
        items = []
        for channel, value in writes:
            used = refs.used if refs is not None else 0
            item = {"channel": channel, "value": self.codec.dump(value, refs)}
            if refs is not None and refs.used != used:
                item["refs"] = True
            items.append(item)
        body = {"checkpoint_ns": ns, "task_id": task_id, "task_path": task_path, "writes": items}
        marked = refs is not None and refs.used > 0
        return Call(
            "POST", f"/threads/{_q(configurable['thread_id'])}/checkpoints/{_q(checkpoint_id)}/writes",
            content=self.codec.encode(body),
            tolerate=(412,) if marked else (),
        )

    @staticmethod
    def _delete_thread_request(thread_id: str) -> Call:
        return Call("DELETE", f"/threads/{_q(thread_id_checked(thread_id))}/checkpoints", tolerate=(404,))

    @staticmethod
    def _delete_for_runs_requests(run_ids: Sequence[str]) -> list[Call]:
        ids = [str(run_id) for run_id in run_ids]
        return [
            Call("POST", "/checkpoints/delete-for-runs", body={"run_ids": ids[i : i + BATCH]})
            for i in range(0, len(ids), BATCH)
        ]

    @staticmethod
    def _copy_request(source_thread_id: str, target_thread_id: str) -> Call:
        source, target = thread_id_checked(source_thread_id), thread_id_checked(target_thread_id)
        return Call("POST", f"/threads/{_q(source)}/copy", body={"thread_id": target})

    @staticmethod
    def _prune_requests(thread_ids: Sequence[str], strategy: str) -> list[Call]:
        ids = [thread_id_checked(thread_id) for thread_id in thread_ids]
        return [
            Call("POST", "/checkpoints/prune", body={"thread_ids": ids[i : i + BATCH], "strategy": strategy})
            for i in range(0, len(ids), BATCH)
        ]

    # sync checkpointer API

    def _read(self, response: Any, unchanged: _Latest | None = None) -> CheckpointTuple | None:
        """A read checkpoint (`unchanged` when the server answered 304); the messages the server holds
        for it remembered, for the next step's delta, and with its state tag the checkpoint itself."""
        if response is None:
            return None
        if response.status_code == 304 and unchanged is not None:
            return self._tuple_held(unchanged)
        data = json_of(response)
        found = self._tuple(data)
        held = data.get("messages")
        sent = None
        if isinstance(held, dict) and not data["checkpoint_ns"] and isinstance(held.get("head"), str):
            messages = found.checkpoint["channel_values"].get(held.get("channel"))
            if isinstance(messages, list) and held.get("count") == len(messages):
                sent = _Sent(data["checkpoint_id"], held["channel"], messages[:], contents_of(messages), held["head"])
                self._memory.keep_sent(data["thread_id"], sent)
        tag = data.get("state_tag")
        if isinstance(tag, str) and not data["checkpoint_ns"] and (sent is not None or not isinstance(held, dict)):
            wire = data["checkpoint"]
            if sent is not None:
                wire = {**wire, "channel_values": _without(wire["channel_values"], sent.channel)}
            latest = _Latest(
                data["thread_id"], data["checkpoint_id"], tag, data.get("parent_checkpoint_id"), wire, data["metadata"], sent
            )
            self._memory.keep_latest(replace(latest, size=self._wire_size(response.content, latest)))
        return found

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        call, held = self._tuple_request(config)
        return self._read(self.http.send(call), held)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        if config is None:
            raise ValueError("MemoryAdminSaver.list needs a config with a thread_id (memoryadmin lists one thread).")
        if limit is not None and limit <= 0:
            return
        if get_checkpoint_id(config):
            found = self.get_tuple(config)
            if self._matches(found, filter):
                yield found  # type: ignore[misc]
            return
        remaining = limit
        while True:
            page = self.page_size if remaining is None else min(self.page_size, remaining)
            response = self.http.send(self._list_request(config, filter, before, page))
            if response is None:
                return
            data = json_of(response)
            for item in data["results"]:
                yield self._tuple(item)
            if remaining is not None:
                remaining -= len(data["results"])
                if remaining <= 0:
                    return
            if not data.get("next_before"):
                return
            before = {"configurable": {"checkpoint_id": data["next_before"]}}

    def put(
        self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata, new_versions: ChannelVersions
    ) -> RunnableConfig:
        put = self._put_request(config, checkpoint, metadata)
        try:
            response = self.http.send(put.call)
            if response is None:  # 412: the server's messages are not the delta's start
                put = self._put_request(config, checkpoint, metadata, whole=True)
                response = self.http.send(put.call)
        except BaseException:
            self._memory.forget(put.thread_id)
            raise
        self._remember(put, response)
        return self._put_answer(config, checkpoint)

    def put_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = "") -> None:
        call = self._writes_request(config, writes, task_id, task_path)
        self._memory.forget_latest(config["configurable"]["thread_id"])
        if self.http.send(call) is None and call.tolerate:  # 412: sent by reference to what the server lacks
            self.http.send(self._writes_request(config, writes, task_id, task_path, whole=True))

    def delete_thread(self, thread_id: str) -> None:
        self._memory.forget(thread_id)
        self.http.send(self._delete_thread_request(thread_id))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        for request in self._delete_for_runs_requests(run_ids):
            self.http.send(request)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self.http.send(self._copy_request(source_thread_id, target_thread_id))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        for request in self._prune_requests(thread_ids, strategy):
            self.http.send(request)

    # async checkpointer API

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        call, held = self._tuple_request(config)
        return self._read(await self.http.asend(call), held)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        if config is None:
            raise ValueError("MemoryAdminSaver.alist needs a config with a thread_id (memoryadmin lists one thread).")
        if limit is not None and limit <= 0:
            return
        if get_checkpoint_id(config):
            found = await self.aget_tuple(config)
            if self._matches(found, filter):
                yield found  # type: ignore[misc]
            return
        remaining = limit
        while True:
            page = self.page_size if remaining is None else min(self.page_size, remaining)
            response = await self.http.asend(self._list_request(config, filter, before, page))
            if response is None:
                return
            data = json_of(response)
            for item in data["results"]:
                yield self._tuple(item)
            if remaining is not None:
                remaining -= len(data["results"])
                if remaining <= 0:
                    return
            if not data.get("next_before"):
                return
            before = {"configurable": {"checkpoint_id": data["next_before"]}}

    async def _aput_request(
        self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata, *, whole: bool = False
    ) -> _Put:
        """The request, encoded on the loop in turns of its passes (`turns`): the step's messages a
        slice at a time, then the rest of the body."""
        await take_turn()
        plan = self._put_plan(config, checkpoint, whole=whole)
        items = None if plan.start is None else await self.codec.adump_items(plan.messages, plan.start)
        await take_turn()
        return self._put_request(config, checkpoint, metadata, plan=plan, items=items)

    async def aput(
        self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata, new_versions: ChannelVersions
    ) -> RunnableConfig:
        put = await self._aput_request(config, checkpoint, metadata)
        try:
            response = await self.http.asend(put.call)
            if response is None:  # 412: the server's messages are not the delta's start
                put = await self._aput_request(config, checkpoint, metadata, whole=True)
                response = await self.http.asend(put.call)
        except BaseException:
            self._memory.forget(put.thread_id)
            raise
        self._remember(put, response)
        return self._put_answer(config, checkpoint)

    async def aput_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        async with Turn():
            call = self._writes_request(config, writes, task_id, task_path)
        self._memory.forget_latest(config["configurable"]["thread_id"])
        if await self.http.asend(call) is None and call.tolerate:  # 412: sent by reference to what the server lacks
            await self.http.asend(self._writes_request(config, writes, task_id, task_path, whole=True))

    async def adelete_thread(self, thread_id: str) -> None:
        self._memory.forget(thread_id)
        await self.http.asend(self._delete_thread_request(thread_id))

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        for request in self._delete_for_runs_requests(run_ids):
            await self.http.asend(request)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await self.http.asend(self._copy_request(source_thread_id, target_thread_id))

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        for request in self._prune_requests(thread_ids, strategy):
            await self.http.asend(request)

    def get_next_version(self, current: str | None, channel: None) -> str:
        """Zero-padded counter plus a random fraction, as LangGraph's own savers make them.

        Strings compare in order, so the server can tell which node is due next
        by comparing versions as text.
        """
        if current is None:
            current_v = 0
        elif isinstance(current, int):
            current_v = current
        else:
            current_v = int(str(current).split(".")[0])
        return f"{current_v + 1:032}.{random.random():016}"


__all__ = [
    "BLOB_KEY",
    "MemoryAdminAuthError",
    "MemoryAdminConflict",
    "MemoryAdminError",
    "MemoryAdminForbidden",
    "MemoryAdminInvalid",
    "MemoryAdminNotFound",
    "MemoryAdminSaver",
    "ValueCodec",
]
