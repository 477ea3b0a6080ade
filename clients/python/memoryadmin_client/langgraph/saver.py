"""`MemoryAdminSaver`: a LangGraph checkpointer kept in memoryadmin, over its HTTP API.

    from memoryadmin_client.langgraph import MemoryAdminSaver

    saver = MemoryAdminSaver("http://127.0.0.1:8000", api_key)
    graph = builder.compile(checkpointer=saver)
    graph.invoke(inputs, {"configurable": {"thread_id": "t-1"}})

Every checkpointer method is one or a few requests to the checkpoint endpoints
(docs/checkpoints.md), over one pooled connection per client (`httpx.Client`
for the sync methods, `httpx.AsyncClient` for the async ones; an async client
belongs to the event loop that made it, so a new loop gets a new client).

State is stored readable. A channel value that LangGraph's serializer
(`JsonPlusSerializer`) can express as JSON is sent as JSON: plain JSON as is,
LangChain messages in LangChain's serialised form (`{"lc": 1, ...}`), a few
LangGraph types (`Interrupt`, `Send`, `Command`) in the constructor form that
serializer revives (`{"lc": 2, ...}`). Every such value is checked to come back
equal before it is sent that way (a tuple comes back as a list, as it does
from LangGraph's own serializer); anything else (bytes, sets, datetimes, custom
classes) goes as a typed blob `{"$blob": {"type", "base64"}}` made by the saver's
serializer, which round-trips exactly. A serializer other than
`JsonPlusSerializer` (an encrypting one, say) makes every value a blob.

Every request is idempotent (a put is an upsert by checkpoint id, a write an
upsert by task and index, deletes and reads are repeatable), so a 503 (the
server's database busy or away) or a dropped connection is retried a few
times with a short backoff before it is raised.

Errors come back as `MemoryAdminError` subclasses: 401 `MemoryAdminAuthError`,
403 `MemoryAdminForbidden` (another user's thread, or a read-only key), 404
`MemoryAdminNotFound`, 400 `MemoryAdminInvalid` (also a `ValueError`), 409
`MemoryAdminConflict`. Reads of a thread or checkpoint that does not exist
answer None or nothing, as LangGraph's savers do.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
import math
import random
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import httpx
from langchain_core.load import dumpd
from langchain_core.load.serializable import Serializable
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
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

API_PREFIX = "/api/v1"
BLOB_KEY = "$blob"
PAGE_SIZE = 100
BATCH = 1000
RETRIES = 6
# Seconds before the first retry; doubled each time, at most RETRY_CAP.
RETRY_BASE = 0.05
RETRY_CAP = 1.0

# LangGraph types sent in the `{"lc": 2}` constructor form, which JsonPlusSerializer
# revives without an allowlist (they are in its list of safe types).
LC2_TYPES = {("langgraph.types", "Interrupt"), ("langgraph.types", "Send"), ("langgraph.types", "Command")}


# --- errors ------------------------------------------------------------------------------------


class MemoryAdminError(RuntimeError):
    """memoryadmin refused or failed a request."""

    def __init__(self, status_code: int, body: Any, method: str = "", url: str = ""):
        self.status_code = status_code
        self.body = body
        self.code = body.get("code") if isinstance(body, dict) else None
        self.detail = body.get("detail") if isinstance(body, dict) else body
        self.errors = body.get("errors") if isinstance(body, dict) else None
        where = f" to {method} {url}" if method else ""
        super().__init__(f"memoryadmin answered {status_code}{where}: {self.detail}")


class MemoryAdminAuthError(MemoryAdminError, PermissionError):
    """401: no key, or a wrong or revoked one."""


class MemoryAdminForbidden(MemoryAdminError, PermissionError):
    """403: the thread belongs to another user, or the key's role may not do this."""


class MemoryAdminNotFound(MemoryAdminError, LookupError):
    """404: the thread or checkpoint does not exist."""


class MemoryAdminInvalid(MemoryAdminError, ValueError):
    """400 (or 413): the request was refused as it stands; `errors` names the fields."""


class MemoryAdminConflict(MemoryAdminError):
    """409: e.g. copying into a thread that already has checkpoints."""


_ERRORS = {400: MemoryAdminInvalid, 401: MemoryAdminAuthError, 403: MemoryAdminForbidden, 404: MemoryAdminNotFound, 409: MemoryAdminConflict, 413: MemoryAdminInvalid}


def _raise_for(response: httpx.Response) -> None:
    try:
        body: Any = response.json()
    except ValueError:
        body = response.text
    cls = _ERRORS.get(response.status_code, MemoryAdminError)
    raise cls(response.status_code, body, response.request.method, str(response.request.url))


