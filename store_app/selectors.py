"""Reads of the long-term store. Each takes the acting user; memoryadmin.policy decides what they see.

Members see their own items only; operators and admins see every item
(docs/store.md, rule ST3), and their reads of other users' values are audit events (one
per item, listing or search within the read window). Expired items are invisible to
everyone. Every function here is a bounded number of queries whatever the store holds
(docs/store.md, rule ST9).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from django.core.exceptions import EmptyResultSet
from django.db import connections
from django.conf import settings
from django.db.models import Count, FloatField, Max, Q, Value, prefetch_related_objects
from django.utils import timezone

from memoryadmin import policy
from memoryadmin.errors import NotFound
from memoryadmin.params import parse_int

from .expressions import (
    NamespaceHead,
    NamespaceLabel,
    ScopedFirst,
    TextMatch,
    TextScore,
    ValueFilter,
    conditions_spec,
)
from . import embedders, fastpath, semantic
from .matching import filter_validate, query_terms
from .models import StoreItem
from .namespaces import (
    MAX_DEPTH,
    SEPARATOR,
    Namespace,
    key_validate,
    literal_head,
    namespace_to_path,
    namespace_validate,
    pattern_regex,
)
from .vectors import dims_validate, vector_validate

SEARCH_LIMIT_MAX = 1000
NAMESPACES_LIMIT_MAX = 1000
# Past this an offset is a mistake, and a larger one would overflow SQL's bigint.
OFFSET_MAX = 1_000_000_000


def _is_postgresql(qs) -> bool:
    return connections[qs.db].vendor == "postgresql"


def _readable(item: StoreItem, actor, action: str) -> StoreItem:
    """The item if the policy lets the actor read it (else 403); another user's item read is audited."""
    policy.ensure_may_read(actor, owner_id=item.owner_id, target=item.target, action=action)
    policy.record_read(actor, owner=item.owner, target=item.target, action=action)
    return item


def store_item_get_for_read(*, actor, namespace: Any, key: Any, now=None) -> StoreItem | None:
    """The live item at (namespace, key), or None when there is none (LangGraph answers null).

    Another member's item is a 403; operators and admins read every item.
    """
    namespace = namespace_validate(namespace)
    key = key_validate(key)
    if not namespace:
        return None
    path = namespace_to_path(namespace)
    found = fastpath.items_get([(path, key)], now=now or timezone.now())
    if found is None:
        found = StoreItem.objects.live(now).select_related("owner").filter(namespace_path=path, key=key)[:1]
    item = next(iter(found), None)
    if item is None:
        return None
    return _readable(item, actor, "store.read")


# SQLite nests an OR chain one level per term and stops at a depth of 1000: gets go 200 at a time.
GET_MANY_CHUNK = 200


def store_items_get_many(*, keys: list[tuple[Namespace, str]], now=None) -> dict[tuple[Namespace, str], StoreItem]:
    """The live items at many (namespace, key) pairs, checked already: one prepared statement on
    PostgreSQL (store_app/fastpath.py), one query per 200 pairs elsewhere.

    Who may read each one is the caller's to decide, per item, with `store_item_readable`.
    """
    wanted = list(dict.fromkeys((namespace, key) for namespace, key in keys if namespace))
    found: dict[tuple[Namespace, str], StoreItem] = {}
    fast = fastpath.items_get([(namespace_to_path(namespace), key) for namespace, key in wanted], now=now or timezone.now())
    if fast is not None:
        return {(item.namespace, item.key): item for item in fast}
    for start in range(0, len(wanted), GET_MANY_CHUNK):
        condition = Q()
        for namespace, key in wanted[start : start + GET_MANY_CHUNK]:
            condition |= Q(namespace_path=namespace_to_path(namespace), key=key)
        for item in StoreItem.objects.live(now).select_related("owner").filter(condition):
            found[(item.namespace, item.key)] = item
    return found


