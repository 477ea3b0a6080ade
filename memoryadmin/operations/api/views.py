"""Operations endpoints: a thread's export bundle and full-text message search. Thin views."""

from __future__ import annotations

from django.http import StreamingHttpResponse
from django.utils.http import urlencode
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memoryadmin.errors import InvalidInput
from memoryadmin.params import parse_cursor, parse_limit

from memoryadmin.operations import export, search

THREAD_ID = OpenApiParameter("thread_id", OpenApiTypes.STR, OpenApiParameter.PATH, description="1..64 of [A-Za-z0-9_.:@$-], not \"search\"")


# The search page's form sends its blank date fields as "", which the API takes as well.
DAY_OR_EMPTY = {"oneOf": [{"type": "string", "format": "date"}, {"type": "string", "maxLength": 0}]}


class SearchHitSerializer(serializers.Serializer):
    thread_id = serializers.CharField()
    owner = serializers.CharField()
    agent_code = serializers.CharField()
    seq = serializers.IntegerField()
    role = serializers.CharField()
    archived = serializers.BooleanField()
    created_at = serializers.DateTimeField()
    content = serializers.CharField()
    snippet = serializers.CharField()
    url = serializers.CharField(help_text="The block in its thread page (dashboard).")


class SearchPageSerializer(serializers.Serializer):
    results = SearchHitSerializer(many=True)
    next = serializers.CharField(allow_null=True, help_text="The next (older) page, or null.")


def _hit(hit: search.Hit) -> dict:
    block = hit.block
    return {
        "thread_id": block.thread.thread_id,
        "owner": block.thread.owner.get_username(),
        "agent_code": block.agent_code,
        "seq": block.seq,
        "role": block.role,
        "archived": block.archived,
        "created_at": block.created_at,
        "content": block.content,
        "snippet": hit.before + hit.match + hit.after,
        "url": hit.url,
    }


class MessageSearchView(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter(
                "q",
                {"type": "string", "maxLength": search.QUERY_MAX},
                required=True,
                description="words that must all occur (PostgreSQL: web-search syntax)",
            ),
            OpenApiParameter(
                "owner", {"type": "string", "maxLength": search.OWNER_MAX}, description="username (operators and admins)"
            ),
            OpenApiParameter("agent_code", {"type": "string", "maxLength": search.AGENT_MAX}),
            OpenApiParameter("role", str, enum=["", *search.ROLES], description="empty or absent: any role"),
            OpenApiParameter("archived", str, enum=["", "all", "false", "true"], description="default (and empty) all"),
            OpenApiParameter("since", DAY_OR_EMPTY, description="YYYY-MM-DD; empty or absent: no bound"),
            OpenApiParameter("until", DAY_OR_EMPTY, description="YYYY-MM-DD, inclusive; empty or absent: no bound"),
            OpenApiParameter(
                "before",
                {"type": "integer", "minimum": 0, "maximum": search.BEFORE_MAX},
                description="keyset cursor: the `next` link carries it",
            ),
            OpenApiParameter(
                "limit", {"type": "integer", "minimum": 1, "maximum": search.PAGE_SIZE_MAX}, description="default 50"
            ),
        ],
        responses=SearchPageSerializer,
        summary="Search message content (newest first)",
    )
    def get(self, request: Request) -> Response:
        params = request.query_params
        if "q" not in params:
            raise InvalidInput("q is required.", fields={"q": ["is required."]})
        query = search.MessageQuery.from_params(params, agent_param="agent_code")
        limit = parse_limit(params.get("limit"), default=search.PAGE_SIZE, maximum=search.PAGE_SIZE_MAX)
        before = parse_cursor(params.get("before"), name="before")
        page = search.message_search(actor=request.user, query=query, before=before, limit=limit, request=request)
        next_url = None
        if page.older is not None:
            args = {**query.as_params(), "before": page.older, "limit": limit}
            if "agent" in args:
                args["agent_code"] = args.pop("agent")
            next_url = request.build_absolute_uri(f"{request.path}?{urlencode(args)}")
        return Response({"results": [_hit(hit) for hit in page.hits], "next": next_url})


class ThreadExportView(APIView):
    @extend_schema(
        parameters=[THREAD_ID],
        responses={(200, "application/zip"): OpenApiResponse(OpenApiTypes.BINARY, description="the thread bundle (zip)")},
        summary="Download a thread bundle (transcript, agent state, checkpoints, manifest)",
    )
    def get(self, request: Request, thread_id: str) -> StreamingHttpResponse:
        thread, chunks = export.thread_export(actor=request.user, thread_id=thread_id, request=request)
        response = StreamingHttpResponse(chunks, content_type="application/zip")
        response["Content-Disposition"] = f'attachment; filename="{export.bundle_filename(thread.thread_id)}"'
        return response
