"""Dashboard pages of the long-term store: the namespace tree, items, search, admin deletes.

One function view per page; htmx gets the named partial of the same template.
Every read goes through selectors (members see their own items only) and
every delete through services (an item: its owner or an admin, as in the API;
a subtree: admins; audited). Each page costs a fixed
number of queries: one per expanded tree level, one count, one page of items.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRedirect

from memoryadmin import params, policy
from memoryadmin.errors import InvalidInput

from . import selectors, services
from .forms import StoreSearchForm
from .namespaces import Namespace, key_validate, namespace_from_path, namespace_to_path

PAGE_SIZE = 50
# Deeper pages of a namespace are reached by searching it instead.
PAGE_MAX = 10_000
TREE_LIMIT = 500


def _namespace_param(data, name: str = "ns") -> Namespace:
    return namespace_from_path(data.get(name, ""), field=name)


def _key_param(data) -> str:
    return key_validate(data.get("key", ""), field="key")


def browser_url(namespace: Namespace = (), **params) -> str:
    query = {"ns": namespace_to_path(namespace)} if namespace else {}
    query.update({k: v for k, v in params.items() if v not in (None, "")})
    url = reverse("store-browser")
    return f"{url}?{urlencode(query)}" if query else url


@dataclass
class TreeEntry:
    node: selectors.NamespaceNode
    selected: bool = False
    children: "TreeLevel | None" = None


@dataclass
class TreeLevel:
    namespace: Namespace = ()
    entries: list[TreeEntry] = field(default_factory=list)
    next_offset: int | None = None

    @property
    def path(self) -> str:
        return namespace_to_path(self.namespace)


def _tree_level(actor, namespace: Namespace, offset: int = 0) -> TreeLevel:
    nodes, more = selectors.store_namespace_children(actor=actor, namespace=namespace, limit=TREE_LIMIT, offset=offset)
    return TreeLevel(
        namespace=namespace,
        entries=[TreeEntry(node=node) for node in nodes],
        next_offset=offset + TREE_LIMIT if more else None,
    )


def _tree_to(actor, namespace: Namespace) -> TreeLevel:
    """The tree opened along the path to `namespace`: one query per level on the way."""
    root = _tree_level(actor, ())
    level = root
    for depth in range(1, len(namespace) + 1):
        step = namespace[:depth]
        entry = next((e for e in level.entries if e.node.namespace == step), None)
        if entry is None:
            break
        entry.selected = depth == len(namespace)
        if entry.node.has_children:
            entry.children = _tree_level(actor, step)
            level = entry.children
        else:
            break
    return root


def _item_panel(request: HttpRequest, namespace: Namespace) -> dict:
    page = params.parse_page(request.GET.get("page"), maximum=PAGE_MAX)
    form = StoreSearchForm(request.GET or None)
    valid = form.is_valid() if form.is_bound else True
    data = form.cleaned_data if form.is_bound and valid else {}
    offset = (page - 1) * PAGE_SIZE
    searching = bool(data.get("q") or data.get("filter"))
    scored = False
    if searching:
        search = selectors.store_search_validate(
            namespace_prefix=list(namespace), filter=data.get("filter"), query=data.get("q") or None,
            limit=PAGE_SIZE, offset=offset,
        )
        # A search box shows what matches (by words, or by meaning with the server's embedder);
        # the API lists every item after the matching ones, as LangGraph's stores do.
        rows = selectors.store_item_search(actor=request.user, request=search, extra=1, with_owner=True, matching_only=True)
        # By words or, with the server's embedder, by meaning: either way the items carry scores.
        scored = any(item.score is not None for item in rows)
    else:
        rows = selectors.store_item_list(actor=request.user, namespace=namespace, limit=PAGE_SIZE, offset=offset)
    items = rows[:PAGE_SIZE]
    crumbs = [(label, namespace[: i + 1]) for i, label in enumerate(namespace)]
    return {
        "namespace": namespace,
        "path": namespace_to_path(namespace),
        "crumbs": [{"label": label, "path": namespace_to_path(ns)} for label, ns in crumbs],
        "counts": selectors.store_namespace_count(actor=request.user, namespace=namespace),
        "form": form,
        "form_valid": valid,
        "searching": searching,
        "scored": scored,
        "items": items,
        "page": page,
        "has_next": len(rows) > PAGE_SIZE,
        "prev_url": browser_url(namespace, q=data.get("q"), filter=request.GET.get("filter"), page=page - 1) if page > 1 else None,
        "next_url": browser_url(namespace, q=data.get("q"), filter=request.GET.get("filter"), page=page + 1),
        "can_clear": policy.may_administer(request.user, "store.clear"),
    }


@require_GET
@login_required
def store_browser(request: HttpRequest) -> HttpResponse:
    namespace = _namespace_param(request.GET)
    context = _item_panel(request, namespace)
    template = "store_app/browser.html"
    if request.htmx and request.htmx.target == "item-panel":
        return render(request, template + "#item-panel", context)
    context["tree"] = _tree_to(request.user, namespace)
    return render(request, template, context)


@require_GET
@login_required
def store_tree(request: HttpRequest) -> HttpResponse:
    """One level of the tree, for an htmx expansion: one grouped query.

    With an offset it is the next page of a long level, as list entries that
    replace the level's "more" row.
    """
    namespace = _namespace_param(request.GET)
    offset = params.parse_offset(request.GET.get("offset"), maximum=selectors.OFFSET_MAX)
    template = "store_app/_tree.html"
    if offset:
        template += "#tree-entries"
    return render(request, template, {"level": _tree_level(request.user, namespace, offset)})


@require_GET
@login_required
def store_item_detail(request: HttpRequest) -> HttpResponse:
    namespace = _namespace_param(request.GET)
    key = _key_param(request.GET)
    item = selectors.store_item_detail(actor=request.user, namespace=namespace, key=key)
    context = {
        "item": item,
        "path": namespace_to_path(namespace),
        "back_url": browser_url(namespace),
        "can_delete": policy.may_write(request.user, owner_id=item.owner_id, action="store.delete"),
    }
    return render(request, "store_app/item_detail.html", context)


def _done(request: HttpRequest, url: str) -> HttpResponse:
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


@require_POST
@login_required
def store_item_delete(request: HttpRequest) -> HttpResponse:
    namespace = _namespace_param(request.POST)
    key = _key_param(request.POST)
    services.store_item_delete(actor=request.user, namespace=namespace, key=key, request=request, missing_ok=False)
    messages.success(request, f"Deleted {key} from {namespace_to_path(namespace)}.")
    return _done(request, browser_url(namespace))


@require_GET
@login_required
def store_subtree_preview(request: HttpRequest) -> HttpResponse:
    """What deleting the subtree would remove, before anyone confirms it."""
    namespace = _namespace_param(request.GET)
    impact = selectors.store_subtree_impact(actor=request.user, namespace=namespace)
    context = {"namespace": namespace, "path": namespace_to_path(namespace), "impact": impact}
    template = "store_app/subtree_delete.html"
    if request.htmx:
        template += "#subtree-preview"
    return render(request, template, context)


@require_POST
@login_required
def store_subtree_delete(request: HttpRequest) -> HttpResponse:
    namespace = _namespace_param(request.POST)
    if "confirm" not in request.POST:
        raise InvalidInput("Confirm the deletion.", fields={"confirm": ["is required."]})
    deleted = services.store_clear(actor=request.user, namespace=namespace, request=request)
    where = namespace_to_path(namespace) or "the whole store"
    messages.success(request, f"Deleted {deleted} items under {where}.")
    return _done(request, browser_url(namespace[:-1]))
