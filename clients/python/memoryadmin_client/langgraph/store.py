"""`MemoryAdminStore`: a LangGraph `BaseStore` kept in memoryadmin, over its HTTP API.

    from memoryadmin_client.langgraph import MemoryAdminStore

    store = MemoryAdminStore("http://127.0.0.1:8000", api_key)
    graph = builder.compile(store=store)   # nodes get it as `store` / `runtime.store`

    # Semantic search, as LangGraph's stores configure it: the texts at `fields`
    # of each put are embedded here and stored with the item; search(query=...)
    # ranks by cosine similarity.
    store = MemoryAdminStore(url, api_key, index={"dims": 384, "embed": embed_texts, "fields": ["text"]})

`batch` / `abatch` send their operations as one request to `POST /store/batch`,
which runs them in one transaction with LangGraph's semantics: reads answer
from the store as it was before the batch's writes, several puts of one key
keep the last. A put with value None is a delete. The texts of a batch's puts
are embedded in one call of the embedder, its queries one call each.

The async single calls (`aget`, `aput`, `asearch`, `adelete`,
`alist_namespaces`: each an `abatch` of one operation) are queued per event
loop, as LangGraph's async stores queue theirs: what many coroutines ask at
once goes out together, `batch_size` operations a request, at most
`max_requests` requests at a time, each operation answered (or refused) on its
own. Thousands of concurrent calls thus take a few dozen requests and never
wait on the connection pool.

Requests go through the client's one HTTP layer (`memoryadmin_client.http`)
and its retry policy, which is safe here: a put is an upsert, a delete of what
is gone does nothing, the rest are reads. Errors are the client's
`MemoryAdminError` subclasses: a 403 on another user's item is
`MemoryAdminForbidden` (also `StoreForbiddenError`), a 400 (or a value the
client refuses before sending, such as a NaN in a filter) `MemoryAdminInvalid`
(also `StoreInvalidError`, and a `ValueError`).
"""

from __future__ import annotations

import asyncio
import json
import weakref
from collections import deque
from collections.abc import Iterable
from typing import Any

import httpx
from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    ensure_embeddings,
    get_text_at_path,
    tokenize_path,
    validate_op_namespace,
)

from ..errors import MemoryAdminStoreError, StoreForbiddenError, StoreInvalidError, error_class, refused_here
from ..http import RETRIES, Call, HTTPClient, RetryPolicy, encode_json

# The server's bound on one batch (store_app.batch.MAX_BATCH_OPS).
MAX_BATCH_OPS = 1000
BATCH_SIZE = 100
MAX_REQUESTS = 4


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


def _search_items(rows: Any) -> list[SearchItem]:
    return [
        SearchItem(
            namespace=tuple(row["namespace"]),
            key=row["key"],
            value=row["value"],
            created_at=_timestamp(row["created_at"]),
            updated_at=_timestamp(row["updated_at"]),
            score=row.get("score"),
        )
        for row in rows
    ]


def _result(op: Op, result: Any) -> Result:
    """The operation's LangGraph result from its answer in the batch."""
    if isinstance(op, GetOp):
        return _item(result)
    if isinstance(op, SearchOp):
        return _search_items(result)
    if isinstance(op, ListNamespacesOp):
        return [tuple(namespace) for namespace in result]
    return None


def _finite(value: Any, *, field: str) -> None:
    """Strict JSON or a MemoryAdminInvalid naming the field: the server would refuse a NaN or an infinity."""
    try:
        json.dumps(value, allow_nan=False)
    except ValueError as exc:
        raise refused_here(field=field, message=f"must be JSON without NaN or infinity ({exc}).") from None


# The fields of an operation's body that hold the caller's numbers, and the field a NaN there is named by.
_CHECKED_FIELDS = {"put": (("value", "value"), ("vectors", "index")), "search": (("filter", "filter"), ("query_vector", "query"))}


def _check_finite(body: dict[str, Any]) -> None:
    """An operation's body is strict JSON, or a MemoryAdminInvalid naming the field that is not."""
    for name, field in _CHECKED_FIELDS.get(body["op"], ()):
        if name in body:
            _finite(body[name], field=field)


