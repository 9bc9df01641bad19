from __future__ import annotations

import re
import uuid
from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse

from config.errors import json_error_response

_SAFE_ID = re.compile(r"[A-Za-z0-9._:-]{1,100}")


class ApiBodyLimitMiddleware:
    """Refuse oversized API bodies with 413 before anything reads them.

    DRF reads the request stream directly, which bypasses Django's
    DATA_UPLOAD_MAX_MEMORY_SIZE check, so the limit is enforced here on Content-Length.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path.startswith("/api/"):
            try:
                length = int(request.META.get("CONTENT_LENGTH") or 0)
            except ValueError:
                return json_error_response(request, "invalid", "The Content-Length header is not a number.", 400)
            limit = settings.API_MAX_BODY_BYTES
            if length > limit:
                return json_error_response(
                    request,
                    "too_large",
                    f"The request body is {length} bytes; the limit is {limit} bytes. Send less per request.",
                    413,
                )
        return self.get_response(request)


class RequestIdMiddleware:
    """Give every request an id (the caller's X-Request-ID when sane), echoed back and kept in revisions."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        given = request.headers.get("X-Request-ID", "")
        request.request_id = given if _SAFE_ID.fullmatch(given) else uuid.uuid4().hex
        response = self.get_response(request)
        response["X-Request-ID"] = request.request_id
        return response
