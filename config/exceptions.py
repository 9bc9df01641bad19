"""Domain errors. Services raise these, never HTTP errors; config.errors maps them to responses.

Kept free of DRF imports: services import it, and DRF's settings import the services' modules.
"""

from __future__ import annotations


class DomainError(Exception):
    """A rule of the domain refused an operation. Services raise these, never HTTP errors."""

    code = "invalid"
    http_status = 422

    def __init__(self, message: str, *, field: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        if code is not None:
            self.code = code


class NotFound(DomainError):
    code = "not_found"
    http_status = 404


class Conflict(DomainError):
    code = "conflict"
    http_status = 409