def store_item_readable(*, actor, item: StoreItem) -> StoreItem:
    """The item, if the actor may read it (own item, or operator or admin); else 403."""
    return _readable(item, actor, "store.read")


@dataclass(frozen=True)
class SearchRequest:
    namespace_prefix: Namespace
    filter_spec: str
    has_filter: bool
    terms: tuple[str, ...]
    limit: int
    offset: int
    # The query as given, and a vector to rank by (the caller's, or the server embedder's).
    query: str | None = None
    vector: tuple[float, ...] | None = None
    dims: int | None = None

    @property
    def wants_embedding(self) -> bool:
        """A text query the server's embedder should turn into the vector to rank by."""
        return self.vector is None and bool(self.query) and embedders.configured() is not None

    def audit_filters(self) -> dict[str, Any]:
        """The search as the audit log names it."""
        return {
            "namespace_prefix": namespace_to_path(self.namespace_prefix),
            "filter": self.filter_spec if self.has_filter else "",
            "query": " ".join(self.terms),
            "limit": self.limit,
            "offset": self.offset,
        }


def store_search_validate(
    *,
    namespace_prefix: Any = (),
    filter: Any = None,
    query: Any = None,
    limit: Any = 10,
    offset: Any = 0,
    query_vector: Any = None,
    dims: Any = None,
) -> SearchRequest:
    """Check a search's parameters; 400 naming the first bad one, before any query runs.

    `query_vector` (with its `dims`) is the caller's embedding of `query`: the
    search then ranks by meaning (rule ST10).
    """
    prefix = namespace_validate(namespace_prefix if namespace_prefix is not None else [], field="namespace_prefix")
    conditions = filter_validate(filter)
    terms = query_terms(query)
    vector = None
    if query_vector is not None:
        dims = dims_validate(dims) if dims is not None else None
        vector = tuple(vector_validate(query_vector, dims=dims, field="query_vector"))
        dims = len(vector)
    return SearchRequest(
        namespace_prefix=prefix,
        filter_spec=conditions_spec(conditions),
        has_filter=bool(conditions),
        terms=terms,
        limit=parse_int(limit, name="limit", default=10, minimum=0, maximum=SEARCH_LIMIT_MAX),
        offset=parse_int(offset, name="offset", default=0, minimum=0, maximum=OFFSET_MAX),
        query=query or None,
        vector=vector,
        dims=dims if vector is not None else None,
    )


def store_search_embed(requests: list[SearchRequest]) -> list[SearchRequest]:
    """The requests with the server embedder's vectors of their text queries, in one call (distinct texts once)."""
    texts = list(dict.fromkeys(request.query for request in requests if request.wants_embedding))
    if not texts:
        return requests
    by_text = dict(zip(texts, embedders.embed(texts), strict=True))
    dims = settings.MEMORYADMIN_STORE_EMBED_DIMS
    return [
        replace(request, vector=tuple(by_text[request.query]), dims=dims) if request.wants_embedding else request
        for request in requests
    ]


def store_item_search(
    *, actor, request: SearchRequest, now=None, extra: int = 0, with_owner: bool = False, matching_only: bool = False
) -> list[StoreItem]:
    """`_search_rows`, and the read of other users' items as one audit event (memoryadmin.policy)."""
    items = _search_rows(actor=actor, request=request, now=now, extra=extra, with_owner=with_owner, matching_only=matching_only)
    policy.record_bulk_read(actor, action="store.search", kind="store", rows=items[: request.limit], filters=request.audit_filters())
    return items


