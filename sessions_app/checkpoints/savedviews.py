"""Saved views of the thread list: a named filter, its owner's own (docs/operations.md, "Saved views")."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.http import QueryDict

from memoryadmin import policy
from memoryadmin.audit import audit_record
from memoryadmin.errors import InvalidInput, NotFound
from memoryadmin.jsoncheck import text_input_check
from memoryadmin.params import CURSOR_MAX, parse_int

from sessions_app.checkpoints.models import SavedThreadView
from sessions_app.checkpoints.search import thread_list_query_parse


@transaction.atomic
def saved_view_save(*, actor, name: Any, query: Any, request=None) -> SavedThreadView:
    """Save the thread list's filter under a name, the actor's own; the same name again replaces it.

    A saved view is its owner's preference, not data, so operators keep theirs too
    (memoryadmin.policy, `view.save`). The query is parsed as the list parses it
    (a bad one is a 400 naming its field) and stored normalised. Audited.
    """
    policy.ensure_may_write(actor, owner_id=None, target="view:", action="view.save")
    if not isinstance(name, str) or not name.strip() or len(name.strip()) > SavedThreadView.NAME_MAX:
        message = f"must be 1 to {SavedThreadView.NAME_MAX} characters."
        raise InvalidInput(f"name {message}", fields={"name": [message]})
    name = text_input_check(name.strip(), "name")
    if not isinstance(query, str) or len(query) > SavedThreadView.QUERY_MAX:
        message = f"must be a query string of at most {SavedThreadView.QUERY_MAX} characters."
        raise InvalidInput(f"query {message}", fields={"query": [message]})
    normalised = thread_list_query_parse(QueryDict(text_input_check(query.lstrip("?"), "query"))).querystring()
    view, created = SavedThreadView.objects.select_for_update().get_or_create(
        owner=actor, name=name, defaults={"query": normalised}
    )
    before = None if created else view.query
    if not created:
        view.query = normalised
        view.save(update_fields=["query", "updated_at"])
    audit_record(
        actor=actor, action="view.save", target=f"view:{name}"[:200], detail={"query": normalised, "before": before},
        request=request,
    )
    return view


@transaction.atomic
def saved_view_delete(*, actor, view_id: Any, request=None) -> None:
    """Delete one of the actor's saved views; another user's is a 403 (its name not shown), none a 404. Audited."""
    view_id = parse_int(view_id, name="view_id", minimum=1, maximum=CURSOR_MAX)
    view = SavedThreadView.objects.select_for_update().filter(pk=view_id).first()
    if view is None:
        raise NotFound(f"No saved view {view_id}.")
    policy.ensure_may_write(actor, owner_id=view.owner_id, target=f"view:{view_id}", action="view.delete")
    view.delete()
    audit_record(
        actor=actor, action="view.delete", target=f"view:{view.name}"[:200], detail={"query": view.query}, request=request
    )