def _encoded(payload: dict[str, Any], bodies: list[dict[str, Any]]) -> bytes:
    """The request's body as strict JSON bytes, written once for all its operations; when it is
    not strict JSON, the first operation at fault is named (its value, filter or vectors)."""
    try:
        return encode_json(body=payload)
    except ValueError:
        for body in bodies:
            _check_finite(body)
        raise


class _Embedding:
    """The vectors a batch sends: one embedder call for the texts of its puts, one per distinct query."""

    def __init__(self, store: MemoryAdminStore, ops: list[Op]) -> None:
        self.texts: dict[int, list[tuple[str, str]]] = {}
        self.queries: list[str] = []
        self.vectors: dict[str, list[float]] = {}
        self.query_vectors: dict[str, list[float]] = {}
        if store.index_config is None:
            return
        for position, op in enumerate(ops):
            if isinstance(op, PutOp) and op.value is not None and op.index is not False:
                self.texts[position] = store._texts(op)
            elif isinstance(op, SearchOp) and op.query and op.query not in self.queries:
                self.queries.append(op.query)

    @property
    def distinct_texts(self) -> list[str]:
        return list(dict.fromkeys(text for named in self.texts.values() for _, text in named))

    def embed(self, store: MemoryAdminStore) -> None:
        texts = self.distinct_texts
        if texts:
            self.vectors = dict(zip(texts, store.embeddings.embed_documents(texts), strict=True))
        self.query_vectors = {query: store.embeddings.embed_query(query) for query in self.queries}

    async def aembed(self, store: MemoryAdminStore) -> None:
        texts = self.distinct_texts
        if texts:
            self.vectors = dict(zip(texts, await store.embeddings.aembed_documents(texts), strict=True))
        answers = await asyncio.gather(*(store.embeddings.aembed_query(query) for query in self.queries))
        self.query_vectors = dict(zip(self.queries, answers, strict=True))