def _search_rows(
    *, actor, request: SearchRequest, now=None, extra: int = 0, with_owner: bool = False, matching_only: bool = False
) -> list[StoreItem]:
    """Live items under the namespace prefix that the actor may see (rules ST6 and ST10).

    Without a query: newest first (updated_at), `score` None, one query. With
    a query vector (the caller's, or the server embedder's of a text query):
    ranked by meaning (`store_app.semantic`), two queries. With a text query
    otherwise: the items sharing a word with it first, best `score` first,
    newest first among equals; then, as LangGraph's stores list every item
    whatever the query, the others newest first with score 0 (one query).
    `matching_only` leaves out what the query does not reach: items
    sharing no word with a text query, items without a vector in a semantic
    search (a context built from memories wants relevance, not a listing).
    `extra` fetches that many rows past the limit (a page can tell a next page
    exists); `with_owner` joins the owner (pages show it; the API
    does not, and the join keeps PostgreSQL from pushing the top-N sort into
    its parallel workers).
    """
    if request.wants_embedding:
        request = store_search_embed([request])[0]
    qs = StoreItem.objects.visible_to(actor).live(now).under(request.namespace_prefix)
    by_words = bool(request.terms) and request.vector is None
    if request.namespace_prefix and (request.has_filter or by_words) and _is_postgresql(qs):
        # The subtree first, then the filter or the query over it: a subtree is
        # usually one tenant's data, while the GIN indexes over the whole store
        # can match hundreds of thousands of rows for a common value (the cost
        # is a subtree's worth of ids when one prefix holds most of the store).
        # Without a prefix the GIN index is the way in and stays so.
        qs = StoreItem.objects.filter(ScopedFirst(qs))
    if with_owner:
        qs = qs.select_related("owner")
    if request.has_filter:
        qs = qs.filter(ValueFilter(request.filter_spec))
    want = request.limit + extra
    if request.limit == 0 and not extra:
        return []
    if request.vector is not None:
        items = _semantic_page(qs, request, want)
        return [item for item in items if item.score is not None] if matching_only else items
    if not request.terms:
        items = list(qs.order_by("-updated_at", "-id")[request.offset : request.offset + want])
        for item in items:
            item.score = None
        return items
    if matching_only:
        qs = qs.filter(TextMatch(request.terms)).annotate(score=TextScore(request.terms))
        return list(qs.order_by("-score", "-updated_at", "-id")[request.offset : request.offset + want])
    return _text_page(qs, request, want, with_owner=with_owner)


def _text_page(qs, request: SearchRequest, want: int, *, with_owner: bool) -> list[StoreItem]:
    """Items sharing a word with the query by score, then every other item newest first, score 0; one query.

    SQLite's score is 0 exactly for an item without the query's words, so one
    ordering by score does both. PostgreSQL answers the two parts apart, each
    on its own index (the GIN one for the words, updated_at for the rest),
    joined by UNION ALL; the owners of a page are then read in one more query.
    """
    if not _is_postgresql(qs):
        ranked = qs.annotate(score=TextScore(request.terms)).order_by("-score", "-updated_at", "-id")
        return list(ranked[request.offset : request.offset + want])
    match = TextMatch(request.terms)
    upto = request.offset + want
    base = qs.select_related(None)
    matching = (
        base.filter(match)
        .annotate(score=TextScore(request.terms), part=Value(0))
        .order_by("-score", "-updated_at", "-id")[:upto]
    )
    others = (
        base.exclude(match)
        .annotate(score=Value(0.0, output_field=FloatField()), part=Value(1))
        .order_by("-updated_at", "-id")[:upto]
    )
    items = list(matching.union(others, all=True).order_by("part", "-score", "-updated_at", "-id")[request.offset : upto])
    if with_owner:
        prefetch_related_objects(items, "owner")
    return items


def _semantic_page(qs, request: SearchRequest, want: int) -> list[StoreItem]:
    ranked = semantic.ranked_ids(
        qs=qs, prefix=request.namespace_prefix, vector=list(request.vector), dims=request.dims, limit=want, offset=request.offset
    )
    found = qs.in_bulk([item_id for item_id, _ in ranked])
    items = []
    for item_id, score in ranked:
        item = found.get(item_id)
        if item is not None:  # deleted between the two queries
            item.score = score
            items.append(item)
    return items


