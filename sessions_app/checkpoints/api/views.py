"""Checkpoint endpoints and LangGraph's thread state endpoints (docs/checkpoints.md, "API guide").

Thin: `services` and `state_update` write, `selectors` and `langgraph` read; they decide ownership.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpResponseNotModified
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memoryadmin.errors import InvalidInput

from sessions_app.checkpoints import selectors as cs
from sessions_app.checkpoints import services as svc
from sessions_app.checkpoints.api import serializers as s
from sessions_app.threads.api.views import THREAD_ID
from memoryadmin import params as qp
from sessions_app.checkpoints import langgraph as lg
from sessions_app.checkpoints import latest, lifecycle
from sessions_app.checkpoints import search
from sessions_app.checkpoints import state_update
from memoryadmin.api import json_body

NS_SCHEMA = {"type": "string", "maxLength": cs.CHECKPOINT_NS_MAX, "pattern": s.NS_PATTERN}
CHECKPOINT_ID = OpenApiParameter(
    "checkpoint_id", {"type": "string", "pattern": s.CHECKPOINT_ID_PATTERN}, OpenApiParameter.PATH, description="1..128 of [A-Za-z0-9_.:@$+=~-]"
)
NS_QUERY = OpenApiParameter("checkpoint_ns", NS_SCHEMA, description='namespace; "" (root) when absent')
NS_QUERY_LIST = OpenApiParameter("checkpoint_ns", NS_SCHEMA, description="namespace; every namespace when absent")
CHECKPOINT_ETAG = OpenApiParameter(
    "ETag", str, OpenApiParameter.HEADER, description="the checkpoint's version, for If-Match on PUT", response=[200]
)


class JsonQueryAutoSchema(AutoSchema):
    """Documents the `metadata` query parameter as what it is: a JSON object (OpenAPI `content`)."""

    json_query_parameters = ("metadata",)

    def get_operation(self, *args, **kwargs):
        operation = super().get_operation(*args, **kwargs)
        for parameter in (operation or {}).get("parameters", []):
            if parameter.get("in") == "query" and parameter.get("name") in self.json_query_parameters:
                parameter.pop("schema", None)
                parameter["content"] = {"application/json": {"schema": {"type": "object", "additionalProperties": True}}}
        return operation


def _optional_body(request: Request) -> dict[str, Any]:
    """The JSON body, or {} when the client sent none (LangGraph's SDK posts copy with no body)."""
    if not request.body:
        return {}
    return json_body(request)


def _refuse_unsupported(data: dict[str, Any], names: tuple[str, ...]) -> None:
    for name in names:
        if data.get(name) not in (None, [], {}):
            raise InvalidInput(f"{name} is not supported by memoryadmin.", fields={name: ["is not supported."]})


def _put_input(data: dict[str, Any]) -> svc.CheckpointInput:
    return svc.checkpoint_input(
        checkpoint=data.get("checkpoint"),
        metadata=data.get("metadata"),
        checkpoint_ns=data.get("checkpoint_ns"),
        parent_checkpoint_id=data.get("parent_checkpoint_id"),
        node_id=data.get("node_id"),
        next_node_id=data.get("next_node_id"),
        messages=data.get("messages"),
        refs=data.get("refs"),
    )


class CheckpointListView(APIView):
    schema = JsonQueryAutoSchema()
    # Served without Django's handler and DRF's dispatch under ASGI (memoryadmin/direct.py): a step's put.
    direct_methods = ("post",)

    @extend_schema(
        parameters=[
            THREAD_ID,
            NS_QUERY_LIST,
            OpenApiParameter(
                "limit", {"type": "integer", "minimum": 1, "maximum": qp.LIST_LIMIT_MAX}, description=f"default {qp.LIST_LIMIT_DEFAULT}"
            ),
            OpenApiParameter(
                "before", {"type": "string", "pattern": s.PARENT_ID_PATTERN}, description="a checkpoint id: list only older checkpoints"
            ),
            OpenApiParameter("metadata", dict, description="a JSON object the metadata must contain"),
        ],
        responses=s.CheckpointListSerializer,
        operation_id="threads_checkpoints_list",
        summary="List a thread's checkpoints, newest first",
    )
    def get(self, request: Request, thread_id: str) -> Response:
        params = request.query_params
        checkpoint_ns = params.get("checkpoint_ns")
        page = cs.checkpoint_list(
            actor=request.user,
            thread_id=thread_id,
            checkpoint_ns=None if checkpoint_ns is None else cs.checkpoint_ns_validate(checkpoint_ns),
            limit=qp.parse_limit(params.get("limit")),
            before=params.get("before") or None,
            metadata=qp.parse_json_object(params.get("metadata"), "metadata"),
        )
        return Response(
            {
                "results": [cs.checkpoint_as_dict(row, thread=page.thread) for row in page.checkpoints],
                "next_before": page.next_before,
            }
        )

    @extend_schema(
        parameters=[THREAD_ID],
        request=s.CheckpointPutSerializer,
        responses={201: s.CheckpointRefSerializer, 200: s.CheckpointRefSerializer},
        summary="Push a checkpoint (or upsert it by id)",
        description="201 when the checkpoint is new, 200 when an existing id was replaced in place.",
    )
    def post(self, request: Request, thread_id: str) -> Response:
        data = json_body(request)
        result = svc.checkpoint_put(
            actor=request.user, thread_id=thread_id, data=_put_input(data), checkpoint_id=data.get("checkpoint_id")
        )
        return Response(result.as_dict(), status=status.HTTP_201_CREATED if result.created else status.HTTP_200_OK)

    @extend_schema(
        parameters=[THREAD_ID],
        responses=s.DeletedSerializer,
        summary="Delete every checkpoint of a thread (LangGraph's delete_thread)",
        description="Owner or admin. All namespaces and pending writes; the thread and its blocks stay.",
    )
    def delete(self, request: Request, thread_id: str) -> Response:
        count = lifecycle.checkpoint_delete_thread(actor=request.user, thread_id=thread_id, request=request)
        return Response({"checkpoints": count})


class CheckpointLatestView(APIView):
    direct_methods = ("get",)  # memoryadmin/direct.py: an agent's first read of each invoke
    @extend_schema(
        parameters=[
            THREAD_ID, NS_QUERY, CHECKPOINT_ETAG,
            OpenApiParameter(
                "If-None-Match", str, OpenApiParameter.HEADER,
                description="a `state_tag` from an earlier read or put: 304 with no body while the latest checkpoint "
                "is still that one, as it was, with no pending writes",
            ),
        ],
        responses={200: s.CheckpointSerializer, 304: OpenApiResponse(description="unchanged since the state_tag given")},
        summary="The latest checkpoint",
    )
    def get(self, request: Request, thread_id: str) -> Response:
        checkpoint = latest.checkpoint_latest_unless(
            actor=request.user,
            thread_id=thread_id,
            checkpoint_ns=cs.checkpoint_ns_validate(request.query_params.get("checkpoint_ns")),
            if_none_match=request.headers.get("If-None-Match"),
        )
        if isinstance(checkpoint, latest.Unchanged):
            unchanged = HttpResponseNotModified()
            unchanged["ETag"] = checkpoint.etag
            return unchanged
        return Response(cs.checkpoint_as_dict(checkpoint), headers={"ETag": cs.checkpoint_etag(checkpoint)})


class CheckpointDetailView(APIView):
    @extend_schema(
        parameters=[THREAD_ID, CHECKPOINT_ID, NS_QUERY, CHECKPOINT_ETAG],
        responses=s.CheckpointSerializer,
        operation_id="threads_checkpoints_retrieve",
        summary="One checkpoint",
    )
    def get(self, request: Request, thread_id: str, checkpoint_id: str) -> Response:
        checkpoint = cs.checkpoint_get(
            actor=request.user,
            thread_id=thread_id,
            checkpoint_id=checkpoint_id,
            checkpoint_ns=cs.checkpoint_ns_validate(request.query_params.get("checkpoint_ns")),
        )
        return Response(cs.checkpoint_as_dict(checkpoint), headers={"ETag": cs.checkpoint_etag(checkpoint)})

    @extend_schema(
        parameters=[
            THREAD_ID,
            CHECKPOINT_ID,
            CHECKPOINT_ETAG,
            OpenApiParameter(
                "If-Match",
                str,
                OpenApiParameter.HEADER,
                description="replace only if the checkpoint still has this ETag (from a GET or a previous PUT); "
                "`*`: only if it exists; else 412",
            ),
        ],
        request=s.CheckpointReplaceSerializer,
        responses={
            200: s.CheckpointRefSerializer,
            412: OpenApiResponse(description="the checkpoint changed since the ETag given in If-Match, or is gone; nothing written"),
        },
        summary="Replace a checkpoint in place (404 if the id does not exist)",
        description="A `checkpoint_id` in the body, if any, must be the one in the path.",
    )
    def put(self, request: Request, thread_id: str, checkpoint_id: str) -> Response:
        data = json_body(request)
        body_id = data.get("checkpoint_id")
        if body_id not in (None, checkpoint_id):
            raise InvalidInput(
                "checkpoint_id in the body differs from the one in the path.",
                fields={"checkpoint_id": ["differs from the path."]},
            )
        result = svc.checkpoint_replace(
            actor=request.user,
            thread_id=thread_id,
            checkpoint_id=checkpoint_id,
            data=_put_input(data),
            if_match=request.headers.get("If-Match"),
        )
        return Response(result.as_dict(), headers={"ETag": result.etag})


class CheckpointWritesView(APIView):
    direct_methods = ("post",)  # memoryadmin/direct.py: a step's writes
    @extend_schema(
        parameters=[THREAD_ID, CHECKPOINT_ID],
        request=s.WritesPostSerializer,
        responses={204: None},
        summary="Store a task's pending writes against a checkpoint",
    )
    def post(self, request: Request, thread_id: str, checkpoint_id: str) -> Response:
        data = json_body(request)
        svc.checkpoint_put_writes(
            actor=request.user,
            thread_id=thread_id,
            checkpoint_id=checkpoint_id,
            checkpoint_ns=data.get("checkpoint_ns"),
            data=svc.write_input(task_id=data.get("task_id"), task_path=data.get("task_path"), writes=data.get("writes")),
        )
        return Response(status=status.HTTP_204_NO_CONTENT)


class CheckpointReleaseView(APIView):
    @extend_schema(
        parameters=[THREAD_ID],
        request=None,
        responses=s.ReleaseSerializer,
        summary="Admin: release every checkpoint of a thread and return them",
    )
    def post(self, request: Request, thread_id: str) -> Response:
        return Response(lifecycle.checkpoint_release(actor=request.user, thread_id=thread_id, request=request))


class ThreadCopyView(APIView):
    @extend_schema(
        parameters=[THREAD_ID],
        request=s.CopyRequestSerializer,
        responses=s.LangGraphThreadSerializer,
        summary="Copy a thread's checkpoints into a new thread (LangGraph's copy_thread)",
    )
    def post(self, request: Request, thread_id: str) -> Response:
        data = _optional_body(request)
        target = lifecycle.checkpoint_copy_thread(actor=request.user, source_thread_id=thread_id, target_thread_id=data.get("thread_id"))
        return Response(lg.thread_langgraph_of(target))


class CheckpointPruneView(APIView):
    @extend_schema(
        request=s.PruneRequestSerializer,
        responses=s.PruneResultSerializer,
        summary="Prune threads' checkpoints: keep the latest per namespace, or delete them all",
    )
    def post(self, request: Request) -> Response:
        data = json_body(request)
        result = lifecycle.checkpoint_prune(
            actor=request.user,
            thread_ids=lifecycle.thread_ids_input(data.get("thread_ids")),
            strategy=data.get("strategy"),
            request=request,
        )
        return Response(result)


class CheckpointDeleteForRunsView(APIView):
    @extend_schema(
        request=s.DeleteForRunsSerializer,
        responses=s.DeletedSerializer,
        summary="Delete the caller's checkpoints made by the given runs (metadata run_id)",
    )
    def post(self, request: Request) -> Response:
        data = json_body(request)
        count = lifecycle.checkpoint_delete_for_runs(actor=request.user, run_ids=data.get("run_ids"), request=request)
        return Response({"checkpoints": count})


# --- LangGraph's thread endpoints ----------------------------------------------------------------


class ThreadSearchView(APIView):
    @extend_schema(
        request=s.ThreadSearchSerializer,
        responses=s.LangGraphThreadSerializer(many=True),
        summary="Search threads (LangGraph's POST /threads/search)",
    )
    def post(self, request: Request) -> Response:
        data = _optional_body(request)
        _refuse_unsupported(data, ("values", "select", "extract"))
        ids = data.get("ids")
        threads = lg.thread_search(
            actor=request.user,
            filters=search.thread_filter_of(data, ids=None if ids is None else lifecycle.thread_ids_input(ids, "ids")),
            limit=qp.parse_limit(data.get("limit"), default=10),
            offset=qp.parse_offset(data.get("offset")),
            sort_by=search.parse_sort_by(data.get("sort_by")),
            sort_order=qp.parse_choice(data.get("sort_order"), "sort_order", search.ORDERS, "desc"),
        )
        return Response(threads)


class ThreadStateView(APIView):
    @extend_schema(
        parameters=[THREAD_ID, NS_QUERY],
        responses=s.ThreadStateSerializer,
        operation_id="threads_state_retrieve",
        summary="A thread's current state (LangGraph's GET /threads/{id}/state)",
    )
    def get(self, request: Request, thread_id: str) -> Response:
        return Response(
            lg.thread_state(
                actor=request.user,
                thread_id=thread_id,
                checkpoint_ns=cs.checkpoint_ns_validate(request.query_params.get("checkpoint_ns")),
            )
        )

    @extend_schema(
        parameters=[THREAD_ID],
        request=s.UpdateStateSerializer,
        responses=s.UpdateStateResponseSerializer,
        operation_id="threads_state_update",
        summary="Update a thread's state as a node (LangGraph's POST /threads/{id}/state)",
        description="A new checkpoint after the latest (or the given) one, as graph.update_state makes it; "
        "the owner only. Messages merge by add_messages, other keys are replaced (docs/checkpoints.md).",
    )
    def post(self, request: Request, thread_id: str) -> Response:
        data = json_body(request)
        _refuse_unsupported(data, ("task_id",))
        checkpoint = data.get("checkpoint")
        if checkpoint is not None and not isinstance(checkpoint, dict):
            raise InvalidInput("checkpoint must be an object {checkpoint_id, checkpoint_ns}.", fields={"checkpoint": ["must be an object."]})
        checkpoint = checkpoint or {}
        checkpoint_id = checkpoint.get("checkpoint_id") or data.get("checkpoint_id")
        field = "checkpoint.checkpoint_id" if checkpoint.get("checkpoint_id") else "checkpoint_id"
        return Response(
            state_update.thread_update_state(
                actor=request.user,
                thread_id=thread_id,
                values=data.get("values"),
                as_node=data.get("as_node"),
                checkpoint_id=None if checkpoint_id is None else cs.checkpoint_id_validate(checkpoint_id, field),
                checkpoint_ns=cs.checkpoint_ns_validate(checkpoint.get("checkpoint_ns"), "checkpoint.checkpoint_ns"),
            )
        )


class ThreadStateAtView(APIView):
    @extend_schema(
        parameters=[THREAD_ID, CHECKPOINT_ID, NS_QUERY],
        responses=s.ThreadStateSerializer,
        operation_id="threads_state_at_retrieve",
        summary="A thread's state at a checkpoint",
    )
    def get(self, request: Request, thread_id: str, checkpoint_id: str) -> Response:
        return Response(
            lg.thread_state(
                actor=request.user,
                thread_id=thread_id,
                checkpoint_id=checkpoint_id,
                checkpoint_ns=cs.checkpoint_ns_validate(request.query_params.get("checkpoint_ns")),
            )
        )


class ThreadStateCheckpointView(APIView):
    @extend_schema(
        parameters=[THREAD_ID, NS_QUERY],
        responses=s.ThreadStateSerializer,
        summary="A thread's state at the checkpoint whose id is \"checkpoint\"",
    )
    def get(self, request: Request, thread_id: str) -> Response:
        # This route shadows state/<checkpoint_id> for that one id; answer as it would.
        return Response(
            lg.thread_state(
                actor=request.user,
                thread_id=thread_id,
                checkpoint_id="checkpoint",
                checkpoint_ns=cs.checkpoint_ns_validate(request.query_params.get("checkpoint_ns")),
            )
        )

    @extend_schema(
        parameters=[THREAD_ID],
        request=s.StateAtCheckpointSerializer,
        responses=s.ThreadStateSerializer,
        summary="A thread's state at a checkpoint given in the body (LangGraph's POST /state/checkpoint)",
    )
    def post(self, request: Request, thread_id: str) -> Response:
        data = json_body(request)
        if not isinstance(data.get("checkpoint"), dict):
            raise InvalidInput("checkpoint must be an object {checkpoint_id, checkpoint_ns}.", fields={"checkpoint": ["must be an object."]})
        config = data["checkpoint"]
        checkpoint_id = config.get("checkpoint_id")
        return Response(
            lg.thread_state(
                actor=request.user,
                thread_id=thread_id,
                checkpoint_id=None if checkpoint_id is None else cs.checkpoint_id_validate(checkpoint_id, "checkpoint.checkpoint_id"),
                checkpoint_ns=cs.checkpoint_ns_validate(config.get("checkpoint_ns"), "checkpoint.checkpoint_ns"),
            )
        )


def _before_id(before: Any) -> str | None:
    """`before` of a history request: a checkpoint id, a checkpoint config, or a RunnableConfig."""
    if isinstance(before, dict):
        configurable = before.get("configurable")
        before = configurable.get("checkpoint_id") if isinstance(configurable, dict) else before.get("checkpoint_id")
    if before is not None and not isinstance(before, str):
        raise InvalidInput(
            "before must be a checkpoint id, a checkpoint config or a RunnableConfig.", fields={"before": ["must be a checkpoint id."]}
        )
    return before or None


class ThreadHistoryView(APIView):
    @extend_schema(
        parameters=[THREAD_ID],
        request=s.HistoryRequestSerializer,
        responses=s.ThreadStateSerializer(many=True),
        summary="A thread's past states, newest first (LangGraph's POST /threads/{id}/history)",
    )
    def post(self, request: Request, thread_id: str) -> Response:
        data = _optional_body(request)
        _refuse_unsupported(data, ("select",))
        before = _before_id(data.get("before"))
        config = qp.parse_json_object(data.get("checkpoint"), "checkpoint")
        history = lg.thread_history(
            actor=request.user,
            thread_id=thread_id,
            limit=qp.parse_limit(data.get("limit"), default=10),
            before=before,
            metadata=qp.parse_json_object(data.get("metadata"), "metadata"),
            checkpoint_ns=cs.checkpoint_ns_validate(config.get("checkpoint_ns"), "checkpoint.checkpoint_ns"),
        )
        return Response(history)