class MemoryAdminStore(BaseStore):
    """LangGraph long-term memory stored in memoryadmin (owned, audited, browsable, searchable by meaning).

    `base_url` is the server (`/api/v1` is added unless given), `api_key` a
    memoryadmin API key. `index` is LangGraph's `IndexConfig` (`dims`, `embed`
    — an `Embeddings`, or a sync or async function of a list of texts —
    `fields`, default `["$"]`). `retries` bounds the retries of one request
    (0 turns them off); `batch_size` and `max_requests` shape the queue of
    concurrent async calls; `transport` / `async_transport` go to httpx.
    """

    supports_ttl = True

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        index: IndexConfig | None = None,
        timeout: float = 30.0,
        ttl: TTLConfig | None = None,
        retries: int = RETRIES,
        headers: dict[str, str] | None = None,
        transport: httpx.BaseTransport | None = None,
        async_transport: httpx.AsyncBaseTransport | None = None,
        batch_size: int = BATCH_SIZE,
        max_requests: int = MAX_REQUESTS,
    ) -> None:
        if not 1 <= batch_size <= MAX_BATCH_OPS:
            raise ValueError(f"batch_size must be from 1 to {MAX_BATCH_OPS}.")
        if max_requests < 1:
            raise ValueError("max_requests must be at least 1.")
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
        self.index_config: dict[str, Any] | None = None
        self.embeddings = None
        if index:
            self.index_config = dict(index)
            if not isinstance(self.index_config.get("dims"), int) or self.index_config["dims"] < 1:
                raise ValueError("index['dims'] must be a positive whole number.")
            self.embeddings = ensure_embeddings(self.index_config.get("embed"))
            fields = self.index_config.get("fields") or ["$"]
            self._fields = [(path, path if path == "$" else tokenize_path(path)) for path in fields]
        self.batch_size = batch_size
        self.max_requests = max_requests
        self._queues: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Queue] = weakref.WeakKeyDictionary()

    # LangGraph calls these two; everything else in BaseStore is built on them.

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        ops = self._checked(ops)
        if not ops:
            return []
        embedding = _Embedding(self, ops)
        embedding.embed(self)
        # One operation is sent not atomic: its refusal then names its own fields ("filter"), not "ops[0].filter".
        single = len(ops) == 1
        answers = self._answers(ops, self.http.send(self._call(ops, embedding, atomic=not single)), atomic=not single)
        if single and isinstance(answers[0], BaseException):
            raise answers[0]
        return answers

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        ops = self._checked(ops)
        if len(ops) == 1:
            # One operation is its own transaction wherever it goes: with the other callers' of this moment.
            return [await self._queue().submit(ops[0])]
        if not ops:
            return []
        return await self._asend(ops, atomic=True)

    # Requests.

    @staticmethod
    def _checked(ops: Iterable[Op]) -> list[Op]:
        # Every operation before any is sent: a bad label in a batch writes nothing
        # (BaseStore's helpers validate, direct batch() callers may not).
        ops = list(ops)
        for op in ops:
            validate_op_namespace(op)
        if len(ops) > MAX_BATCH_OPS:
            raise refused_here(field="ops", message=f"a batch has at most {MAX_BATCH_OPS} operations, not {len(ops)}.")
        return ops

    async def _asend(self, ops: list[Op], *, atomic: bool) -> list[Any]:
        embedding = _Embedding(self, ops)
        await embedding.aembed(self)
        if atomic:
            return self._answers(ops, await self.http.asend(self._call(ops, embedding, atomic=True)), atomic=True)
        # Not atomic: an operation refused here (a NaN in its filter) is that caller's error alone.
        answers: list[Any] = [None] * len(ops)
        sent: list[tuple[int, dict[str, Any]]] = []
        for position, op in enumerate(ops):
            try:
                sent.append((position, self._body(op, position, embedding)))
            except (ValueError, NotImplementedError) as exc:
                answers[position] = exc
        payload = {"ops": [body for _, body in sent], "atomic": False}
        try:
            content = encode_json(body=payload)
        except ValueError:
            # Some operation is not strict JSON: each one is checked on its own, the others go.
            kept = []
            for position, body in sent:
                try:
                    _check_finite(body)
                    kept.append((position, body))
                except ValueError as exc:
                    answers[position] = exc
            sent, content = kept, None
            payload = {"ops": [body for _, body in sent], "atomic": False}
        if sent:
            call = Call("POST", "/store/batch", body=payload, content=content)
            replies = self._answers([ops[position] for position, _ in sent], await self.http.asend(call), atomic=False)
            for (position, _), reply in zip(sent, replies, strict=True):
                answers[position] = reply
        return answers

    def _call(self, ops: list[Op], embedding: _Embedding, *, atomic: bool) -> Call:
        bodies: list[dict[str, Any]] = []
        try:
            for position, op in enumerate(ops):
                bodies.append(self._body(op, position, embedding))
        except (ValueError, NotImplementedError):
            for body in bodies:  # a NaN in an earlier operation is the error, as the operations come
                _check_finite(body)
            raise
        payload = {"ops": bodies, "atomic": atomic}
        return Call("POST", "/store/batch", body=payload, content=_encoded(payload, bodies))

    def _answers(self, ops: list[Op], response: httpx.Response | None, *, atomic: bool) -> list[Any]:
        """Each operation's result; not atomic, a refused operation's place holds its error instead."""
        entries = response.json()["results"]
        answers: list[Any] = []
        for op, entry in zip(ops, entries, strict=True):
            if "error" in entry:
                body = entry["error"]
                error = error_class(status_code=body.get("status", 400))(
                    body.get("status", 400), body, "POST", self.base_url + "/store/batch"
                )
                if atomic:
                    raise error
                answers.append(error)
            else:
                answers.append(_result(op, entry.get("result")))
        return answers

    def _texts(self, op: PutOp) -> list[tuple[str, str]]:
        """(vector name, text) at the op's index paths, named as LangGraph's stores name them."""
        fields = self._fields if op.index is None else [(path, tokenize_path(path)) for path in op.index]
        named: list[tuple[str, str]] = []
        for path, tokens in fields:
            texts = get_text_at_path(op.value, tokens)
            if len(texts) > 1:
                named += [(f"{path}.{i}", text) for i, text in enumerate(texts)]
            elif texts:
                named.append((path, texts[0]))
        return named

    def _body(self, op: Op, position: int, embedding: _Embedding) -> dict[str, Any]:
        """One operation as the batch endpoint takes it."""
        if isinstance(op, GetOp):
            return {"op": "get", "namespace": list(op.namespace), "key": op.key, "refresh_ttl": op.refresh_ttl}
        if isinstance(op, PutOp):
            if op.value is None:
                return {"op": "delete", "namespace": list(op.namespace), "key": op.key}
            # NaN and infinity are looked for once, in the request's whole body (`_encoded`).
            body: dict[str, Any] = {"op": "put", "namespace": list(op.namespace), "key": op.key, "value": dict(op.value)}
            if op.index is not None:
                body["index"] = op.index
            if op.ttl is not None:
                body["ttl"] = op.ttl
            if position in embedding.texts:
                # Always sent with an index, even empty: the server's own embedder must not embed it otherwise.
                body["vectors"] = {name: embedding.vectors[text] for name, text in embedding.texts[position]}
                body["dims"] = self.index_config["dims"]
            return body
        if isinstance(op, SearchOp):
            body = {
                "op": "search",
                "namespace_prefix": list(op.namespace_prefix),
                "filter": op.filter,
                "limit": op.limit,
                "offset": op.offset,
                "query": op.query,
                "refresh_ttl": op.refresh_ttl,
            }
            if op.query in embedding.query_vectors:
                body["query_vector"] = embedding.query_vectors[op.query]
                body["dims"] = self.index_config["dims"]
            return body
        if isinstance(op, ListNamespacesOp):
            body = {"op": "list_namespaces", "max_depth": op.max_depth, "limit": op.limit, "offset": op.offset}
            for condition in op.match_conditions or ():
                if condition.match_type not in ("prefix", "suffix"):
                    raise ValueError(f"Unsupported match type: {condition.match_type!r}")
                if condition.match_type in body:
                    # The endpoint takes one prefix and one suffix, as the LangGraph server does.
                    raise NotImplementedError(f"Only one {condition.match_type} condition is supported.")
                body[condition.match_type] = list(condition.path)
            return body
        raise ValueError(f"Unknown operation type: {type(op).__name__}")

    def _queue(self) -> _Queue:
        loop = asyncio.get_running_loop()
        queue = self._queues.get(loop)
        if queue is None:
            queue = self._queues[loop] = _Queue(self)
        return queue

    # Closing.

    def close(self) -> None:
        self.http.close()

    async def aclose(self) -> None:
        queue = self._queues.pop(asyncio.get_running_loop(), None)
        if queue is not None:
            await queue.aclose()
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