def store_item_list(*, actor, namespace: Namespace, limit: int, offset: int = 0, now=None) -> list[StoreItem]:
    """The live items of exactly this namespace, newest first (one page plus one row)."""
    items = list(
        StoreItem.objects.visible_to(actor)
        .live(now)
        .in_namespace(namespace)
        .select_related("owner")
        .order_by("-updated_at", "-id")[offset : offset + limit + 1]
    )
    filters = {"namespace": namespace_to_path(namespace), "limit": limit, "offset": offset}
    policy.record_bulk_read(actor, action="store.list", kind="store", rows=items[:limit], filters=filters)
    return items


def _namespace_pattern(value: Any, field: str) -> Namespace:
    return namespace_validate(value if value is not None else [], field=field)


def store_namespace_list(
    *,
    actor,
    prefix: Any = None,
    suffix: Any = None,
    max_depth: Any = None,
    limit: Any = 100,
    offset: Any = 0,
    now=None,
) -> list[Namespace]:
    """Distinct namespaces of the actor's visible live items, sorted by dotted path, one query.

    LangGraph's rules: `prefix` and `suffix` match whole labels and "*" stands for
    any one label; `max_depth` truncates each namespace to that many labels
    (duplicates merge); `limit` and `offset` page the sorted result.
    """
    prefix = _namespace_pattern(prefix, "prefix")
    suffix = _namespace_pattern(suffix, "suffix")
    # Blank (null, "") is no limit, as leaving it out is; anything else an integer from 1.
    depth = parse_int(max_depth, name="max_depth", default=None, minimum=1, maximum=MAX_DEPTH)
    limit = parse_int(limit, name="limit", default=100, minimum=0, maximum=NAMESPACES_LIMIT_MAX)
    offset = parse_int(offset, name="offset", default=0, minimum=0, maximum=OFFSET_MAX)
    if limit == 0:
        return []
    head = literal_head(prefix)
    visible = StoreItem.objects.visible_to(actor).live(now)
    if depth == len(prefix) + 1 and head == prefix and not suffix and _is_postgresql(visible):
        # One level below a literal prefix (the root's first labels among them):
        # the tree's walk, whose cost follows the children, not the items.
        paths = _level_postgresql(visible, prefix, limit=limit, offset=offset)
        return [tuple(path.split(SEPARATOR)) for path in paths]
    qs = visible.under(head)
    if len(head) < len(prefix):
        qs = qs.filter(namespace_path__regex=pattern_regex(prefix, match="prefix"))
    if suffix:
        qs = qs.filter(namespace_path__regex=pattern_regex(suffix, match="suffix"))
    paths = (
        qs.annotate(ns=NamespaceHead(depth))
        .order_by("ns")
        .values_list("ns", flat=True)
        .distinct()[offset : offset + limit]
    )
    return [tuple(path.split(SEPARATOR)) for path in paths]


@dataclass(frozen=True)
class NamespaceNode:
    """A child in the namespace tree: its subtree's item count, and whether it has children."""

    namespace: Namespace
    items: int
    has_children: bool

    @property
    def label(self) -> str:
        return self.namespace[-1]

    @property
    def path(self) -> str:
        return namespace_to_path(self.namespace)


def store_namespace_children(
    *, actor, namespace: Namespace = (), limit: int = 500, offset: int = 0, now=None
) -> tuple[list[NamespaceNode], bool]:
    """The next level under `namespace` with item counts, in one query.

    This is list_namespaces with max_depth = depth + 1, counted: one node per
    child label, in code point order. Returns a page of nodes (`offset`,
    `limit`) and whether more children follow. On PostgreSQL the cost follows
    the number of children, and items are counted for the page's children only
    (see `_WALK_SQL`); SQLite groups the subtree's items.
    """
    depth = len(namespace)
    qs = StoreItem.objects.visible_to(actor).live(now)
    if _is_postgresql(qs):
        rows = _children_postgresql(qs, namespace, limit=limit, offset=offset)
    else:
        rows = [
            (row["label"], row["items"], row["deepest"])
            for row in qs.under(namespace)
            .filter(depth__gt=depth)
            .annotate(label=NamespaceLabel(depth + 1))
            .values("label")
            .annotate(items=Count("id"), deepest=Max("depth"))
            .order_by("label")[offset : offset + limit + 1]
        ]
    nodes = [
        NamespaceNode(namespace=(*namespace, label), items=items, has_children=deepest > depth + 1)
        for label, items, deepest in rows[:limit]
    ]
    return nodes, len(rows) > limit


