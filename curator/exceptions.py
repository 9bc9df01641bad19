from __future__ import annotations

from config.exceptions import DomainError


class PlanRejected(DomainError):
    """A consolidation plan that breaks a rule (an unknown key, a key used twice, a merge across scope)."""

    code = "plan_rejected"
