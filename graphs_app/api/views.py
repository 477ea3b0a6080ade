"""Graph endpoints (docs/graphs.md, "HTTP API"). Thin: services, selectors and the compiler do the work."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memoryadmin.api import UpdatedCursorPagination
from memoryadmin.errors import InvalidInput

from .. import selectors, services
from ..compiler import CompileResult
from ..specs import spec_compile
from . import serializers as s

GRAPH_ID = OpenApiParameter("graph_id", OpenApiTypes.INT, OpenApiParameter.PATH, description="the graph's id")
BAD_INPUT = OpenApiResponse(description='{"code": "invalid", "detail", "errors": {field: [problem]}}')


def _body(request: Request) -> dict[str, Any]:
    data = request.data
    if not isinstance(data, dict):
        raise InvalidInput("The body must be a JSON object.", fields={"body": ["must be a JSON object."]})
    return data


def _summary(graph) -> dict[str, Any]:
    return {
        "id": graph.pk,
        "name": graph.name,
        "owner": graph.owner.get_username(),
        "valid": graph.valid,
        "node_count": graph.node_count,
        "created_at": graph.created_at,
        "updated_at": graph.updated_at,
    }


def _detail(graph, result: CompileResult) -> dict[str, Any]:
    return {**_summary(graph), "spec": graph.spec, "compile": result.as_dict()}


class GraphCompileView(APIView):
    @extend_schema(
        request=s.GraphCompileRequestSerializer,
        responses={200: s.CompileResultSerializer, 400: BAD_INPUT},
        summary="Compile a graph: validate, flatten subgraphs, insert parallel nodes, draw",
        description="An invalid graph is a 200 with `valid: false` and its errors; "
        "input that is not a graph at all is a 400 naming the field.",
    )
    def post(self, request: Request) -> Response:
        data = _body(request)
        if "spec" not in data:
            raise InvalidInput("spec is required.", fields={"spec": ["is required."]})
        return Response(spec_compile(data["spec"]).as_dict())


class GraphListView(APIView):
    pagination_class = UpdatedCursorPagination

    @extend_schema(
        parameters=[
            OpenApiParameter("q", str, description="text in the name"),
            OpenApiParameter("owner", str, description="username (operators and admins)"),
            OpenApiParameter(
                "limit", {"type": "integer", "minimum": 1, "maximum": UpdatedCursorPagination.max_page_size}, description="default 50"
            ),
            OpenApiParameter("cursor", str),
        ],
        responses=s.GraphSummarySerializer(many=True),
        summary="List saved graphs (yours; everyone's for operators and admins)",
    )
    def get(self, request: Request) -> Response:
        params = request.query_params
        graphs = selectors.graph_list(actor=request.user, q=params.get("q", ""), owner=params.get("owner", ""))
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(graphs, request, view=self)
        return paginator.get_paginated_response([_summary(g) for g in page])

    @extend_schema(
        request=s.GraphSaveSerializer,
        responses={201: s.GraphDetailSerializer, 400: BAD_INPUT, 409: OpenApiResponse(description="name taken")},
        summary="Save a graph definition",
    )
    def post(self, request: Request) -> Response:
        # The service refuses operators before it looks at the body.
        data = request.data if isinstance(request.data, dict) else {}
        saved = services.graph_create(actor=request.user, **{k: data[k] for k in ("name", "spec") if k in data})
        return Response(_detail(saved.graph, saved.result), status=status.HTTP_201_CREATED)


class GraphDetailView(APIView):
    @extend_schema(parameters=[GRAPH_ID], responses=s.GraphDetailSerializer, summary="A saved graph, compiled")
    def get(self, request: Request, graph_id: int) -> Response:
        graph = selectors.graph_get_for_read(actor=request.user, graph_id=graph_id)
        return Response(_detail(graph, spec_compile(graph.spec)))

    @extend_schema(
        parameters=[GRAPH_ID],
        request=s.GraphUpdateSerializer,
        responses={200: s.GraphDetailSerializer, 400: BAD_INPUT, 409: OpenApiResponse(description="name taken")},
        summary="Rename a graph and/or replace its spec (owner only)",
    )
    def put(self, request: Request, graph_id: int) -> Response:
        # Ownership is checked before the body: another user's graph is a 403 whatever is sent.
        data = request.data if isinstance(request.data, dict) else {}
        saved = services.graph_update(
            actor=request.user, graph_id=graph_id, **{k: data[k] for k in ("name", "spec") if k in data}
        )
        return Response(_detail(saved.graph, saved.result))

    @extend_schema(parameters=[GRAPH_ID], responses={204: None}, summary="Delete a graph (owner or admin)")
    def delete(self, request: Request, graph_id: int) -> Response:
        services.graph_delete(actor=request.user, graph_id=graph_id, request=request)
        return Response(status=status.HTTP_204_NO_CONTENT)
