"""Thread and conversation-state endpoints (DESIGN §9). Thin: services and selectors do the work."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memoryadmin.api import SeqCursorPagination, UpdatedCursorPagination
from memoryadmin.errors import InvalidInput

from .. import checkpoint_selectors, checkpoint_services, selectors, services
from . import checkpoint_serializers as cs_serializers
from . import serializers as s

ETAG_HEADER = OpenApiParameter(
    "ETag", str, OpenApiParameter.HEADER, description="the thread's state version", response=[200]
)
THREAD_ID = OpenApiParameter("thread_id", OpenApiTypes.STR, OpenApiParameter.PATH, description="1..64 of [A-Za-z0-9_.:@$-], not \"search\"")


def _body(request: Request) -> dict:
    data = request.data
    if not isinstance(data, dict):
        raise InvalidInput("The body must be a JSON object.", fields={"body": ["must be a JSON object."]})
    return data


def thread_summary(thread) -> dict:
    return s.ThreadSummarySerializer(thread).data


class AgentStateView(APIView):
    @extend_schema(parameters=[THREAD_ID, ETAG_HEADER], responses=s.AgentStateSerializer, summary="Load an agent's state")
    def get(self, request: Request, thread_id: str) -> Response:
        state = selectors.thread_agent_state(actor=request.user, thread_id=thread_id)
        return Response(state.as_dict(), headers={"ETag": selectors.thread_etag(state.thread)})

    @extend_schema(
        parameters=[
            THREAD_ID,
            ETAG_HEADER,
            OpenApiParameter(
                "If-Match",
                str,
                OpenApiParameter.HEADER,
                description="save only if the thread still has this ETag (from a GET or a previous save); else 412",
            ),
        ],
        request=s.AgentStateSaveSerializer,
        responses={
            200: s.SaveResultSerializer,
            412: OpenApiResponse(description="the thread changed since the ETag given in If-Match; nothing written"),
        },
        summary="Save an agent's state (append, rewrite or no-op)",
    )
    def put(self, request: Request, thread_id: str) -> Response:
        data = _body(request)
        result = services.thread_save_agent_state(
            actor=request.user,
            thread_id=thread_id,
            agent_code=data.get("agent_code"),
            context=data.get("context"),
            extra_state=data.get("extra_state"),
            extra_state_given="extra_state" in data,
            if_match=request.headers.get("If-Match"),
        )
        return Response(result.as_dict(), headers={"ETag": result.etag})


class ThreadMessagesView(APIView):
    pagination_class = SeqCursorPagination

    @extend_schema(
        parameters=[
            THREAD_ID,
            OpenApiParameter("archived", str, enum=["false", "true", "all"], description="default false"),
            OpenApiParameter(
                "limit", {"type": "integer", "minimum": 1, "maximum": SeqCursorPagination.max_page_size}, description="default 100"
            ),
            OpenApiParameter("cursor", str),
        ],
        responses=s.BlockSerializer(many=True),
        summary="List a thread's user and assistant messages",
    )
    def get(self, request: Request, thread_id: str) -> Response:
        archived = selectors.parse_archived(request.query_params.get("archived"))
        blocks = selectors.thread_messages(actor=request.user, thread_id=thread_id, archived=archived)
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(blocks, request, view=self)
        return paginator.get_paginated_response(s.BlockSerializer(page, many=True).data)


class ThreadListView(APIView):
    pagination_class = UpdatedCursorPagination

    @extend_schema(
        parameters=[
            OpenApiParameter("q", str, description="text in the title, thread id or agent code"),
            OpenApiParameter("agent_code", str),
            OpenApiParameter("owner", str, description="username (operators and admins)"),
            OpenApiParameter(
                "limit", {"type": "integer", "minimum": 1, "maximum": UpdatedCursorPagination.max_page_size}, description="default 50"
            ),
            OpenApiParameter("cursor", str),
        ],
        responses=s.ThreadSummarySerializer(many=True),
        summary="List threads",
    )
    def get(self, request: Request) -> Response:
        params = request.query_params
        threads = selectors.thread_list(
            actor=request.user,
            q=params.get("q", ""),
            agent_code=params.get("agent_code", ""),
            owner=params.get("owner", ""),
        )
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(threads, request, view=self)
        return paginator.get_paginated_response([thread_summary(t) for t in page])

    @extend_schema(
        request=cs_serializers.ThreadCreateSerializer,
        responses={201: cs_serializers.LangGraphThreadSerializer, 200: cs_serializers.LangGraphThreadSerializer},
        summary="Create a thread (LangGraph's POST /threads)",
        description="201 when made; with if_exists=do_nothing an existing thread is returned with 200.",
    )
    def post(self, request: Request) -> Response:
        data = _body(request)
        for name in ("ttl", "supersteps"):
            if data.get(name) not in (None, [], {}):
                raise InvalidInput(f"{name} is not supported by memoryadmin.", fields={name: ["is not supported."]})
        thread, created = checkpoint_services.thread_create(
            actor=request.user,
            thread_id=data.get("thread_id"),
            metadata=data.get("metadata"),
            if_exists=data.get("if_exists"),
        )
        body = checkpoint_selectors.thread_langgraph_of(thread)
        return Response(body, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)


class ThreadDetailView(APIView):
    @extend_schema(parameters=[THREAD_ID], responses=s.ThreadDetailSerializer, summary="A thread with its counts")
    def get(self, request: Request, thread_id: str) -> Response:
        detail = selectors.thread_detail(actor=request.user, thread_id=thread_id)
        return Response(detail)

    @extend_schema(
        parameters=[THREAD_ID],
        request=cs_serializers.ThreadPatchSerializer,
        responses={200: cs_serializers.LangGraphThreadSerializer, 204: None},
        summary="Merge metadata into a thread (LangGraph's PATCH /threads/{id})",
        description="The owner only. `Prefer: return=minimal` answers 204 without a body.",
    )
    def patch(self, request: Request, thread_id: str) -> Response:
        data = _body(request)
        if data.get("ttl") not in (None, {}):
            raise InvalidInput("ttl is not supported by memoryadmin.", fields={"ttl": ["is not supported."]})
        # PATCH: metadata may be left out (nothing to merge); given, it must be an object.
        thread = checkpoint_services.thread_update_metadata(
            actor=request.user, thread_id=thread_id, metadata=data["metadata"] if "metadata" in data else {}
        )
        if "return=minimal" in request.headers.get("Prefer", ""):
            return Response(status=status.HTTP_204_NO_CONTENT)
        return Response(checkpoint_selectors.thread_langgraph_of(thread))

    @extend_schema(parameters=[THREAD_ID], responses={204: None}, summary="Delete a thread and all it holds")
    def delete(self, request: Request, thread_id: str) -> Response:
        services.thread_delete(actor=request.user, thread_id=thread_id, request=request)
        return Response(status=status.HTTP_204_NO_CONTENT)


class ThreadClearView(APIView):
    @extend_schema(parameters=[THREAD_ID], request=None, responses=s.ClearResultSerializer, summary="Admin: archive every active block")
    def post(self, request: Request, thread_id: str) -> Response:
        result = services.thread_clear(actor=request.user, thread_id=thread_id, request=request)
        return Response(result)
