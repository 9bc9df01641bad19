"""Domain errors. Services raise these, never HTTP errors; config.errors maps them to responses.

A domain error carries a code, never an HTTP status: the one table from code to status is
config.errors.STATUS_BY_CODE. Each app declares the errors it raises in its own exceptions.py.
Kept free of DRF imports: services import it, and DRF's settings import the services' modules.
"""

from __future__ import annotations


class DomainError(Exception):
    """A rule of the domain refused an operation. Services raise these, never HTTP errors."""

    code = "invalid"

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


class NotFound(DomainError):
    code = "not_found"
