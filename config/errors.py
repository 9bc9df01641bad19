"""The one API exception handler: every API error leaves as {"error": {"code", "message", "field"?}}."""

from __future__ import annotations

import logging
from typing import Any

from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.http import Http404, HttpRequest, JsonResponse
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler

from config.exceptions import DomainError

logger = logging.getLogger(__name__)

# The one table from error code to HTTP status. Domain errors carry only a code; the API's
# exception handler and the MCP server answer with the status listed here. A code means one
# thing everywhere, so it has one status: 400 `invalid` is malformed input, and a rule of the
# domain that refuses well-formed input has its own code (422, or 409 when it is what is stored
# that says no).
STATUS_BY_CODE: dict[str, int] = {
    "invalid": 400,
    "not_authenticated": 401,
    "permission_denied": 403,
    "not_found": 404,
    "method_not_allowed": 405,
    "not_acceptable": 406,
    "bank_full": 409,
    "refused": 409,
    "conflict": 409,
    "too_large": 413,
    "unsupported_media_type": 415,
    "misdirected_request": 421,
    "too_long": 422,
    "unknown_ontology_id": 422,
    "no_match": 422,
    "plan_rejected": 422,
    "unknown_source": 422,
    "throttled": 429,
    "server_error": 500,
    "memory_unavailable": 503,
    "unavailable": 503,
}


def status_for(error: DomainError) -> int:
    return STATUS_BY_CODE[error.code]


def error_body(code: str, message: str, field: str | None = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if field:
        error["field"] = field
    return {"error": error}


def _first_validation_error(detail: Any, path: str = "") -> tuple[str | None, str]:
    """Flatten DRF's nested validation detail to the first (field, message) pair."""
    if isinstance(detail, dict):
        for key, value in detail.items():
            field = key if key != "non_field_errors" else ""
            nested = f"{path}.{field}" if path and field else (field or path)
            return _first_validation_error(value, nested)
    if isinstance(detail, list) and detail:
        if all(not isinstance(item, dict | list) for item in detail):
            return path or None, " ".join(str(item) for item in detail)
        for index, item in enumerate(detail):
            if item:
                return _first_validation_error(item, f"{path}[{index}]")
    return path or None, str(detail)


# The code for a DRF exception, which carries only a status (each pair is in STATUS_BY_CODE).
_CODE_BY_STATUS = {
    400: "invalid",
    401: "not_authenticated",
    403: "permission_denied",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    413: "too_large",
    415: "unsupported_media_type",
    429: "throttled",
}


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, DomainError):
        return Response(error_body(exc.code, exc.message, exc.field), status=status_for(exc))
    if isinstance(exc, RequestDataTooBig):
        return Response(
            error_body("too_large", "The request body is too large."), status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
        )
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied()

    response = exception_handler(exc, context)
    if response is None:
        return None  # an unexpected error: Django logs it and returns a 500

    if isinstance(exc, exceptions.ValidationError):
        field, message = _first_validation_error(exc.detail)
        if field:
            message = f"{field}: {message}"
        response.data = error_body("invalid", message, field)
    elif isinstance(exc, exceptions.APIException):
        code = _CODE_BY_STATUS.get(response.status_code, exc.default_code)
        response.data = error_body(code, str(exc.detail))
    return response


def json_error_response(
    request: HttpRequest, code: str, message: str, status_code: int, *, field: str | None = None
) -> JsonResponse:
    return JsonResponse(error_body(code, message, field), status=status_code)
