"""Bank addressing and applicability: the bank id of a person and a scope, and the banks a turn reads."""

from __future__ import annotations

from accounts.models import Person, Team
from memory.exceptions import InvalidNote
from memory.models import Bank


def bank_id_for(kind: str, person: Person | None, scope: str) -> str:
    if kind == Bank.Kind.SHARED:
        return f"scope:{scope}"
    assert person is not None
    if kind == Bank.Kind.PRIVATE and scope:
        return f"user:{person.external_id}:{scope}"
    return f"user:{person.external_id}"


def bank_kind_for(which: str, scope: str) -> str:
    """Map a tool's bank choice to a bank kind. Without a scope, private means the person everywhere."""
    if which not in Bank.Kind.values:
        raise InvalidNote(f"bank must be one of private, shared, global (got {which!r}).", field="bank")
    if which == Bank.Kind.SHARED and not scope:
        raise InvalidNote("A shared bank needs a scope, such as project:apollo.", field="scope")
    if which == Bank.Kind.PRIVATE and not scope:
        return Bank.Kind.GLOBAL
    return which


def applicable_banks(*, team: Team, person: Person, scope: str) -> list[Bank]:
    """Existing banks a turn for this person in this scope reads, narrowest first."""
    wanted = [bank_id_for(Bank.Kind.GLOBAL, person, "")]
    if scope:
        wanted = [bank_id_for(Bank.Kind.PRIVATE, person, scope), bank_id_for(Bank.Kind.SHARED, None, scope), *wanted]
    by_id = {bank.address: bank for bank in Bank.objects.filter(team=team, address__in=wanted).order_by()}
    return [by_id[address] for address in wanted if address in by_id]