# --- values: readable JSON where it round-trips, typed blobs otherwise --------------------------


class _NotJson(Exception):
    pass


def _reserved(value: dict[str, Any]) -> bool:
    """A plain dict shaped like an envelope would be read back as one: it must travel as a blob."""
    return BLOB_KEY in value or value.get("lc") in (1, 2)


def _has_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any("\x00" in key or _has_nul(item) for key, item in value.items())
    if isinstance(value, list):
        return any(_has_nul(item) for item in value)
    return False


class ValueCodec:
    """Turns channel values into the wire format and back (see the module docstring)."""

    def __init__(self, serde: SerializerProtocol):
        self.serde = serde
        self.readable = isinstance(serde, JsonPlusSerializer)

    # to the wire

    def dump(self, value: Any) -> Any:
        if self.readable:
            try:
                return self._json(value)
            except _NotJson:
                pass
            kind = type(value)
            if kind is list or kind is tuple:
                return [self.dump(item) for item in value]
            if kind is dict and all(type(key) is str and "\x00" not in key for key in value) and not _reserved(value):
                return {key: self.dump(item) for key, item in value.items()}
        type_, data = self.serde.dumps_typed(value)
        return {BLOB_KEY: {"type": type_, "base64": base64.b64encode(data).decode("ascii")}}

    def _json(self, value: Any) -> Any:
        """`value` as JSON that reads back equal, or _NotJson. Exact types only (no subclasses)."""
        kind = type(value)
        if value is None or kind is bool:
            return value
        if kind is int:
            # The server reads JSON numbers as 64-bit integers; a larger one would come back a float.
            if not -(2**63) <= value < 2**64:
                raise _NotJson
            return value
        if kind is str:
            if "\x00" in value:  # PostgreSQL's JSONB cannot hold U+0000
                raise _NotJson
            return value
        if kind is float:
            if not math.isfinite(value):
                raise _NotJson
            return value
        if kind is list or kind is tuple:
            # LangGraph's own serializer gives a tuple back as a list; so does this one.
            return [self._json(item) for item in value]
        if kind is dict:
            if not all(type(key) is str and "\x00" not in key for key in value) or _reserved(value):
                raise _NotJson
            return {key: self._json(item) for key, item in value.items()}
        if isinstance(value, BaseException):
            # LangGraph's own serializer keeps an error as its repr; so does this one.
            return repr(value).replace("\x00", "")
        if isinstance(value, Serializable) and value.is_lc_serializable():
            return self._checked(value, dumpd(value))
        module, name = kind.__module__, kind.__name__
        if (module, name) in LC2_TYPES:
            if name == "Send":
                if getattr(value, "timeout", None) is not None:
                    raise _NotJson
                kwargs = {"node": value.node, "arg": value.arg}
            elif dataclasses.is_dataclass(value):
                # Fields left at their default are left out: the constructor restores them
                # exactly (a default tuple would otherwise come back as a list).
                kwargs = {
                    f.name: getattr(value, f.name)
                    for f in dataclasses.fields(value)
                    if f.init and not (f.default is not dataclasses.MISSING and getattr(value, f.name) == f.default)
                }
            else:
                raise _NotJson
            envelope = {"lc": 2, "type": "constructor", "id": [*module.split("."), name], "kwargs": {k: self._json(v) for k, v in kwargs.items()}}
            return self._checked(value, envelope)
        raise _NotJson

    def _checked(self, value: Any, envelope: Any) -> Any:
        if not isinstance(envelope, dict) or envelope.get("type") != "constructor" or _has_nul(envelope):
            raise _NotJson
        try:
            revived = self._revive(envelope)
        except Exception:
            raise _NotJson from None
        if type(revived) is not type(value) or revived != value:
            raise _NotJson
        return envelope

    def _revive(self, envelope: dict[str, Any]) -> Any:
        text = json.dumps(envelope, ensure_ascii=False, allow_nan=False)
        return self.serde.loads_typed(("json", text.encode()))

    # from the wire

    def load(self, value: Any) -> Any:
        kind = type(value)
        if kind is list:
            return [self.load(item) for item in value]
        if kind is dict:
            blob = value.get(BLOB_KEY)
            if len(value) == 1 and isinstance(blob, dict):
                return self.serde.loads_typed((blob["type"], base64.b64decode(blob["base64"])))
            if value.get("lc") in (1, 2) and value.get("type") == "constructor":
                return self._revive(value)
            return {key: self.load(item) for key, item in value.items()}
        return value

    def dump_checkpoint(self, checkpoint: Checkpoint) -> dict[str, Any]:
        body = {key: self.dump(item) for key, item in checkpoint.items() if key != "channel_values"}
        body["channel_values"] = {name: self.dump(item) for name, item in checkpoint.get("channel_values", {}).items()}
        return body

    def load_checkpoint(self, body: dict[str, Any]) -> Checkpoint:
        checkpoint = {key: self.load(item) for key, item in body.items() if key != "channel_values"}
        checkpoint["channel_values"] = {name: self.load(item) for name, item in (body.get("channel_values") or {}).items()}
        return checkpoint  # type: ignore[return-value]


