"""The OpenAPI schema tells the truth about errors: every status an operation can answer, in the error shape.

Statuses every API request can meet (credentials, the body limit, the rate limit) and those that follow
from the operation's shape (parameters and bodies can be malformed, path values can name nothing) are
added to every operation here. Statuses that depend on what an operation does (a bank that is full, a
cap, an admin-only change) are declared beside the view with `error_responses(...)`.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers

# What each error status means, with the codes it carries (config.errors and the domain exceptions).
ERROR_DESCRIPTIONS: dict[int, str] = {
    400: "`invalid`: malformed input (a parameter, a path value or the body); `field` names it.",
    401: "`not_authenticated`: the API key is missing, unknown, revoked or malformed.",
    403: "`permission_denied`: the key may not do this (an admin-capable key is needed).",
    404: "`not_found`: nothing with this id in the key's team.",
    409: "`bank_full` (the bank latched FULL: offer to drop something) or `refused` (a bounded bank kept "
    "what it holds; the message names the weakest note).",
    413: "`too_large`: the request body is over the limit.",
    415: "`unsupported_media_type`: send the body as application/json.",
    422: "`too_long` (a cap; the message names the field and its limit), `unknown_ontology_id` "
    "(Use an exact ontology id.) or another rule of the domain.",
    429: "`throttled`: too many requests for this key; retry after the Retry-After header's seconds.",
    503: "`memory_unavailable`: the memory store failed while composing and the operator chose to fail hard.",
}


class ApiErrorDetail(serializers.Serializer[dict[str, str]]):
    code = serializers.CharField(help_text="A stable, machine-readable error code.")
    message = serializers.CharField(help_text="What went wrong and what to do about it.")
    field = serializers.CharField(required=False, help_text="The input field at fault, when there is one.")


class ApiError(serializers.Serializer[dict[str, dict[str, str]]]):
    error = ApiErrorDetail()


def error_responses(*statuses: int) -> dict[int, OpenApiResponse]:
    """The error responses an operation adds to the common ones, for `extend_schema(responses=...)`."""
    return {status: OpenApiResponse(ApiError, description=ERROR_DESCRIPTIONS[status]) for status in statuses}


def _common_statuses(operation: dict[str, Any]) -> set[int]:
    parameters = operation.get("parameters", [])
    has_body = "requestBody" in operation
    # Every API path needs a key, sits behind the body limit and the rate limit.
    statuses = {401, 413, 429}
    if parameters or has_body:
        statuses.add(400)
    if has_body:
        statuses.add(415)
    if any(parameter["in"] == "path" for parameter in parameters):
        statuses.add(404)
    return statuses


class ApiAutoSchema(AutoSchema):
    def get_operation(self, *args: Any, **kwargs: Any) -> dict[str, Any] | None:
        operation = super().get_operation(*args, **kwargs)
        if operation is None:
            return None
        responses = operation.setdefault("responses", {})
        missing = sorted(status for status in _common_statuses(operation) if str(status) not in responses)
        if missing:
            error = self.resolve_serializer(ApiError, "response")
            for status in missing:
                responses[str(status)] = {
                    "description": ERROR_DESCRIPTIONS[status],
                    "content": {"application/json": {"schema": error.ref}},
                }
        operation["responses"] = dict(sorted(responses.items()))
        return operation
