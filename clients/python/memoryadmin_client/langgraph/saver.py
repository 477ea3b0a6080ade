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
from ..http import RETRIES, Call, HTTPClient, RetryPolicy
from ..ids import path_segment, thread_id_checked
from .codec import BLOB_KEY, ValueCodec

PAGE_SIZE = 100
BATCH = 1000


def _q(value: str) -> str:
    return path_segment(value)


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

    def _tuple_request(self, config: RunnableConfig) -> Call:
        configurable = _configurable(config)
        thread = _q(configurable["thread_id"])
        checkpoint_id = get_checkpoint_id(config)
        path = f"/threads/{thread}/checkpoints/{_q(checkpoint_id)}" if checkpoint_id else f"/threads/{thread}/checkpoints/latest"
        return Call("GET", path, {"checkpoint_ns": configurable.get("checkpoint_ns") or ""}, tolerate=(404,))

    def _tuple(self, data: dict[str, Any]) -> CheckpointTuple:
        def config_of(checkpoint_id: str) -> RunnableConfig:
            return {
                "configurable": {
                    "thread_id": data["thread_id"],
                    "checkpoint_ns": data["checkpoint_ns"],
                    "checkpoint_id": checkpoint_id,
                }
            }

        return CheckpointTuple(
            config=config_of(data["checkpoint_id"]),
            checkpoint=self.codec.load_checkpoint(data["checkpoint"]),
            metadata=self.codec.load(data["metadata"]),
            parent_config=config_of(data["parent_checkpoint_id"]) if data.get("parent_checkpoint_id") else None,
            pending_writes=[
                (write["task_id"], write["channel"], self.codec.load(write["value"])) for write in data["pending_writes"]
            ],
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

    def _put_request(self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata) -> Call:
        configurable = _configurable(config)
        body = {
            "checkpoint_id": checkpoint["id"],
            "parent_checkpoint_id": configurable.get("checkpoint_id"),
            "checkpoint_ns": configurable.get("checkpoint_ns") or "",
            "checkpoint": self.codec.dump_checkpoint(checkpoint),
            "metadata": self.codec.dump(dict(get_checkpoint_metadata(config, metadata))),
        }
        return Call("POST", f"/threads/{_q(configurable['thread_id'])}/checkpoints", body=body)

    @staticmethod
    def _put_answer(config: RunnableConfig, checkpoint: Checkpoint) -> RunnableConfig:
        configurable = _configurable(config)
        return {
            "configurable": {
                "thread_id": configurable["thread_id"],
                "checkpoint_ns": configurable.get("checkpoint_ns") or "",
                "checkpoint_id": checkpoint["id"],
            }
        }

    def _writes_request(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str) -> Call:
        configurable = _configurable(config)
        checkpoint_id = configurable.get("checkpoint_id")
        if not checkpoint_id:
            raise ValueError("put_writes needs config['configurable']['checkpoint_id'].")
        body = {
            "checkpoint_ns": configurable.get("checkpoint_ns") or "",
            "task_id": task_id,
            "task_path": task_path,
            "writes": [{"channel": channel, "value": self.codec.dump(value)} for channel, value in writes],
        }
        return Call("POST", f"/threads/{_q(configurable['thread_id'])}/checkpoints/{_q(checkpoint_id)}/writes", body=body)

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

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        response = self.http.send(self._tuple_request(config))
        return None if response is None else self._tuple(response.json())

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
            data = response.json()
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
        self.http.send(self._put_request(config, checkpoint, metadata))
        return self._put_answer(config, checkpoint)

    def put_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = "") -> None:
        self.http.send(self._writes_request(config, writes, task_id, task_path))

    def delete_thread(self, thread_id: str) -> None:
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
        response = await self.http.asend(self._tuple_request(config))
        return None if response is None else self._tuple(response.json())

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
            data = response.json()
            for item in data["results"]:
                yield self._tuple(item)
            if remaining is not None:
                remaining -= len(data["results"])
                if remaining <= 0:
                    return
            if not data.get("next_before"):
                return
            before = {"configurable": {"checkpoint_id": data["next_before"]}}

    async def aput(
        self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata, new_versions: ChannelVersions
    ) -> RunnableConfig:
        await self.http.asend(self._put_request(config, checkpoint, metadata))
        return self._put_answer(config, checkpoint)

    async def aput_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        await self.http.asend(self._writes_request(config, writes, task_id, task_path))

    async def adelete_thread(self, thread_id: str) -> None:
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
