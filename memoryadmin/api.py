"""Shared API plumbing: the exception handler and pagination."""

from __future__ import annotations

from django.core.exceptions import RequestDataTooBig
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import InterfaceError, OperationalError
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.pagination import CursorPagination
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from .audit import audit_denial
from .errors import DomainError, Forbidden
from .params import parse_limit
from memoryadmin.errors import InvalidInput
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter
from rest_framework.request import Request


def _flatten_drf_detail(detail):
    if isinstance(detail, dict):
        return {key: _flatten_drf_detail(value) for key, value in detail.items()}
    if isinstance(detail, list):
        return [_flatten_drf_detail(item) for item in detail]
    return str(detail)


def exception_handler(exc, context):
    """One mapping from errors to JSON answers: `{"code", "detail", "errors"?}`."""
    request = context.get("request")
    if isinstance(exc, DomainError):
        if isinstance(exc, Forbidden) and request is not None:
            audit_denial(request=request, exc=exc)
        return Response(exc.as_dict(), status=exc.status)
    if isinstance(exc, OperationalError | InterfaceError):
        return database_unavailable_response()
    if isinstance(exc, RequestDataTooBig):
        return Response({"code": "too_large", "detail": str(exc)}, status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE)
    if isinstance(exc, Http404):
        return Response({"code": "not_found", "detail": str(exc) or "Not found."}, status=404)
    if isinstance(exc, exceptions.ValidationError):
        errors = _flatten_drf_detail(exc.detail)
        if isinstance(errors, list):
            errors = {"non_field_errors": errors}
        fields = ", ".join(errors) if isinstance(errors, dict) else ""
        response = Response(
            {"code": "invalid", "detail": f"Invalid input: {fields}." if fields else "Invalid input.", "errors": errors},
            status=400,
        )
        return response
    response = drf_exception_handler(exc, context)
    if response is not None and isinstance(exc, exceptions.APIException):
        detail = exc.detail if isinstance(exc.detail, str) else _flatten_drf_detail(exc.detail)
        response.data = {"code": getattr(exc.detail, "code", None) or exc.default_code, "detail": detail}
    return response


def database_unavailable_response() -> Response:
    """503 while the database is unreachable; the next request reconnects by itself."""
    return Response(
        {"code": "unavailable", "detail": "The database is not answering; retry shortly."},
        status=status.HTTP_503_SERVICE_UNAVAILABLE,
        headers={"Retry-After": "5"},
    )


class StrictLimitMixin:
    """`limit` must be a whole number from 1 to max_page_size: a wrong one is a 400, not ignored."""

    def get_page_size(self, request):
        return parse_limit(
            request.query_params.get(self.page_size_query_param),
            default=self.page_size,
            maximum=self.max_page_size,
            field_name=self.page_size_query_param,
        )


class StrictCursorMixin:
    """`cursor` must be one this list gave: junk, or a position its ordering field cannot
    hold (a seq that is not a number, a time that is not one), is a 400 naming `cursor`.

    DRF answers an undecodable cursor with a 404 and passes any position it decodes to
    the database, where the wrong type fails as a 500.
    """

    cursor_problem = "is not a cursor this list gave; start again without it."

    def paginate_queryset(self, queryset, request, view=None):
        self._cursor_model = queryset.model
        return super().paginate_queryset(queryset, request, view)

    def _refuse_cursor(self):
        return exceptions.ValidationError({self.cursor_query_param: [self.cursor_problem]})

    def decode_cursor(self, request):
        try:
            cursor = super().decode_cursor(request)
        except exceptions.NotFound:
            raise self._refuse_cursor() from None
        if cursor is None or cursor.position is None:
            return cursor
        field = self._cursor_model._meta.get_field(self.ordering[0].lstrip("-"))
        try:
            # to_python parses the text; the validators hold it to the column's range.
            field.run_validators(field.to_python(cursor.position))
        except DjangoValidationError:
            raise self._refuse_cursor() from None
        return cursor


class SeqCursorPagination(StrictLimitMixin, StrictCursorMixin, CursorPagination):
    """Keyset pagination on seq: one query per page whatever the thread size."""

    ordering = "seq"
    page_size = 100
    page_size_query_param = "limit"
    max_page_size = 1000


class UpdatedCursorPagination(StrictLimitMixin, StrictCursorMixin, CursorPagination):
    ordering = ("-updated_at", "-id")
    page_size = 50
    page_size_query_param = "limit"
    max_page_size = 500


THREAD_ID = OpenApiParameter("thread_id", OpenApiTypes.STR, OpenApiParameter.PATH, description="1..64 of [A-Za-z0-9_.:@$-], not \"search\", \".\" or \"..\"")

def json_body(request: Request) -> dict:
    data = request.data
    if not isinstance(data, dict):
        raise InvalidInput("The body must be a JSON object.", fields={"body": ["must be a JSON object."]})
    return data
