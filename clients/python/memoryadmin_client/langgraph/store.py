"""`MemoryAdminStore`: a LangGraph `BaseStore` kept in memoryadmin, over its HTTP API.

    from memoryadmin_client.langgraph import MemoryAdminStore

    store = MemoryAdminStore("http://127.0.0.1:8000", api_key)
    graph = builder.compile(store=store)   # nodes get it as `store` / `runtime.store`

Each operation of a batch is one request to the store endpoints (the LangGraph
server's shapes, DESIGN §9), run in order, over one pooled connection per
client (`httpx.Client` for `batch`, `httpx.AsyncClient` for `abatch`). A put
with value None is a delete, as LangGraph defines it. TTLs are minutes and
supported; reads refresh them unless told not to (LangGraph's default).

Errors from the server are raised as `MemoryAdminStoreError` (a 403 on another
user's item as `StoreForbiddenError`, a 400 as `StoreInvalidError`, which is
also a `ValueError`, like LangGraph's own namespace errors).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Callable

import httpx
from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    validate_op_namespace,
)

API_PREFIX = "/api/v1"


class MemoryAdminStoreError(RuntimeError):
    """The server refused or failed an operation."""

    def __init__(self, status_code: int, body: Any):
        self.status_code = status_code
        self.body = body
        detail = body.get("detail") if isinstance(body, dict) else None
        self.code = body.get("code") if isinstance(body, dict) else None
        self.errors = body.get("errors") if isinstance(body, dict) else None
        super().__init__(f"memoryadmin store answered {status_code}: {detail or body}")


class StoreForbiddenError(MemoryAdminStoreError):
    """403: the item belongs to another user, or the key's role may not write."""


class StoreInvalidError(MemoryAdminStoreError, ValueError):
    """400: a bad namespace, key, value, filter or paging parameter."""


@dataclass(frozen=True)
class _Call:
    method: str
    path: str
    params: dict[str, Any] | None
    json: Any
    parse: Callable[[Any], Any]


def _namespace_list(namespace: Iterable[str]) -> list[str]:
    return list(namespace)


def _timestamp(value: str) -> str:
    # Python 3.11's fromisoformat reads "Z"; normalise anyway for older readers.
    return value[:-1] + "+00:00" if isinstance(value, str) and value.endswith("Z") else value


def _item(body: Any) -> Item | None:
    if body is None:
        return None
    return Item(
        value=body["value"],
        key=body["key"],
        namespace=tuple(body["namespace"]),
        created_at=_timestamp(body["created_at"]),
        updated_at=_timestamp(body["updated_at"]),
    )


def _search_items(body: Any) -> list[SearchItem]:
    return [
        SearchItem(
            namespace=tuple(row["namespace"]),
            key=row["key"],
            value=row["value"],
            created_at=_timestamp(row["created_at"]),
            updated_at=_timestamp(row["updated_at"]),
            score=row.get("score"),
        )
        for row in body["items"]
    ]


def _namespaces(body: Any) -> list[tuple[str, ...]]:
    return [tuple(namespace) for namespace in body["namespaces"]]


def _nothing(body: Any) -> None:
    return None


