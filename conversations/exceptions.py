from __future__ import annotations

from config.exceptions import DomainError


class ConversationNotFound(DomainError):
    code = "not_found"
    http_status = 404


class MessageTooLong(DomainError):
    code = "too_long"
    http_status = 422


class InvalidMessage(DomainError):
    code = "invalid"
    http_status = 400


class MemoryUnavailable(DomainError):
    """The memory store failed while composing, and the operator chose to fail hard."""

    code = "memory_unavailable"
    http_status = 503
