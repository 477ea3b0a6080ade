"""Store endpoints: the LangGraph server's store API (docs/store.md, "API guide"), so `langgraph-sdk` works unchanged.

Thin: parameters go to selectors and services as given; they validate and
decide. A missing item is `200 null`, as the LangGraph server answers.
"""

from __future__ import annotations

from typing import Any

from django.http import JsonResponse
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memoryadmin.errors import InvalidInput
from memoryadmin.params import parse_bool

from .. import batch, selectors, services
from ..models import StoreItem
from ..namespaces import namespace_from_path
from . import serializers as s


def _body(request: Request) -> dict[str, Any]:
    data = request.data
    if not isinstance(data, dict):
        raise InvalidInput("The body must be a JSON object.", fields={"body": ["must be a JSON object."]})
    return data


def _required(data, name: str) -> Any:
    if name not in data:
        raise InvalidInput(f"{name} is required.", fields={name: ["is required."]})
    return data[name]


class DeleteWithBodySchema(AutoSchema):
    """Documents the JSON body of DELETE /store/items (the LangGraph server's shape);
    drf-spectacular documents bodies on PUT, PATCH and POST only."""

    def _get_request_body(self, direction="request"):
        if self.method != "DELETE":
            return super()._get_request_body(direction)
        self.method = "POST"
        try:
            return super()._get_request_body(direction)
        finally:
            self.method = "DELETE"


def _delete_body_documented(view_method):
    view_method.schema = DeleteWithBodySchema
    return view_method


def item_as_dict(item: StoreItem, *, with_score: bool = False) -> dict[str, Any]:
    body = {
        "namespace": list(item.namespace),
        "key": item.key,
        "value": item.value,
        "created_at": item.created_at,
        "updated_at": item.updated_at,
    }
    if with_score:
        body["score"] = getattr(item, "score", None)
    return body


class StoreItemsView(APIView):
    # Served without Django's handler and DRF's dispatch under ASGI (memoryadmin/direct.py).
    direct_methods = ("get", "put")
    @extend_schema(
        parameters=[
            OpenApiParameter(
                "namespace",
                {"type": "string", "pattern": r"^([^.\x00]+(\.[^.\x00]+)*)?$"},
                required=True,
                description="Labels joined with '.', e.g. users.u1.prefs ('' is the empty namespace).",
            ),
            OpenApiParameter("key", {"type": "string", "minLength": 1}, required=True),
            OpenApiParameter("refresh_ttl", OpenApiTypes.BOOL, description="Reset the TTL of an item you own (default true)."),
        ],
        responses={200: OpenApiResponse(s.NULLABLE_ITEM_SCHEMA, description="The item, or null when there is none.")},
        summary="Get a store item",
    )
    def get(self, request: Request) -> Response | JsonResponse:
        params = request.query_params
        namespace = namespace_from_path(_required(params, "namespace"))
        refresh = parse_bool(params.get("refresh_ttl"), name="refresh_ttl", default=True)
        item = selectors.store_item_get_for_read(actor=request.user, namespace=list(namespace), key=_required(params, "key"))
        if item is None:
            return JsonResponse(None, safe=False)
        if refresh:
            services.store_ttl_refresh(actor=request.user, items=[item])
        return Response(item_as_dict(item))

    @extend_schema(request=s.StorePutSerializer, responses={204: None}, summary="Put (upsert) a store item")
    def put(self, request: Request) -> Response:
        data = _body(request)
        services.store_item_put(
            actor=request.user,
            namespace=_required(data, "namespace"),
            key=_required(data, "key"),
            value=_required(data, "value"),
            ttl=data.get("ttl"),
            index=data.get("index"),
            vectors=data.get("vectors"),
            dims=data.get("dims"),
        )
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(request=s.StoreDeleteSerializer, responses={204: None}, summary="Delete a store item")
    @_delete_body_documented
    def delete(self, request: Request) -> Response:
        data = _body(request)
        services.store_item_delete(
            actor=request.user,
            namespace=_required(data, "namespace"),
            key=_required(data, "key"),
            request=request,
        )
        return Response(status=status.HTTP_204_NO_CONTENT)


class StoreSearchView(APIView):
    direct_methods = ("post",)  # memoryadmin/direct.py
    @extend_schema(
        request=s.StoreSearchRequestSerializer,
        responses=s.StoreSearchResponseSerializer,
        summary="Search store items under a namespace prefix",
    )
    def post(self, request: Request) -> Response:
        data = _body(request)
        search = selectors.store_search_validate(
            namespace_prefix=data.get("namespace_prefix", []),
            filter=data.get("filter"),
            query=data.get("query"),
            limit=data.get("limit", 10),
            offset=data.get("offset", 0),
            query_vector=data.get("query_vector"),
            dims=data.get("dims"),
        )
        refresh = parse_bool(data.get("refresh_ttl"), name="refresh_ttl", default=True)
        items = selectors.store_item_search(actor=request.user, request=search)
        if refresh:
            services.store_ttl_refresh(actor=request.user, items=items)
        return Response({"items": [item_as_dict(item, with_score=True) for item in items]})


class StoreNamespacesView(APIView):
    @extend_schema(
        request=s.StoreNamespacesRequestSerializer,
        responses=s.StoreNamespacesResponseSerializer,
        summary="List namespaces",
    )
    def post(self, request: Request) -> Response:
        data = _body(request)
        namespaces = selectors.store_namespace_list(
            actor=request.user,
            prefix=data.get("prefix"),
            suffix=data.get("suffix"),
            max_depth=data.get("max_depth"),
            limit=data.get("limit", 100),
            offset=data.get("offset", 0),
        )
        return Response({"namespaces": [list(namespace) for namespace in namespaces]})


def _batch_result(kind: str, result: Any) -> Any:
    if kind == "get":
        return item_as_dict(result) if result is not None else None
    if kind == "search":
        return [item_as_dict(item, with_score=True) for item in result]
    if kind == "list_namespaces":
        return [list(namespace) for namespace in result]
    return None


class StoreBatchView(APIView):
    direct_methods = ("post",)  # memoryadmin/direct.py: every call of the Python client's MemoryAdminStore
    @extend_schema(
        request=s.StoreBatchRequestSerializer,
        responses=s.StoreBatchResponseSerializer,
        summary="Run many store operations in one request and one transaction",
    )
    def post(self, request: Request) -> Response:
        data = _body(request)
        ops = _required(data, "ops")
        outcomes = batch.store_batch(actor=request.user, ops=ops, atomic=data.get("atomic", True), request=request)
        results = []
        for raw, outcome in zip(ops, outcomes, strict=True):
            if outcome.error is not None:
                results.append({"error": {"status": outcome.error.status, **outcome.error.as_dict()}})
            else:
                results.append({"result": _batch_result(raw.get("op"), outcome.result)})
        return Response({"results": results})
