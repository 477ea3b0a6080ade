"""Writes to graph definitions.

Rules: a definition is stored when its spec is well formed (the compiler raises no
SpecError), even if the graph is invalid (``valid: false``): a half-built graph can be
saved and finished later, and every save answers with the compile result. Input that
is not a graph at all is a 400 naming the field and nothing is written. Names are
unique per owner (409). Ownership as for threads (docs/graphs.md, "Who may do what"): only the owner writes,
operators write nothing, an admin may delete another user's graph but not edit it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction

from memoryadmin.audit import audit_record
from memoryadmin.errors import Conflict, InvalidInput

from .compiler import CompileResult
from .models import GraphDefinition
from .selectors import graph_ensure_may_create, graph_get_for_delete, graph_get_for_edit
from .specs import name_validate, node_count, spec_check_storable, spec_compile

_UNSET: Any = object()


@dataclass(frozen=True)
class SavedGraph:
    graph: GraphDefinition
    result: CompileResult


def _duplicate(name: str) -> Conflict:
    return Conflict(
        f"You already have a graph named {name!r}.", fields={"name": ["you already have a graph with this name."]}
    )


def _checked_spec(spec: Any) -> CompileResult:
    spec_check_storable(spec)
    return spec_compile(spec)


def _save(graph: GraphDefinition, fields: list[str] | None = None) -> None:
    """Save inside a savepoint: a concurrent save with the same name surfaces as 409."""
    try:
        with transaction.atomic():
            graph.save(update_fields=fields)
    except IntegrityError:
        raise _duplicate(graph.name) from None


@transaction.atomic
def graph_create(*, actor, name: Any = None, spec: Any = _UNSET) -> SavedGraph:
    """Store a new definition owned by the actor (POST /graphs); operators write nothing.

    The name is checked first, then the spec: junk is a 400 naming the field; an
    invalid but well-formed graph is stored with ``valid=False``.
    """
    graph_ensure_may_create(actor=actor)
    name = name_validate(name)
    if spec is _UNSET:
        raise InvalidInput("spec is required.", fields={"spec": ["is required."]})
    result = _checked_spec(spec)
    if GraphDefinition.objects.filter(owner=actor, name=name).exists():
        raise _duplicate(name)
    graph = GraphDefinition(owner=actor, name=name, spec=spec, valid=result.valid, node_count=node_count(result))
    try:
        with transaction.atomic():
            graph.save(force_insert=True)
    except IntegrityError:
        raise _duplicate(name) from None
    return SavedGraph(graph, result)


@transaction.atomic
def graph_update(*, actor, graph_id: int, name: Any = _UNSET, spec: Any = _UNSET) -> SavedGraph:
    """Rename a definition and/or replace its spec (PUT /graphs/{id}); the owner only.

    A key left out keeps its value. Another user's graph is a 403 (admins too: they
    delete, they do not edit), checked before the input so that nothing about the
    refusal depends on the body.
    """
    graph = graph_get_for_edit(actor=actor, graph_id=graph_id, lock=True)
    if name is _UNSET and spec is _UNSET:
        raise InvalidInput("Send name, spec or both, in a JSON object.", fields={"body": ["send name, spec or both."]})
    fields = ["updated_at"]
    if name is not _UNSET:
        name = name_validate(name)
        if name != graph.name:
            if GraphDefinition.objects.filter(owner_id=graph.owner_id, name=name).exclude(pk=graph.pk).exists():
                raise _duplicate(name)
            graph.name = name
            fields.append("name")
    if spec is not _UNSET:
        result = _checked_spec(spec)
        graph.spec, graph.valid, graph.node_count = spec, result.valid, node_count(result)
        fields += ["spec", "valid", "node_count"]
    else:
        result = spec_compile(graph.spec)
    _save(graph, fields)
    return SavedGraph(graph, result)


@transaction.atomic
def graph_delete(*, actor, graph_id: int, request=None) -> dict[str, str]:
    """The owner or an admin removes a definition; recorded in the audit log."""
    graph = graph_get_for_delete(actor=actor, graph_id=graph_id, lock=True)
    detail = {"name": graph.name, "owner": graph.owner.get_username()}
    target = f"graph:{graph.pk}"
    graph.delete()
    audit_record(actor=actor, action="graph.delete", target=target, detail=detail, request=request)
    return detail
