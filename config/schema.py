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

from config.errors import STATUS_BY_CODE

# What each code the API answers means; the status each one carries comes from config.errors.STATUS_BY_CODE.
CODE_MEANINGS: dict[str, str] = {
    "invalid": "malformed input (a parameter, a path value or the body); `field` names it",
    "not_authenticated": "the API key is missing, unknown, revoked or malformed",
    "permission_denied": "the key may not do this (an admin-capable key is needed)",
    "not_found": "nothing with this id in the key's team",
    "bank_full": "the bank latched FULL: offer to drop something",
    "refused": "a bounded bank kept what it holds; the message names the weakest note",
    "conflict": "the write conflicts with what is stored, e.g. a turn that already has its reply",
    "too_large": "the request body is over the limit",
    "unsupported_media_type": "send the body as application/json",
    "too_long": "a cap; the message names the field and its limit",
    "unknown_ontology_id": "Use an exact ontology id.",
    "no_match": "the text to find does not occur in the note",
    "throttled": "too many requests for this key; retry after the Retry-After header's seconds",
    "memory_unavailable": "the memory store failed while composing and the operator chose to fail hard",
}


def _describe(status: int) -> str:
    codes = [code for code, code_status in STATUS_BY_CODE.items() if code_status == status and code in CODE_MEANINGS]
    if len(codes) == 1:
        return f"`{codes[0]}`: {CODE_MEANINGS[codes[0]]}."
    described = [f"`{code}` ({CODE_MEANINGS[code]})" for code in codes]
    return f"{', '.join(described[:-1])} or {described[-1]}."


# What each error status means, with the codes it carries.
ERROR_DESCRIPTIONS: dict[int, str] = {
    status: _describe(status) for status in (400, 401, 403, 404, 409, 413, 415, 422, 429, 503)
}


class ApiErrorDetail(serializers.Serializer):
    code = serializers.CharField(help_text="A stable, machine-readable error code.")
    message = serializers.CharField(help_text="What went wrong and what to do about it.")
    field = serializers.CharField(required=False, help_text="The input field at fault, when there is one.")


class ApiError(serializers.Serializer):
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
