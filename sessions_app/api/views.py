"""Thread and conversation-state endpoints (DESIGN §9). Thin: services and selectors do the work."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memoryadmin.api import SeqCursorPagination, UpdatedCursorPagination
from memoryadmin.errors import InvalidInput

from .. import selectors, services
from . import serializers as s

THREAD_ID = OpenApiParameter("thread_id", OpenApiTypes.STR, OpenApiParameter.PATH, description="1..64 of [A-Za-z0-9_.:@$-]")


def _body(request: Request) -> dict:
    data = request.data
    if not isinstance(data, dict):
        raise InvalidInput("The body must be a JSON object.", fields={"body": ["must be a JSON object."]})
    return data


def thread_summary(thread) -> dict:
    return s.ThreadSummarySerializer(thread).data


class AgentStateView(APIView):
    @extend_schema(parameters=[THREAD_ID], responses=s.AgentStateSerializer, summary="Load an agent's state")
    def get(self, request: Request, thread_id: str) -> Response:
        state = selectors.thread_agent_state(actor=request.user, thread_id=thread_id)
        return Response(state.as_dict())

    @extend_schema(
        parameters=[THREAD_ID],
        request=s.AgentStateSaveSerializer,
        responses=s.SaveResultSerializer,
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
        )
        return Response(result.as_dict())


class ThreadMessagesView(APIView):
    pagination_class = SeqCursorPagination

    @extend_schema(
        parameters=[
            THREAD_ID,
            OpenApiParameter("archived", str, enum=["false", "true", "all"], description="default false"),
            OpenApiParameter("limit", int),
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
            OpenApiParameter("limit", int),
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


class ThreadDetailView(APIView):
    @extend_schema(parameters=[THREAD_ID], responses=s.ThreadDetailSerializer, summary="A thread with its counts")
    def get(self, request: Request, thread_id: str) -> Response:
        detail = selectors.thread_detail(actor=request.user, thread_id=thread_id)
        return Response(detail)

    @extend_schema(parameters=[THREAD_ID], responses={204: None}, summary="Delete a thread and all it holds")
    def delete(self, request: Request, thread_id: str) -> Response:
        services.thread_delete(actor=request.user, thread_id=thread_id, request=request)
        return Response(status=status.HTTP_204_NO_CONTENT)


class ThreadClearView(APIView):
    @extend_schema(parameters=[THREAD_ID], request=None, responses=s.ClearResultSerializer, summary="Admin: archive every active block")
    def post(self, request: Request, thread_id: str) -> Response:
        result = services.thread_clear(actor=request.user, thread_id=thread_id, request=request)
        return Response(result)
