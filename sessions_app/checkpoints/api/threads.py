"""The thread resource as LangGraph's server has it: list and create, count, read, patch metadata, delete."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memoryadmin.api import UpdatedCursorPagination
from memoryadmin.errors import InvalidInput

from sessions_app.threads import selectors, services
from sessions_app.checkpoints.api import serializers as cs_serializers
from sessions_app.threads.api import serializers as s
from sessions_app.checkpoints import langgraph as lg
from sessions_app.checkpoints import lifecycle
from sessions_app.checkpoints import search
from sessions_app.checkpoints.api.views import JsonQueryAutoSchema
from sessions_app.threads.api.views import thread_summary
from sessions_app.threads.models import THREAD_ID_RULE
from memoryadmin.api import THREAD_ID, json_body


class ThreadListView(APIView):
    pagination_class = UpdatedCursorPagination
    schema = JsonQueryAutoSchema()

    @extend_schema(
        parameters=[
            OpenApiParameter("q", str, description="text in the title, thread id or agent code"),
            OpenApiParameter("agent_code", str),
            OpenApiParameter("owner", str, description="username (operators and admins)"),
            OpenApiParameter("status", str, enum=list(search.THREAD_STATUSES), description="LangGraph's thread status"),
            OpenApiParameter("metadata", str, description="a JSON object the thread's metadata contains"),
            *(
                OpenApiParameter(name, OpenApiTypes.DATE, description="YYYY-MM-DD, a whole day, both ends included")
                for name in search.DATE_FIELDS
            ),
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
        filters = search.thread_filter_of(params)
        # The cursor paginator orders by its own key (updated_at, id); the search's order is left to it.
        threads = search.thread_search_queryset(actor=request.user, filters=filters).order_by()
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(threads, request, view=self)
        audit = {name: params.get(name, "") for name in (*search.FILTER_FIELDS, "limit", "cursor")}
        selectors.thread_list_audit(actor=request.user, threads=page, filters=audit)
        return paginator.get_paginated_response([thread_summary(t) for t in page])

    @extend_schema(
        request=cs_serializers.ThreadCreateSerializer,
        responses={201: cs_serializers.LangGraphThreadSerializer, 200: cs_serializers.LangGraphThreadSerializer},
        summary="Create a thread (LangGraph's POST /threads)",
        description="201 when made; with if_exists=do_nothing an existing thread is returned with 200.",
    )
    def post(self, request: Request) -> Response:
        data = json_body(request)
        for name in ("ttl", "supersteps"):
            if data.get(name) not in (None, [], {}):
                raise InvalidInput(f"{name} is not supported by memoryadmin.", fields={name: ["is not supported."]})
        thread, created = lifecycle.thread_create(
            actor=request.user,
            thread_id=data.get("thread_id"),
            metadata=data.get("metadata"),
            if_exists=data.get("if_exists"),
        )
        body = lg.thread_langgraph_of(thread)
        return Response(body, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)

class ThreadDetailView(APIView):
    @extend_schema(parameters=[THREAD_ID], responses=s.ThreadDetailSerializer, summary="A thread with its counts")
    def get(self, request: Request, thread_id: str) -> Response:
        detail = lg.thread_detail(actor=request.user, thread_id=thread_id)
        return Response(detail)

    @extend_schema(
        parameters=[THREAD_ID],
        request=cs_serializers.ThreadPatchSerializer,
        responses={200: cs_serializers.LangGraphThreadSerializer, 204: None},
        summary="Merge metadata into a thread (LangGraph's PATCH /threads/{id})",
        description="The owner only. `Prefer: return=minimal` answers 204 without a body.",
    )
    def patch(self, request: Request, thread_id: str) -> Response:
        data = json_body(request)
        if data.get("ttl") not in (None, {}):
            raise InvalidInput("ttl is not supported by memoryadmin.", fields={"ttl": ["is not supported."]})
        # PATCH: metadata may be left out (nothing to merge); given, it must be an object.
        thread = lifecycle.thread_update_metadata(
            actor=request.user, thread_id=thread_id, metadata=data["metadata"] if "metadata" in data else {}
        )
        if "return=minimal" in request.headers.get("Prefer", ""):
            return Response(status=status.HTTP_204_NO_CONTENT)
        return Response(lg.thread_langgraph_of(thread))

    @extend_schema(parameters=[THREAD_ID], responses={204: None}, summary="Delete a thread and all it holds")
    def delete(self, request: Request, thread_id: str) -> Response:
        services.thread_delete(actor=request.user, thread_id=thread_id, request=request)
        return Response(status=status.HTTP_204_NO_CONTENT)


class ThreadCountView(ThreadDetailView):
    """`POST /threads/count` (LangGraph's count); the same path read as a thread is the thread `count`.

    The route shadows `threads/<thread_id>` for that one id, whose methods (GET,
    PATCH, DELETE) are not count's (POST), so it answers them as the thread would.
    """

    @extend_schema(
        request=cs_serializers.ThreadCountSerializer,
        responses={200: {"type": "integer"}},
        summary="Count threads (LangGraph's POST /threads/count)",
        description="The threads the caller may see that match, with search's filters (text, status, agent, owner, dates, metadata).",
    )
    def post(self, request: Request) -> Response:
        data = json_body(request) if request.body else {}
        if data.get("values") not in (None, {}):
            raise InvalidInput("values is not supported by memoryadmin.", fields={"values": ["is not supported."]})
        count = lg.thread_count(actor=request.user, filters=search.thread_filter_of(data))
        return Response(count)

    @extend_schema(responses=s.ThreadDetailSerializer, operation_id="threads_count_thread_retrieve", summary="The thread named count")
    def get(self, request: Request) -> Response:
        return super().get(request, "count")

    @extend_schema(
        request=cs_serializers.ThreadPatchSerializer,
        responses={200: cs_serializers.LangGraphThreadSerializer, 204: None},
        operation_id="threads_count_thread_partial_update",
        summary="Merge metadata into the thread named count",
    )
    def patch(self, request: Request) -> Response:
        return super().patch(request, "count")

    @extend_schema(responses={204: None}, operation_id="threads_count_thread_destroy", summary="Delete the thread named count")
    def delete(self, request: Request) -> Response:
        return super().delete(request, "count")


class ThreadIdRefusedView(APIView):
    """Any path under threads/ that no route took: a 400 naming thread_id.

    WSGI hands Django the path with `%2F` already decoded, so a thread id holding
    "/" (`user%2F42`, as the LangGraph SDK sends it) arrives as extra path
    segments and matches no route. No thread can have such an id, so the answer
    says so rather than a bare 404.
    """

    schema = None  # not an endpoint: what is left when none matched

    def _refuse(self, request: Request, rest: str) -> Response:
        message = f'thread ids are {THREAD_ID_RULE}, without "/"'
        raise InvalidInput(
            f"No endpoint matches threads/{rest}: if part of it is a thread id, {message}.",
            fields={"thread_id": [f"must be {THREAD_ID_RULE}."]},
        )

    get = post = put = patch = delete = _refuse