# --- requests ----------------------------------------------------------------------------------


@dataclass
class _Request:
    method: str
    path: str
    params: dict[str, Any] = field(default_factory=dict)
    body: Any = None
    # Statuses answered without raising (e.g. 404 on a read: "there is nothing").
    tolerate: tuple[int, ...] = ()

    def content(self) -> bytes | None:
        if self.body is None:
            return None
        return json.dumps(self.body, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()


def _backoff(attempt: int) -> float:
    return min(RETRY_CAP, RETRY_BASE * 2**attempt) * (0.5 + random.random() / 2)


def _q(value: str) -> str:
    return quote(str(value), safe="")


def _configurable(config: RunnableConfig) -> dict[str, Any]:
    configurable = (config or {}).get("configurable") or {}
    if not configurable.get("thread_id"):
        raise ValueError("MemoryAdminSaver needs config['configurable']['thread_id'].")
    return configurable


class MemoryAdminSaver(BaseCheckpointSaver[str]):
    """A `BaseCheckpointSaver` whose checkpoints live in memoryadmin (see the module docstring).

    `base_url` is the server (`http://127.0.0.1:8000`; `/api/v1` is added unless
    given); `api_key` a memoryadmin API key. `transport` / `async_transport` are
    passed to httpx (tests and in-process use).
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
        root = base_url.rstrip("/")
        self.base_url = root if root.endswith(API_PREFIX) else root + API_PREFIX
        self.page_size = page_size
        self.retries = retries
        self._headers = {"Accept": "application/json", "Content-Type": "application/json", **(headers or {})}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._timeout = timeout
        self._async_transport = async_transport
        self._client = httpx.Client(base_url=self.base_url, headers=self._headers, timeout=timeout, transport=transport)
        self._async_client: httpx.AsyncClient | None = None
        self._async_loop: asyncio.AbstractEventLoop | None = None
        self.codec = ValueCodec(self.serde)

    # connection handling

    def close(self) -> None:
        self._client.close()

    async def aclose(self) -> None:
        if self._async_client is not None:
            await self._async_client.aclose()
            self._async_client = None

    def __enter__(self) -> MemoryAdminSaver:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    async def __aenter__(self) -> MemoryAdminSaver:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    def _aclient(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        if self._async_client is None or self._async_loop is not loop:
            self._async_client = httpx.AsyncClient(
                base_url=self.base_url, headers=self._headers, timeout=self._timeout, transport=self._async_transport
            )
            self._async_loop = loop
        return self._async_client

    def _send(self, request: _Request) -> httpx.Response | None:
        content = request.content()
        for attempt in range(self.retries + 1):
            try:
                response = self._client.request(request.method, request.path, params=request.params or None, content=content)
            except httpx.TransportError:
                if attempt == self.retries:
                    raise
            else:
                if response.status_code != 503 or attempt == self.retries:
                    return self._checked(response, request)
            time.sleep(_backoff(attempt))
        raise AssertionError("unreachable")

    async def _asend(self, request: _Request) -> httpx.Response | None:
        content = request.content()
        for attempt in range(self.retries + 1):
            try:
                response = await self._aclient().request(
                    request.method, request.path, params=request.params or None, content=content
                )
            except httpx.TransportError:
                if attempt == self.retries:
                    raise
            else:
                if response.status_code != 503 or attempt == self.retries:
                    return self._checked(response, request)
            await asyncio.sleep(_backoff(attempt))
        raise AssertionError("unreachable")

    @staticmethod
    def _checked(response: httpx.Response, request: _Request) -> httpx.Response | None:
        if response.status_code in request.tolerate:
            return None
        if response.status_code >= 400:
            _raise_for(response)
        return response

    # request builders and answer readers, shared by the sync and async methods

    def _tuple_request(self, config: RunnableConfig) -> _Request:
        configurable = _configurable(config)
        thread = _q(configurable["thread_id"])
        checkpoint_id = get_checkpoint_id(config)
        path = f"/threads/{thread}/checkpoints/{_q(checkpoint_id)}" if checkpoint_id else f"/threads/{thread}/checkpoints/latest"
        return _Request("GET", path, {"checkpoint_ns": configurable.get("checkpoint_ns") or ""}, tolerate=(404,))

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
    ) -> _Request:
        configurable = _configurable(config)
        params: dict[str, Any] = {"limit": page}
        if configurable.get("checkpoint_ns") is not None:
            params["checkpoint_ns"] = configurable["checkpoint_ns"]
        if before is not None and get_checkpoint_id(before):
            params["before"] = get_checkpoint_id(before)
        if filter:
            params["metadata"] = json.dumps(self.codec.dump(filter), allow_nan=False)
        return _Request("GET", f"/threads/{_q(configurable['thread_id'])}/checkpoints", params, tolerate=(404,))

    def _matches(self, found: CheckpointTuple | None, filter: dict[str, Any] | None) -> bool:
        if found is None:
            return False
        return not filter or all(found.metadata.get(key) == value for key, value in filter.items())

    def _put_request(self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata) -> _Request:
        configurable = _configurable(config)
        body = {
            "checkpoint_id": checkpoint["id"],
            "parent_checkpoint_id": configurable.get("checkpoint_id"),
            "checkpoint_ns": configurable.get("checkpoint_ns") or "",
            "checkpoint": self.codec.dump_checkpoint(checkpoint),
            "metadata": self.codec.dump(dict(get_checkpoint_metadata(config, metadata))),
        }
        return _Request("POST", f"/threads/{_q(configurable['thread_id'])}/checkpoints", body=body)

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

    def _writes_request(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str) -> _Request:
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
        return _Request("POST", f"/threads/{_q(configurable['thread_id'])}/checkpoints/{_q(checkpoint_id)}/writes", body=body)

    @staticmethod
    def _delete_thread_request(thread_id: str) -> _Request:
        return _Request("DELETE", f"/threads/{_q(thread_id)}/checkpoints", tolerate=(404,))

    @staticmethod
    def _delete_for_runs_requests(run_ids: Sequence[str]) -> list[_Request]:
        ids = [str(run_id) for run_id in run_ids]
        return [
            _Request("POST", "/checkpoints/delete-for-runs", body={"run_ids": ids[i : i + BATCH]})
            for i in range(0, len(ids), BATCH)
        ]

    @staticmethod
    def _copy_request(source_thread_id: str, target_thread_id: str) -> _Request:
        return _Request("POST", f"/threads/{_q(source_thread_id)}/copy", body={"thread_id": target_thread_id})

    @staticmethod
    def _prune_requests(thread_ids: Sequence[str], strategy: str) -> list[_Request]:
        ids = [str(thread_id) for thread_id in thread_ids]
        return [
            _Request("POST", "/checkpoints/prune", body={"thread_ids": ids[i : i + BATCH], "strategy": strategy})
            for i in range(0, len(ids), BATCH)
        ]

    # sync checkpointer API

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        response = self._send(self._tuple_request(config))
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
            response = self._send(self._list_request(config, filter, before, page))
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
        self._send(self._put_request(config, checkpoint, metadata))
        return self._put_answer(config, checkpoint)

    def put_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = "") -> None:
        self._send(self._writes_request(config, writes, task_id, task_path))

    def delete_thread(self, thread_id: str) -> None:
        self._send(self._delete_thread_request(thread_id))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        for request in self._delete_for_runs_requests(run_ids):
            self._send(request)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self._send(self._copy_request(source_thread_id, target_thread_id))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        for request in self._prune_requests(thread_ids, strategy):
            self._send(request)

    # async checkpointer API

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        response = await self._asend(self._tuple_request(config))
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
            response = await self._asend(self._list_request(config, filter, before, page))
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
        await self._asend(self._put_request(config, checkpoint, metadata))
        return self._put_answer(config, checkpoint)

    async def aput_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        await self._asend(self._writes_request(config, writes, task_id, task_path))

    async def adelete_thread(self, thread_id: str) -> None:
        await self._asend(self._delete_thread_request(thread_id))

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        for request in self._delete_for_runs_requests(run_ids):
            await self._asend(request)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await self._asend(self._copy_request(source_thread_id, target_thread_id))

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        for request in self._prune_requests(thread_ids, strategy):
            await self._asend(request)

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
