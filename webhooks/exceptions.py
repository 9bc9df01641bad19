from __future__ import annotations

from config.exceptions import DomainError


class UnsafeUrl(DomainError):
    """A webhook URL Mnemo will not call: not http(s), or its host resolves to a private address."""

    code = "invalid"