def _call_for(op: Op) -> _Call:
    """The HTTP request that carries out one LangGraph store operation."""
    if isinstance(op, GetOp):
        params = {
            "namespace": ".".join(op.namespace),
            "key": op.key,
            "refresh_ttl": "true" if op.refresh_ttl else "false",
        }
        return _Call("GET", "/store/items", params, None, _item)
    if isinstance(op, PutOp):
        if op.value is None:
            body = {"namespace": _namespace_list(op.namespace), "key": op.key}
            return _Call("DELETE", "/store/items", None, body, _nothing)
        body = {"namespace": _namespace_list(op.namespace), "key": op.key, "value": dict(op.value)}
        if op.index is not None:
            body["index"] = op.index
        if op.ttl is not None:
            body["ttl"] = op.ttl
        return _Call("PUT", "/store/items", None, body, _nothing)
    if isinstance(op, SearchOp):
        body = {
            "namespace_prefix": _namespace_list(op.namespace_prefix),
            "filter": op.filter,
            "limit": op.limit,
            "offset": op.offset,
            "query": op.query,
            "refresh_ttl": op.refresh_ttl,
        }
        return _Call("POST", "/store/items/search", None, body, _search_items)
    if isinstance(op, ListNamespacesOp):
        body: dict[str, Any] = {"max_depth": op.max_depth, "limit": op.limit, "offset": op.offset}
        for condition in op.match_conditions or ():
            if condition.match_type not in ("prefix", "suffix"):
                raise ValueError(f"Unsupported match type: {condition.match_type!r}")
            if condition.match_type in body:
                # The endpoint takes one prefix and one suffix, as the LangGraph server does.
                raise NotImplementedError(f"Only one {condition.match_type} condition is supported.")
            body[condition.match_type] = list(condition.path)
        return _Call("POST", "/store/namespaces", None, body, _namespaces)
    raise ValueError(f"Unknown operation type: {type(op).__name__}")


def _answer(call: _Call, response: httpx.Response) -> Any:
    if response.status_code >= 400:
        try:
            body = response.json()
        except ValueError:
            body = response.text
        error = {403: StoreForbiddenError, 400: StoreInvalidError}.get(response.status_code, MemoryAdminStoreError)
        raise error(response.status_code, body)
    if response.status_code == 204 or not response.content:
        return call.parse(None)
    return call.parse(response.json())


class MemoryAdminStore(BaseStore):
    """LangGraph long-term memory stored in memoryadmin (owned, audited, browsable)."""

    supports_ttl = True

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float = 30.0,
        ttl: TTLConfig | None = None,
    ) -> None:
        root = base_url.rstrip("/")
        self.base_url = root if root.endswith(API_PREFIX) else root + API_PREFIX
        self._headers = {"Authorization": f"Bearer {api_key}", "Accept": "application/json"}
        self._timeout = timeout
        self.ttl_config = ttl
        self._client = httpx.Client(base_url=self.base_url, headers=self._headers, timeout=timeout)
        self._aclient: httpx.AsyncClient | None = None
        self._aclient_loop: asyncio.AbstractEventLoop | None = None

    # LangGraph calls these two; everything else in BaseStore is built on them.

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        calls = self._calls(ops)
        results: list[Result] = []
        for call in calls:
            response = self._client.request(call.method, call.path, params=call.params, json=call.json)
            results.append(_answer(call, response))
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        calls = self._calls(ops)
        client = self._async_client()
        results: list[Result] = []
        for call in calls:
            response = await client.request(call.method, call.path, params=call.params, json=call.json)
            results.append(_answer(call, response))
        return results

    @staticmethod
    def _calls(ops: Iterable[Op]) -> list[_Call]:
        # Validate every operation before sending any, so a bad label in a batch
        # writes nothing (BaseStore's helpers validate, direct batch() callers may not).
        ops = list(ops)
        for op in ops:
            validate_op_namespace(op)
        return [_call_for(op) for op in ops]

    def _async_client(self) -> httpx.AsyncClient:
        # An AsyncClient's connections belong to the event loop that opened them.
        loop = asyncio.get_running_loop()
        if self._aclient is None or self._aclient_loop is not loop:
            self._aclient = httpx.AsyncClient(base_url=self.base_url, headers=self._headers, timeout=self._timeout)
            self._aclient_loop = loop
        return self._aclient

    def close(self) -> None:
        self._client.close()

    async def aclose(self) -> None:
        if self._aclient is not None:
            await self._aclient.aclose()
            self._aclient = None
        self._client.close()

    def __enter__(self) -> "MemoryAdminStore":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    async def __aenter__(self) -> "MemoryAdminStore":
        return self

    async def __aexit__(self, *exc_info) -> None:
        await self.aclose()


__all__ = ["MemoryAdminStore", "MemoryAdminStoreError", "StoreForbiddenError", "StoreInvalidError"]