# The next level of the tree on PostgreSQL, in one statement. `walk` is a
# loose index scan of the namespace_path pattern-ops index (the owner's
# composite one for a member): from one child's first path it jumps past that
# child's subtree (to head || '/', since '/' follows '.') with one index probe,
# so it reads a row or two per child however many items each holds. A path
# equal to the child itself (items at the child's own level) is stepped over
# first, because paths of a longer label ("a-b.x") sort between "a" and "a.x";
# `children` merges a child met twice that way. `page` puts the children in
# code point order (~<~ compares bytes, and UTF-8 keeps code point order; a
# COLLATE "C" instead would keep `counts` off the index, whose collation is
# the database's) and keeps one page plus one row. `counts` counts the live
# visible items of each child of that page only, over the range [head, head/),
# which holds the child's subtree and the few paths of longer labels the
# filter drops. {visible} is the caller's visibility and liveness filter
# compiled from the queryset, so ownership stays decided by
# StoreItem.objects.visible_to().
_WALK_PROBE = (
    "(SELECT namespace_path::text FROM store_app_storeitem WHERE namespace_path::text {op} {bound}{upper}"
    " AND {visible} ORDER BY namespace_path::text USING ~<~ LIMIT 1)"
)
_WALK_HEAD = "(%s || split_part(substr({path}, %s), '.', 1))"
_WALK_SQL = """
WITH RECURSIVE walk(path) AS (
    SELECT {first}
  UNION ALL
    SELECT CASE WHEN walk.path = {head} THEN {past_head} ELSE {past_subtree} END
    FROM walk WHERE walk.path IS NOT NULL
),
children AS (
    SELECT DISTINCT {head} AS head FROM walk WHERE walk.path IS NOT NULL
)
"""
_CHILDREN_SQL = """,
page AS (
    SELECT head FROM children ORDER BY head USING ~<~ OFFSET %s LIMIT %s
)
SELECT page.head, counts.items, counts.deepest
FROM page CROSS JOIN LATERAL (
    SELECT count(*) AS items, max(depth) AS deepest FROM store_app_storeitem
    WHERE namespace_path::text ~>=~ page.head AND namespace_path::text ~<~ (page.head || '/')
      AND (namespace_path::text = page.head OR namespace_path::text ~>=~ (page.head || '.'))
      AND {visible}
) AS counts
ORDER BY page.head USING ~<~
"""
# list_namespaces one level below a literal prefix: the children, and the prefix
# itself when it holds items (max_depth keeps a shorter namespace whole); it
# sorts first, being a prefix of every child's path.
_LEVEL_SQL = """
SELECT head FROM (
    SELECT head FROM children
    UNION ALL
    SELECT %s WHERE EXISTS (SELECT 1 FROM store_app_storeitem WHERE namespace_path::text = %s AND {visible})
) AS level
ORDER BY head USING ~<~ OFFSET %s LIMIT %s
"""


@dataclass(frozen=True)
class _Walk:
    sql: str
    params: list
    visible: str
    visible_params: list


