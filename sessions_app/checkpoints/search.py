"""Thread search: the one filter behind every listing of threads (docs/checkpoints.md, "Thread search").

LangGraph's `POST /threads/search` and `POST /threads/count`, the API's `GET /threads`,
the dashboard's thread list and its bulk actions ("everything matching this filter")
all select threads with `thread_search_queryset`, so a filter means the same thing on
every surface. It lives with the checkpoints because a thread's status (idle,
interrupted, error) is read from its latest checkpoint and its pending writes (status.py keeps it on the thread row).

Visibility is `memoryadmin.policy.restrict` (members see their own threads), and the
owner filter is `policy.filter_by_owner` (ignored for members, so it never widens
what they see).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from typing import Any
from urllib.parse import urlencode

from django.db.models import Count, OuterRef, Q, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce, Lower
from django.utils import timezone

from memoryadmin import policy
from memoryadmin import params as qp
from memoryadmin.json import loads as json_loads
from memoryadmin.jsoncheck import text_input_check

from ..threads.models import Thread
from .containment import json_contains, json_filter, sql_is_exact
from .models import Checkpoint

THREAD_STATUSES = ("idle", "busy", "interrupted", "error")
# What a search may be sorted by, and the column each sorts on.
SORT_COLUMNS = {
    "updated_at": "updated_at",
    "created_at": "created_at",
    "active_count": "active_count",
    "title": Lower("title"),
    "thread_id": "thread_id",
    "status": "lg_status",
}
# The dashboard's names for them (`?sort=`), in the order its menu lists them.
LIST_SORTS = {"updated": "updated_at", "created": "created_at", "messages": "active_count", "title": "title"}
ORDERS = ("desc", "asc")
DATE_FIELDS = ("created_from", "created_to", "updated_from", "updated_to")
_DAY_TEXT = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
META_PAIRS_MAX = 10
META_KEY_MAX = 100


@dataclass(frozen=True)
class ThreadFilter:
    """What a thread search keeps; every field empty keeps every visible thread.

    `q`: text in the title, thread id or agent code (any case); `metadata`: an object
    the thread's metadata contains (JSONB containment: nested objects by key, arrays by
    element); dates are whole days in the server's time zone, both ends included.
    """

    q: str = ""
    status: str = ""
    agent_code: str = ""
    owner: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    ids: tuple[str, ...] | None = None
    created_from: date | None = None
    created_to: date | None = None
    updated_from: date | None = None
    updated_to: date | None = None

    @property
    def is_empty(self) -> bool:
        return self == ThreadFilter()

    def as_audit(self) -> dict[str, Any]:
        """The fields given, as JSON values (an audit event's filter)."""
        found: dict[str, Any] = {}
        for name, value in vars(self).items():
            if value in (None, "", {}, ()):
                continue
            found[name] = list(value) if name == "ids" else value.isoformat() if isinstance(value, date) else value
        return found


def _text(value: Any, name: str, limit: int) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise qp.invalid(name, "must be a string.")
    return text_input_check(value.strip()[:limit], name)


def thread_filter_parse(
    *,
    q: Any = None,
    status: Any = None,
    agent_code: Any = None,
    owner: Any = None,
    metadata: Any = None,
    ids: list[str] | None = None,
    created_from: Any = None,
    created_to: Any = None,
    updated_from: Any = None,
    updated_to: Any = None,
    agent_field: str = "agent_code",
) -> ThreadFilter:
    """A `ThreadFilter` from request values (query-string text or JSON); each bad one a 400 naming it.

    `metadata` is a JSON object or its text; `agent_field` is how the caller names the
    agent filter in its errors (the dashboard says `agent`).
    """
    errors = qp.Collected()
    given = dict(zip(DATE_FIELDS, (created_from, created_to, updated_from, updated_to), strict=True))
    days = {name: errors.take(lambda name=name: qp.parse_date(given[name], name=name)) for name in DATE_FIELDS}
    for start, end in (("created_from", "created_to"), ("updated_from", "updated_to")):
        if days[start] and days[end] and days[end] < days[start]:
            errors.add(end, f"must not be before {start}.")
    found = ThreadFilter(
        q=errors.take(lambda: _text(q, "q", 200), ""),
        status=errors.take(lambda: qp.parse_choice(None if status == "" else status, "status", THREAD_STATUSES, ""), ""),
        agent_code=errors.take(lambda: _text(agent_code, agent_field, 64), ""),
        owner=errors.take(lambda: _text(owner, "owner", 150), ""),
        metadata=errors.take(lambda: qp.parse_json_object(metadata, "metadata"), {}) if metadata not in (None, "") else {},
        ids=tuple(ids) if ids is not None else None,
        **days,
    )
    errors.raise_any()
    return found


# The filter's names in the API (a search body, a query string).
FILTER_FIELDS = ("q", "status", "agent_code", "owner", "metadata", *DATE_FIELDS)


def thread_filter_of(data: Mapping[str, Any], *, ids: list[str] | None = None) -> ThreadFilter:
    """The filter fields of an API request (a JSON body or a query string), by FILTER_FIELDS' names.

    Stricter than a form: a status or a date is absent only when left out (or null), so
    a blank or padded one is a 400 as the schema says, where the dashboard's blank field is no filter.
    """
    if data.get("status") == "":
        raise qp.invalid("status", f"must be one of {', '.join(THREAD_STATUSES)}.")
    for name in DATE_FIELDS:
        value = data.get(name)
        if value is not None and not (isinstance(value, str) and _DAY_TEXT.fullmatch(value)):
            raise qp.invalid(name, "must be a date (YYYY-MM-DD).")
    return thread_filter_parse(ids=ids, **{name: data.get(name) for name in FILTER_FIELDS})


def metadata_pairs_parse(pairs: list[Any], name: str = "meta") -> dict[str, Any]:
    """`key=value` texts (the dashboard's metadata filter) as one object to contain.

    The value is read as JSON when it is a number, true, false, null or a quoted string
    (`priority=2`, `vip=true`, `code="42"`), else taken as text (`env=prod`). Blank
    entries are skipped; a key given twice is an error.
    """
    found: dict[str, Any] = {}
    for pair in pairs:
        if not isinstance(pair, str) or not pair.strip():
            continue
        text_input_check(pair, name)
        key, sep, raw = pair.strip().partition("=")
        key = key.strip()
        if not sep or not key:
            raise qp.invalid(name, f"must be key=value (got {pair[:60]!r}).")
        if len(key) > META_KEY_MAX:
            raise qp.invalid(name, f"keys are at most {META_KEY_MAX} characters.")
        if key in found:
            raise qp.invalid(name, f"names the key {key!r} twice.")
        raw = raw.strip()
        try:
            value = json_loads(raw, depth_max=1, field=name)
        except ValueError:
            value = raw
        found[key] = value if value is None or isinstance(value, str | int | float | bool) else raw
    if len(found) > META_PAIRS_MAX:
        raise qp.invalid(name, f"at most {META_PAIRS_MAX} key=value pairs.")
    return found


def threads_with_checkpoints(qs: QuerySet[Thread]) -> QuerySet[Thread]:
    """Threads annotated with their latest root checkpoint's id (`latest_checkpoint`) and their
    checkpoint count (`checkpoint_count`), for the API's Thread shape. Their status is the
    row's own `lg_status` (status.py); the count, whose cost grows with the thread's
    checkpoints, is read only here."""
    latest = Checkpoint.objects.filter(thread=OuterRef("pk"), checkpoint_ns="").order_by("-id")
    count = (
        Checkpoint.objects.filter(thread=OuterRef("pk")).order_by().values("thread").annotate(n=Count("id")).values("n")
    )
    return qs.annotate(
        latest_checkpoint=Subquery(latest.values("pk")[:1]),
        checkpoint_count=Coalesce(Subquery(count[:1]), Value(0)),
    )


def _day_start(day: date) -> datetime:
    return timezone.make_aware(datetime.combine(day, time.min))


# A day this near either end of the calendar bounds nothing (and its midnight in another
# zone would not be a datetime): the range is left open on that side.
_FIRST_DAY, _LAST_DAY = date.min + timedelta(days=2), date.max - timedelta(days=2)


def _date_range(qs: QuerySet, column: str, start: date | None, end: date | None) -> QuerySet:
    if start and start > _FIRST_DAY:
        qs = qs.filter(**{f"{column}__gte": _day_start(min(start, _LAST_DAY))})
    if end and end < _LAST_DAY:
        qs = qs.filter(**{f"{column}__lt": _day_start(max(end, _FIRST_DAY) + timedelta(days=1))})
    return qs


def thread_search_queryset(
    *,
    actor,
    filters: ThreadFilter,
    sort: str = "updated_at",
    order: str = "desc",
    checkpoints: bool = False,
) -> QuerySet[Thread]:
    """The visible threads `filters` keeps, sorted (ties broken by the newest row first, or last).

    With `checkpoints`, annotated by `threads_with_checkpoints`; the status is the row's own
    `lg_status` (status.py), which an index serves for the statuses other than idle. Exact on both databases: PostgreSQL
    filters metadata by `@>`; SQLite narrows by its JSON paths and, when those cannot
    decide (booleans, arrays, odd keys), finishes with the same containment rule in
    Python in one more read, so counts and pages agree with PostgreSQL's.
    """
    if sort not in SORT_COLUMNS:
        raise qp.invalid("sort_by", f"must be one of {', '.join(SORT_COLUMNS)}.")
    if order not in ORDERS:
        raise qp.invalid("sort_order", "must be one of asc, desc.")
    qs = Thread.objects.visible_to(actor).select_related("owner")
    if checkpoints:
        qs = threads_with_checkpoints(qs)
    if filters.ids is not None:
        qs = qs.filter(thread_id__in=filters.ids)
    if filters.q:
        q = filters.q
        qs = qs.filter(Q(title__icontains=q) | Q(thread_id__icontains=q) | Q(agent_code__icontains=q))
    if filters.agent_code:
        qs = qs.filter(agent_code=filters.agent_code)
    qs = policy.filter_by_owner(qs, actor, filters.owner)
    if filters.status:
        qs = qs.filter(lg_status=filters.status)
    qs = _date_range(qs, "created_at", filters.created_from, filters.created_to)
    qs = _date_range(qs, "updated_at", filters.updated_from, filters.updated_to)
    qs, exact_in_python = json_filter(qs, "metadata", filters.metadata)
    if exact_in_python and not sql_is_exact(filters.metadata):
        pattern = filters.metadata
        kept = [
            pk
            for pk, document in qs.order_by().values_list("pk", "metadata").iterator(chunk_size=500)
            if json_contains(document, pattern)
        ]
        qs = qs.filter(pk__in=kept)
    column = SORT_COLUMNS[sort]
    if order == "desc":
        return qs.order_by(column.desc() if hasattr(column, "desc") else f"-{column}", "-id")
    return qs.order_by(column.asc() if hasattr(column, "asc") else column, "id")


# --- the dashboard's thread list -----------------------------------------------------------------


@dataclass(frozen=True)
class ThreadListQuery:
    """The thread list's query string, parsed: the filter, the sort and its direction."""

    filters: ThreadFilter
    meta: tuple[str, ...] = ()
    sort: str = "updated"
    order: str = "desc"

    def filter_fields(self) -> list[tuple[str, str]]:
        """The filter as (name, value) query-string pairs, defaults left out (bulk forms carry these)."""
        f = self.filters
        pairs = [("q", f.q), ("status", f.status), ("agent", f.agent_code), ("owner", f.owner)]
        pairs += [(name, getattr(f, name).isoformat() if getattr(f, name) else "") for name in DATE_FIELDS]
        pairs += [("meta", pair) for pair in self.meta]
        return [(name, value) for name, value in pairs if value]

    def fields(self) -> list[tuple[str, str]]:
        """Filter and sort as query-string pairs, defaults left out: a saved view, a shared link."""
        pairs = self.filter_fields()
        if self.sort != "updated":
            pairs.append(("sort", self.sort))
        if self.order != "desc":
            pairs.append(("order", self.order))
        return pairs

    def querystring(self) -> str:
        return urlencode(self.fields())

    def sorted_by(self, sort: str) -> "ThreadListQuery":
        """The same filter sorted by `sort`: a column header's link. The column sorted already turns
        its order round; another starts descending (ascending for the title, A to Z)."""
        if sort == self.sort:
            order = "asc" if self.order == "desc" else "desc"
        else:
            order = "asc" if sort == "title" else "desc"
        return ThreadListQuery(filters=self.filters, meta=self.meta, sort=sort, order=order)


def _values(data: Mapping[str, Any], name: str) -> list[Any]:
    if hasattr(data, "getlist"):
        return data.getlist(name)
    value = data.get(name)
    return value if isinstance(value, list) else [] if value is None else [value]


def thread_list_query_parse(data: Mapping[str, Any]) -> ThreadListQuery:
    """The thread list's parameters (a QueryDict, or a dict as a bulk job stores it); a bad one is a 400 naming it.

    `q`, `status`, `agent`, `owner`, `created_from`/`created_to`, `updated_from`/`updated_to`
    (YYYY-MM-DD), `meta` (repeated `key=value`), `sort` (updated, created, messages,
    title) and `order` (desc, asc).
    """
    errors = qp.Collected()
    meta = tuple(pair.strip() for pair in _values(data, "meta") if isinstance(pair, str) and pair.strip())
    metadata = errors.take(lambda: metadata_pairs_parse(list(meta)), {})
    sort = errors.take(lambda: qp.parse_choice(data.get("sort") or None, "sort", tuple(LIST_SORTS), "updated"))
    order = errors.take(lambda: qp.parse_choice(data.get("order") or None, "order", ORDERS, "desc"))
    filters = errors.take(
        lambda: thread_filter_parse(
            q=data.get("q"),
            status=data.get("status"),
            agent_code=data.get("agent"),
            owner=data.get("owner"),
            metadata=metadata,
            agent_field="agent",
            **{name: data.get(name) for name in DATE_FIELDS},
        )
    )
    errors.raise_any()  # every bad parameter named at once
    return ThreadListQuery(filters=filters, meta=meta, sort=sort, order=order)


def thread_list_queryset(*, actor, query: ThreadListQuery) -> QuerySet[Thread]:
    """The dashboard's thread list (and its bulk selection): `thread_search_queryset` with the list's sort."""
    return thread_search_queryset(actor=actor, filters=query.filters, sort=LIST_SORTS[query.sort], order=query.order)


def parse_sort_by(value: Any) -> str:
    """LangGraph's `sort_by` (its four fields and memoryadmin's `title`, `active_count`); `created_at` when absent."""
    return qp.parse_choice(value, "sort_by", tuple(SORT_COLUMNS), "created_at")

