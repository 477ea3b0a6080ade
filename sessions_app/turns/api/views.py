"""Turn endpoints (docs/turns.md). Thin: sessions_app.turns holds every rule."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memoryadmin_client.context import DEFAULT_MIN_SCORE
from store_app.api.serializers import LABEL_PATTERN, NAMESPACE_HELP
from store_app.matching import MAX_QUERY_CHARS
from store_app.namespaces import MAX_DEPTH

from sessions_app.turns import services as turns
from sessions_app.threads.api.views import THREAD_ID
from memoryadmin.api import json_body

# --- shapes (the rules are in sessions_app.turns) -----------------------------


class TurnBeginSerializer(serializers.Serializer):
    question = serializers.CharField(help_text="the user's question; blank is ignored (nothing written)")


class TurnBeganSerializer(serializers.Serializer):
    ignored = serializers.BooleanField()
    seq = serializers.IntegerField(required=False)
    question = serializers.CharField(required=False)


class TurnChunkInSerializer(serializers.Serializer):
    text = serializers.CharField(help_text="a streamed piece of the answer; empty is ignored")


class TurnChunkOutSerializer(serializers.Serializer):
    ignored = serializers.BooleanField()
    index = serializers.IntegerField(allow_null=True, help_text="given by the server, 0, 1, 2… in arrival order")


class TurnFinishSerializer(serializers.Serializer):
    finished = serializers.BooleanField()
    dropped = serializers.BooleanField(help_text="the answer was blank: the turn is gone")
    truncated = serializers.BooleanField()
    evicted = serializers.IntegerField(help_text="old finished turns dropped by the sliding window")


class TurnSerializer(serializers.Serializer):
    question = serializers.CharField()
    answer = serializers.CharField()


class PendingTurnSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    question = serializers.CharField()
    answer = serializers.CharField(help_text="the chunks so far, joined")
    chunks = serializers.IntegerField()
    created_at = serializers.DateTimeField()


class TurnContextSerializer(serializers.Serializer):
    thread_id = serializers.CharField()
    turns = TurnSerializer(many=True)
    pending = PendingTurnSerializer(allow_null=True)
    rendered = serializers.CharField(help_text='"User: …\\nAssistant: …" per finished turn')


class FlagSerializer(serializers.Serializer):
    discarded = serializers.BooleanField(required=False)
    restarted = serializers.BooleanField(required=False)
    seq = serializers.IntegerField(required=False)
    question = serializers.CharField(required=False)


NO_PENDING = OpenApiResponse(description="no pending turn; nothing written")


# --- views -------------------------------------------------------------------


class TurnsView(APIView):
    @extend_schema(parameters=[THREAD_ID], responses=TurnContextSerializer, summary="A thread's turns and rendered context")
    def get(self, request: Request, thread_id: str) -> Response:
        context = turns.turn_context(actor=request.user, thread_id=thread_id)
        return Response(TurnContextSerializer(context.as_dict()).data)

    @extend_schema(
        parameters=[THREAD_ID], request=TurnBeginSerializer, responses={200: TurnBeganSerializer, 201: TurnBeganSerializer},
        summary="Begin a turn (blank question: ignored)",
    )
    def post(self, request: Request, thread_id: str) -> Response:
        body = json_body(request)
        turn = turns.turn_begin(actor=request.user, thread_id=thread_id, question=body.get("question"))
        if turn is None:
            return Response({"ignored": True})
        return Response({"ignored": False, "seq": turn.seq, "question": turn.question}, status=201)


class TurnChunksView(APIView):
    @extend_schema(
        parameters=[THREAD_ID], request=TurnChunkInSerializer, responses={200: TurnChunkOutSerializer, 409: NO_PENDING},
        summary="Append a streamed chunk to the pending turn",
    )
    def post(self, request: Request, thread_id: str) -> Response:
        body = json_body(request)
        result = turns.turn_append_chunk(actor=request.user, thread_id=thread_id, text=body.get("text"))
        return Response({"ignored": result.ignored, "index": result.index})


class TurnFinishView(APIView):
    @extend_schema(
        parameters=[THREAD_ID], request=None, responses={200: TurnFinishSerializer, 409: NO_PENDING},
        summary="Finish the pending turn",
    )
    def post(self, request: Request, thread_id: str) -> Response:
        result = turns.turn_finish(actor=request.user, thread_id=thread_id)
        return Response(
            {"finished": result.finished, "dropped": result.dropped, "truncated": result.truncated, "evicted": result.evicted}
        )


class TurnPendingView(APIView):
    @extend_schema(parameters=[THREAD_ID], responses=FlagSerializer, summary="Discard the pending turn")
    def delete(self, request: Request, thread_id: str) -> Response:
        return Response({"discarded": turns.turn_discard(actor=request.user, thread_id=thread_id)})


class TurnRestartView(APIView):
    @extend_schema(
        parameters=[THREAD_ID], request=None, responses=FlagSerializer,
        summary="Reopen the last finished turn as pending",
    )
    def post(self, request: Request, thread_id: str) -> Response:
        turn = turns.turn_restart(actor=request.user, thread_id=thread_id)
        if turn is None:
            return Response({"restarted": False})
        return Response({"restarted": True, "seq": turn.seq, "question": turn.question})


@extend_schema_field(
    {
        "oneOf": [
            {"type": "array", "maxItems": MAX_DEPTH, "items": {"type": "string", "pattern": LABEL_PATTERN}},
            {"type": "string", "pattern": rf"^(?:[^.\x00]+(?:\.[^.\x00]+){{0,{MAX_DEPTH - 1}}})?$"},
        ],
        "nullable": True,
        "description": "store namespace prefix to draw memories from: a list of labels or the dotted form "
        '("" is none). ' + NAMESPACE_HELP,
    }
)
class PreviewNamespaceField(serializers.JSONField):
    pass


class ContextPreviewInSerializer(serializers.Serializer):
    # A query needs a namespace to search: either a non-empty namespace, or no query at all.
    openapi_keywords = {
        "anyOf": [
            {
                "required": ["namespace"],
                "properties": {"namespace": {"oneOf": [{"type": "array", "minItems": 1}, {"type": "string", "minLength": 1}]}},
            },
            {"properties": {"query": {"type": "string", "maxLength": 0, "nullable": True}}},
        ]
    }

    budget = serializers.IntegerField(min_value=1, max_value=turns.PREVIEW_BUDGET_MAX, help_text="tokens the model may receive")
    namespace = PreviewNamespaceField(required=False, allow_null=True)
    query = serializers.CharField(
        required=False, allow_null=True, allow_blank=True, trim_whitespace=False, max_length=MAX_QUERY_CHARS,
        help_text="ranks the memories (needs a namespace)",
    )
    min_score = serializers.FloatField(
        required=False, allow_null=True, min_value=0, max_value=1,
        help_text=f"memories scoring less are left out (default {DEFAULT_MIN_SCORE})",
    )


class ContextMessageSerializer(serializers.Serializer):
    role = serializers.CharField()
    content = serializers.CharField()
    tokens = serializers.IntegerField()
    source = serializers.ChoiceField(choices=["memory", "notice", "system", "history"])
    truncated = serializers.BooleanField()


class ContextPreviewSerializer(serializers.Serializer):
    thread_id = serializers.CharField()
    messages = ContextMessageSerializer(many=True)
    budget = serializers.IntegerField()
    total_tokens = serializers.IntegerField()
    dropped = serializers.IntegerField(help_text="history messages left out")
    memories_used = serializers.IntegerField()
    memories_below_threshold = serializers.IntegerField()
    memory_omitted = serializers.BooleanField(help_text="the memory alone exceeded the budget: a notice stands in")
    namespace = serializers.ListField(child=serializers.CharField(), allow_null=True)
    query = serializers.CharField(allow_null=True)
    min_score = serializers.FloatField()
    memories = serializers.ListField(child=serializers.DictField(), help_text="the store items found, with their score")


class ContextPreviewView(APIView):
    @extend_schema(
        parameters=[THREAD_ID], request=ContextPreviewInSerializer, responses=ContextPreviewSerializer,
        summary="The messages a model would receive for this thread, within a token budget",
    )
    def post(self, request: Request, thread_id: str) -> Response:
        body = json_body(request)
        preview = turns.context_preview(
            actor=request.user, thread_id=thread_id, budget=body.get("budget"), namespace=body.get("namespace"),
            query=body.get("query"), min_score=body.get("min_score"),
        )
        return Response(preview)
