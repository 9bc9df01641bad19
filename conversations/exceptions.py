from __future__ import annotations

from config.exceptions import DomainError


class ConversationNotFound(DomainError):
    code = "not_found"


class MessageNotFound(DomainError):
    code = "not_found"


class OtherAgentsConversation(DomainError):
    """An ordinary key named another agent's conversations; only an admin-capable key names any agent of its team."""

    code = "permission_denied"


class MessageTooLong(DomainError):
    code = "too_long"


class InvalidMessage(DomainError):
    code = "invalid"


class TurnAlreadyAnswered(DomainError):
    code = "conflict"


class MemoryUnavailable(DomainError):
    """The memory store failed while composing, and the operator chose to fail hard."""

    code = "memory_unavailable"
