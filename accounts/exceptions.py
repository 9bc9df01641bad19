from __future__ import annotations

from config.exceptions import DomainError


class InvalidSlug(DomainError):
    code = "invalid"


class SlugTaken(DomainError):
    code = "conflict"


class PersonIdTooLong(DomainError):
    code = "too_long"