def _level_walk(qs, namespace: Namespace) -> _Walk | None:
    """`_WALK_SQL` for the level under `namespace` (see above), None when the actor sees nothing."""
    connection = connections[qs.db]
    try:
        visible, visible_params = qs.query.get_compiler(connection=connection).compile(qs.query.where)
    except EmptyResultSet:
        return None
    visible, visible_params = visible or "TRUE", list(visible_params)
    path = namespace_to_path(namespace)
    low = path + SEPARATOR if namespace else ""
    upper, upper_params = (" AND namespace_path::text ~<~ %s", [path + "/"]) if namespace else ("", [])

    def probe(op: str, bound: str, bound_params: list) -> tuple[str, list]:
        sql = _WALK_PROBE.format(op=op, bound=bound, upper=upper, visible=visible)
        return sql, [*bound_params, *upper_params, *visible_params]

    head_params = [low, len(low) + 1]
    head = _WALK_HEAD.format(path="walk.path")
    first, first_params = probe("~>=~", "%s", [low])
    past_head, past_head_params = probe("~>~", head, head_params)
    past_subtree, past_subtree_params = probe("~>=~", f"({head} || '/')", head_params)
    sql = _WALK_SQL.format(first=first, head=head, past_head=past_head, past_subtree=past_subtree)
    params = [*first_params, *head_params, *past_head_params, *past_subtree_params, *head_params]
    return _Walk(sql=sql, params=params, visible=visible, visible_params=visible_params)


def _children_postgresql(qs, namespace: Namespace, *, limit: int, offset: int) -> list[tuple[str, int, int]]:
    """(label, items, deepest) of a page of children plus one row, by `_CHILDREN_SQL`."""
    walk = _level_walk(qs, namespace)
    if walk is None:
        return []
    sql = walk.sql + _CHILDREN_SQL.format(visible=walk.visible)
    params = [*walk.params, offset, limit + 1, *walk.visible_params]
    cut = len(namespace_to_path(namespace) + SEPARATOR) if namespace else 0
    with connections[qs.db].cursor() as cursor:
        cursor.execute(sql, params)
        return [(head[cut:], items, deepest) for head, items, deepest in cursor.fetchall()]


def _level_postgresql(qs, namespace: Namespace, *, limit: int, offset: int) -> list[str]:
    """Dotted paths of one page of list_namespaces at max_depth = len(namespace) + 1, by `_LEVEL_SQL`."""
    walk = _level_walk(qs, namespace)
    if walk is None:
        return []
    path = namespace_to_path(namespace)
    sql = walk.sql + _LEVEL_SQL.format(visible=walk.visible)
    params = [*walk.params, path, path, *walk.visible_params, offset, limit]
    with connections[qs.db].cursor() as cursor:
        cursor.execute(sql, params)
        return [head for (head,) in cursor.fetchall()]


def store_namespace_count(*, actor, namespace: Namespace, now=None) -> dict[str, int]:
    """Live items the actor sees exactly in the namespace and in its whole subtree (one query)."""
    qs = StoreItem.objects.visible_to(actor).live(now).under(namespace)
    path = namespace_to_path(namespace)
    here = Q(namespace_path=path) if namespace else Q(pk__in=[])
    counts = qs.aggregate(subtree=Count("id"), here=Count("id", filter=here))
    return {"subtree": counts["subtree"], "here": counts["here"]}


def store_size(*, actor, now=None) -> int:
    """How many live items the actor can see (LangGraph's Store.size)."""
    return StoreItem.objects.visible_to(actor).live(now).count()


def store_subtree_impact(*, actor, namespace: Namespace, now=None) -> dict[str, int]:
    """Admin: what deleting the subtree would remove: every item below, any owner, expired included."""
    policy.ensure_admin(
        actor, target=f"store:{namespace_to_path(namespace)}", action="store.clear", message="Only an admin may delete store items."
    )
    now = now or timezone.now()
    counts = StoreItem.objects.under(namespace).aggregate(
        items=Count("id"),
        expired=Count("id", filter=Q(expires_at__lte=now)),
        owners=Count("owner", distinct=True),
    )
    return counts


def store_item_detail(*, actor, namespace: Namespace, key: str, now=None) -> StoreItem:
    """The item for the dashboard's detail page: 404 when missing or expired, 403 when not the actor's."""
    item = store_item_get_for_read(actor=actor, namespace=list(namespace), key=key, now=now)
    if item is None:
        raise NotFound(f"No live item {key!r} in {namespace_to_path(namespace) or '(root)'}.")
    return item