class _Queue:
    """One event loop's single async calls, sent together (the module docstring says how)."""

    def __init__(self, store: MemoryAdminStore) -> None:
        self.store = store
        self.pending: deque[tuple[Op, asyncio.Future]] = deque()
        self.wake = asyncio.Event()
        self.slots = asyncio.Semaphore(store.max_requests)
        self.sending: set[asyncio.Task] = set()
        self.worker: asyncio.Task | None = None

    async def submit(self, op: Op) -> Result:
        future = asyncio.get_running_loop().create_future()
        self.pending.append((op, future))
        if self.worker is None or self.worker.done():
            self.worker = asyncio.get_running_loop().create_task(self._run())
        self.wake.set()
        return await future

    async def _run(self) -> None:
        while True:
            await self.wake.wait()
            self.wake.clear()
            # Every coroutine already running reaches its call before the first request goes.
            await asyncio.sleep(0)
            while self.pending:
                await self.slots.acquire()
                chunk = []
                while self.pending and len(chunk) < self.store.batch_size:
                    op, future = self.pending.popleft()
                    if not future.done():  # its caller was cancelled
                        chunk.append((op, future))
                if not chunk:
                    self.slots.release()
                    continue
                task = asyncio.get_running_loop().create_task(self._send(chunk))
                self.sending.add(task)
                task.add_done_callback(self.sending.discard)

    async def _send(self, chunk: list[tuple[Op, asyncio.Future]]) -> None:
        try:
            answers = await self.store._asend([op for op, _ in chunk], atomic=False)
        except asyncio.CancelledError:
            for _, future in chunk:
                future.cancel()
            raise
        except Exception as exc:  # noqa: BLE001 - the request failed: so did each call it carried
            answers = [exc] * len(chunk)
        finally:
            self.slots.release()
        for (_, future), answer in zip(chunk, answers, strict=True):
            if future.done():
                continue
            if isinstance(answer, BaseException):
                future.set_exception(answer)
            else:
                future.set_result(answer)

    async def aclose(self) -> None:
        tasks = [task for task in (self.worker, *self.sending) if task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


__all__ = ["MemoryAdminStore", "MemoryAdminStoreError", "StoreForbiddenError", "StoreInvalidError"]
