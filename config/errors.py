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
        return Response(error_body(exc.code, exc.message, exc.field), status=exc.http_status)
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
