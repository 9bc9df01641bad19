from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote_to_bytes

from django.conf import settings
from django.http import HttpRequest, HttpResponse

from config.errors import json_error_response
from config.text import TextKind, escape_unstorable, text_problem

logger = logging.getLogger(__name__)

_SAFE_ID = re.compile(r"[A-Za-z0-9._:-]{1,100}")


class ApiBodyLimitMiddleware:
    """Refuse oversized bodies with 413 on their Content-Length (the API's error shape under /api/).

    DRF reads the request stream directly, which bypasses Django's DATA_UPLOAD_MAX_MEMORY_SIZE
    check. Under a server, config.bodylimit has refused them already, as they arrived (chunked
    ones too); this keeps the rule for whatever calls Django directly (the test client).
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        raw = request.META.get("CONTENT_LENGTH") or "0"
        if not (raw.isascii() and raw.isdigit()):
            return _refuse(request, "invalid", "The Content-Length header is not a number of bytes.", 400)
        length, limit = int(raw), settings.API_MAX_BODY_BYTES
        if length > limit:
            message = f"The request body is {length} bytes; the limit is {limit} bytes. Send less per request."
            return _refuse(request, "too_large", message, 413)
        return self.get_response(request)


def _refuse(request: HttpRequest, code: str, message: str, status: int, field: str | None = None) -> HttpResponse:
    logger.info("refused %s %s: %s", request.method, escape_unstorable(request.path), escape_unstorable(message))
    if request.path.startswith("/api/"):
        return json_error_response(request, code, message, status, field=field)
    return HttpResponse(message, status=status, content_type="text/plain; charset=utf-8")


class TracedRequest(HttpRequest):
    """A request that went through RequestIdMiddleware (all of them, outside tests that build their own)."""

    request_id: str


class RequestIdMiddleware:
    """Give every request an id (the caller's X-Request-ID when sane), echoed back and kept in revisions."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: TracedRequest) -> HttpResponse:
        given = request.headers.get("X-Request-ID", "")
        request.request_id = given if _SAFE_ID.fullmatch(given) else uuid.uuid4().hex
        response = self.get_response(request)
        response["X-Request-ID"] = request.request_id
        return response


# Query parameters and path values that name things are ids; everything else is held to the text rule.
ID_PARAMETERS = frozenset({"person", "bank", "category", "agent", "tool"})
# URL keyword arguments, by the name the API documents them under.
PATH_FIELDS = {"external_id": "person", "bank_id": "bank"}


def _strict_pairs(encoded: str) -> list[tuple[str, str]] | tuple[str, str, str]:
    """(name, value) pairs of a query string or form body, or (field, problem, the value as it came)
    when one is not UTF-8.

    Django decodes these with errors="replace", which would turn an encoded lone surrogate
    (%ED%A0%80) into U+FFFD silently; here it is refused instead.
    """
    pairs = []
    for part in encoded.split("&"):
        if not part:
            continue
        raw_name, _, raw_value = part.partition("=")
        name_bytes = unquote_to_bytes(raw_name.replace("+", " "))
        name = name_bytes.decode("utf-8", "replace")
        try:
            name_bytes.decode("utf-8")
            value = unquote_to_bytes(raw_value.replace("+", " ")).decode("utf-8")
        except UnicodeDecodeError:
            return name, "is not valid UTF-8 (an encoded lone surrogate, say); send UTF-8 text.", raw_value
        pairs.append((name, value))
    return pairs


class RequestTextMiddleware:
    """Refuse query parameters, path values and form fields no field of Mnemo could take (400 `invalid`).

    Bodies of the API are checked by its JSON parser (config.parsers); form fields' content by
    the forms and the write path, which log what they refuse. What is refused here never reached a
    view: it goes to the application log.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_view(
        self, request: HttpRequest, view: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> HttpResponse | None:
        found = self._problem(request, view, kwargs)
        if found is None:
            return None
        field, problem = found
        return _refuse(request, "invalid", f"{field} {problem}", 400, field=field)

    def _problem(
        self, request: HttpRequest, view: Callable[..., Any], kwargs: dict[str, Any]
    ) -> tuple[str, str] | None:
        for name, value in kwargs.items():
            if isinstance(value, str) and (problem := text_problem(value, TextKind.IDENTIFIER)):
                return PATH_FIELDS.get(name, name), problem
        pairs = _strict_pairs(request.META.get("QUERY_STRING", ""))
        if isinstance(pairs, tuple):
            return pairs[:2]
        for name, value in pairs:
            if problem := text_problem(name, TextKind.TEXT):
                return escape_unstorable(name), f"(a parameter name) {problem}"
            if problem := text_problem(value, TextKind.IDENTIFIER if name in ID_PARAMETERS else TextKind.TEXT):
                return name, problem
        if not getattr(view, "checks_form_encoding", False) and (found := form_encoding_problem(request)):
            return found[:2]
        return None


def form_encoding_problem(request: HttpRequest) -> tuple[str, str, str] | None:
    """(field, problem, the value still percent-encoded) when a form body is not UTF-8. Only the
    encoding: what the fields hold is the forms' and the write path's to refuse, so that a refused
    edit is in the revision log."""
    if request.method == "POST" and request.content_type == "application/x-www-form-urlencoded":
        form = _strict_pairs(request.body.decode("latin-1"))
        if isinstance(form, tuple):
            return form
    return None


def checks_form_encoding[V: Callable[..., Any]](view: V) -> V:
    """Mark a view that calls form_encoding_problem itself (to log the refusal as a refused write)."""
    # In the function's __dict__, which functools.wraps copies onto the decorators outside this one.
    view.__dict__["checks_form_encoding"] = True
    return view
