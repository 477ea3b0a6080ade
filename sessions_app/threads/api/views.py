"""Thread and conversation-state endpoints (docs/api.md). Thin: services and selectors do the work."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memoryadmin.api import SeqCursorPagination
from memoryadmin.errors import InvalidInput

from sessions_app.threads import append, selectors, services
from sessions_app.threads.api import serializers as s
from memoryadmin.api import THREAD_ID, json_body

ETAG_HEADER = OpenApiParameter(
    "ETag", str, OpenApiParameter.HEADER, description="the thread's state version", response=[200]
)


def thread_summary(thread) -> dict:
    return s.ThreadSummarySerializer(thread).data


class AgentStateView(APIView):
    # Served without Django's handler and DRF's dispatch under ASGI (memoryadmin/direct.py).
    direct_methods = ("get", "put")
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
        data = json_body(request)
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


class AgentStateAppendView(APIView):
    direct_methods = ("post",)  # memoryadmin/direct.py
    @extend_schema(
        parameters=[
            THREAD_ID,
            ETAG_HEADER,
            OpenApiParameter(
                "If-Match", str, OpenApiParameter.HEADER,
                description="append only if the thread still has this ETag (from a GET or a previous save); else 412",
            ),
            OpenApiParameter(
                "If-None-Match", str, OpenApiParameter.HEADER, enum=["*"],
                description="`*`: append only if the thread does not exist yet (its first save); else 412",
            ),
        ],
        request=s.AgentStateAppendSerializer,
        responses={
            200: s.SaveResultSerializer,
            412: OpenApiResponse(description="the thread moved since the ETag or head given; nothing written"),
        },
        summary="Append new messages to an agent's context (only the new messages travel)",
    )
    def post(self, request: Request, thread_id: str) -> Response:
        data = json_body(request)
        head = data.get("head")
        if "head" in data and not isinstance(head, str):
            raise InvalidInput("head must be a string.", fields={"head": ["must be a string (a chain digest, or empty)."]})
        result = append.thread_append_messages(
            actor=request.user,
            thread_id=thread_id,
            agent_code=data.get("agent_code"),
            messages=data.get("messages"),
            extra_state=data.get("extra_state"),
            extra_state_given="extra_state" in data,
            if_match=request.headers.get("If-Match"),
            if_none_match=_if_none_match(request),
            expect_head=head,
        )
        return Response(result.as_dict(), headers={"ETag": result.etag})


def _if_none_match(request: Request) -> str | None:
    value = request.headers.get("If-None-Match")
    if value is None:
        return None
    if value.strip() != "*":
        raise InvalidInput(
            "If-None-Match on an append takes only `*` (the thread must not exist yet).",
            fields={"If-None-Match": ["must be `*`."]},
        )
    return "*"


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


class ThreadClearView(APIView):
    @extend_schema(parameters=[THREAD_ID], request=None, responses=s.ClearResultSerializer, summary="Admin: archive every active block")
    def post(self, request: Request, thread_id: str) -> Response:
        result = services.thread_clear(actor=request.user, thread_id=thread_id, request=request)
        return Response(result)
