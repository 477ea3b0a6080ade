"""`MemoryAdminStore`: a LangGraph `BaseStore` kept in memoryadmin, over its HTTP API.

    from memoryadmin_client.langgraph import MemoryAdminStore

    store = MemoryAdminStore("http://127.0.0.1:8000", api_key)
    graph = builder.compile(store=store)   # nodes get it as `store` / `runtime.store`

Each operation of a batch is one request to the store endpoints (the LangGraph
server's store API, docs/store.md), run in order, through the client's one
HTTP layer (`memoryadmin_client.http`): one pooled connection for `batch`, one
per event loop for `abatch`, and its retry policy, which is safe here because
every store request is idempotent (a put is an upsert, a delete of what is gone
answers 204, the rest are reads). A put with value None is a delete, as
LangGraph defines it. TTLs are minutes and supported; reads refresh them
unless told not to (LangGraph's default).

Errors are the client's `MemoryAdminError` subclasses: a 403 on another user's
item is `MemoryAdminForbidden` (also named `StoreForbiddenError`), a 400
`MemoryAdminInvalid` (also `StoreInvalidError`, and a `ValueError`, like
LangGraph's own namespace errors); `MemoryAdminStoreError` is the base.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

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

from ..errors import MemoryAdminStoreError, StoreForbiddenError, StoreInvalidError
from ..http import RETRIES, Call, HTTPClient, RetryPolicy


@dataclass(frozen=True)
class _Operation:
    """One store operation as a request, and how its answer's JSON becomes LangGraph's result."""

    call: Call
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


def _operation_for(op: Op) -> _Operation:
    """The HTTP request that carries out one LangGraph store operation."""
    if isinstance(op, GetOp):
        params = {
            "namespace": ".".join(op.namespace),
            "key": op.key,
            "refresh_ttl": "true" if op.refresh_ttl else "false",
        }
        return _Operation(Call("GET", "/store/items", params=params), _item)
    if isinstance(op, PutOp):
        if op.value is None:
            body = {"namespace": _namespace_list(op.namespace), "key": op.key}
            return _Operation(Call("DELETE", "/store/items", body=body), _nothing)
        body = {"namespace": _namespace_list(op.namespace), "key": op.key, "value": dict(op.value)}
        if op.index is not None:
            body["index"] = op.index
        if op.ttl is not None:
            body["ttl"] = op.ttl
        return _Operation(Call("PUT", "/store/items", body=body), _nothing)
    if isinstance(op, SearchOp):
        body = {
            "namespace_prefix": _namespace_list(op.namespace_prefix),
            "filter": op.filter,
            "limit": op.limit,
            "offset": op.offset,
            "query": op.query,
            "refresh_ttl": op.refresh_ttl,
        }
        return _Operation(Call("POST", "/store/items/search", body=body), _search_items)
    if isinstance(op, ListNamespacesOp):
        body: dict[str, Any] = {"max_depth": op.max_depth, "limit": op.limit, "offset": op.offset}
        for condition in op.match_conditions or ():
            if condition.match_type not in ("prefix", "suffix"):
                raise ValueError(f"Unsupported match type: {condition.match_type!r}")
            if condition.match_type in body:
                # The endpoint takes one prefix and one suffix, as the LangGraph server does.
                raise NotImplementedError(f"Only one {condition.match_type} condition is supported.")
            body[condition.match_type] = list(condition.path)
        return _Operation(Call("POST", "/store/namespaces", body=body), _namespaces)
    raise ValueError(f"Unknown operation type: {type(op).__name__}")


def _result(operation: _Operation, response: httpx.Response | None) -> Any:
    """The operation's LangGraph result: a 204 or an empty body is parsed as None (nothing there)."""
    if response is None or response.status_code == 204 or not response.content:
        return operation.parse(None)
    return operation.parse(response.json())


class MemoryAdminStore(BaseStore):
    """LangGraph long-term memory stored in memoryadmin (owned, audited, browsable).

    `base_url` is the server (`/api/v1` is added unless given), `api_key` a
    memoryadmin API key. `retries` bounds the retries of one request (0 turns
    them off); `transport` / `async_transport` are passed to httpx.
    """

    supports_ttl = True

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float = 30.0,
        ttl: TTLConfig | None = None,
        retries: int = RETRIES,
        headers: dict[str, str] | None = None,
        transport: httpx.BaseTransport | None = None,
        async_transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
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
        self.ttl_config = ttl

    # LangGraph calls these two; everything else in BaseStore is built on them.

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        return [_result(operation, self.http.send(operation.call)) for operation in self._operations(ops)]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        results: list[Result] = []
        for operation in self._operations(ops):
            results.append(_result(operation, await self.http.asend(operation.call)))
        return results

    @staticmethod
    def _operations(ops: Iterable[Op]) -> list[_Operation]:
        # Validate every operation before sending any, so a bad label in a batch
        # writes nothing (BaseStore's helpers validate, direct batch() callers may not).
        ops = list(ops)
        for op in ops:
            validate_op_namespace(op)
        return [_operation_for(op) for op in ops]

    def close(self) -> None:
        self.http.close()

    async def aclose(self) -> None:
        await self.http.aclose()
        self.http.close()

    def __enter__(self) -> MemoryAdminStore:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    async def __aenter__(self) -> MemoryAdminStore:
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.aclose()


__all__ = ["MemoryAdminStore", "MemoryAdminStoreError", "StoreForbiddenError", "StoreInvalidError"]
