"""Typed errors. Every error Mnemo answers, `{"error": {"code", "message", "field"?}}`, becomes one of these.

Catch `MnemoError` for all of them, or a subclass for one case:

    try:
        mnemo.remember(person="ada", key="home", description="Where Ada lives", content=text)
    except BankFull as full:      # 409 bank_full: offer the person to drop something old
        ...
    except TooLong as too_long:   # 422 too_long: too_long.field names the input, the message its limit
        ...
"""

from __future__ import annotations

from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import httpx


class MnemoError(Exception):
    """An error answered by Mnemo (or the failure to reach it).

    status: the HTTP status (None when no answer came back); code, message, field: from the error
    body; retry_after: the seconds the server asked to wait (429, 503), when it said; request_id:
    the X-Request-ID to quote when asking an operator; attempts: requests made, retries included.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        code: str = "error",
        field: str | None = None,
        retry_after: float | None = None,
        request_id: str | None = None,
        attempts: int = 1,
        body: Any = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.field = field
        self.retry_after = retry_after
        self.request_id = request_id
        self.attempts = attempts
        self.body = body

    def __str__(self) -> str:
        where = f" ({self.field})" if self.field else ""
        status = f"{self.status} " if self.status is not None else ""
        return f"{status}{self.code}{where}: {self.message}"


class ConnectionFailed(MnemoError):
    """Mnemo could not be reached, or did not answer in time (no status)."""


class Invalid(MnemoError):
    """400: malformed input; `field` names the parameter or argument to fix."""


class AuthenticationError(MnemoError):
    """401: the API key is missing, unknown, revoked or malformed."""


class PermissionDenied(MnemoError):
    """403: the key may not do this (changing a bank needs an admin-capable key)."""


class NotFound(MnemoError):
    """404: nothing with that id in your team (another team's ids are not found either)."""


class Conflict(MnemoError):
    """409: the write conflicts with what is stored (code `conflict`, or a subclass below)."""


class BankFull(Conflict):
    """409 bank_full: the bank latched FULL; offer the person to drop something old first."""


class Refused(Conflict):
    """409 refused: a bounded bank kept what it holds; the message names its weakest note."""


class TooLarge(MnemoError):
    """413: the request body is over the server's API_MAX_BODY_BYTES."""


class Unprocessable(MnemoError):
    """422: a rule of the domain refused the input (unknown_ontology_id, ...); logged in the revision log."""


class TooLong(Unprocessable):
    """422 too_long: a cap (key 64, description 200, content 2,000, ...); the message names the field and limit."""


class RateLimited(MnemoError):
    """429: over the key's API_RATE; `retry_after` says when to try again."""


class Unavailable(MnemoError):
    """503: Mnemo (or what fronts it) cannot serve this now."""


class ServerError(MnemoError):
    """Any other 5xx: Mnemo failed; the request id finds it in the logs."""


_BY_STATUS: dict[int, type[MnemoError]] = {
    400: Invalid,
    401: AuthenticationError,
    403: PermissionDenied,
    404: NotFound,
    409: Conflict,
    413: TooLarge,
    422: Unprocessable,
    429: RateLimited,
    503: Unavailable,
}
_BY_CODE: dict[str, type[MnemoError]] = {
    "bank_full": BankFull,
    "refused": Refused,
    "too_long": TooLong,
}


_CODE_BY_STATUS = {
    400: "invalid",
    401: "not_authenticated",
    403: "permission_denied",
    404: "not_found",
    409: "conflict",
    413: "too_large",
    422: "unprocessable",
    429: "throttled",
    503: "unavailable",
}


def parse_retry_after(value: str | None) -> float | None:
    """Retry-After as seconds: a number, or an HTTP date (counted from now)."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def error_from_response(response: httpx.Response, *, attempts: int = 1) -> MnemoError:
    """The typed error for a non-2xx answer; a body without Mnemo's error shape still gets its status's class."""
    code, message, field = _CODE_BY_STATUS.get(response.status_code, "error"), "", None
    body: Any
    try:
        body = response.json()
    except ValueError:  # not JSON (a proxy's page): kept whole in .body; the message shows its start
        body = response.text
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        code = str(error.get("code") or code)
        message = str(error.get("message") or "")
        field = error.get("field") or None
    if not message:
        text = response.text.strip()
        request = response.request
        message = text[:300] if text else f"{request.method} {request.url.path} answered {response.status_code}."
    if code in _BY_CODE and response.status_code in (409, 422):
        cls = _BY_CODE[code]
    elif response.status_code in _BY_STATUS:
        cls = _BY_STATUS[response.status_code]
    elif response.status_code >= 500:
        cls = ServerError
    else:
        cls = MnemoError
    return cls(
        message,
        status=response.status_code,
        code=code,
        field=field,
        retry_after=parse_retry_after(response.headers.get("Retry-After")),
        request_id=response.headers.get("X-Request-ID"),
        attempts=attempts,
        body=body,
    )
