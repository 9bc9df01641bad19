"""Bank addressing and applicability: the bank id of a person and a scope, and the banks a turn reads."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from accounts.models import Agent, Person, Team
from config.prepared import columns_of, run_together
from memory.exceptions import InvalidNote
from memory.models import Bank, Mute


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
    return applicable_banks_and_mutes(team=team, person=person, scope=scope, agent=None)[0]


@dataclass(frozen=True)
class Muted:
    """What a person muted for an agent: categories, and notes one by one."""

    categories: frozenset[str] = frozenset()
    notes: frozenset[int] = frozenset()

    def __bool__(self) -> bool:
        return bool(self.categories or self.notes)

    def hides(self, *, pk: int, category: str) -> bool:
        return pk in self.notes or category in self.categories


def applicable_banks_and_mutes(
    *, team: Team, person: Person, scope: str, agent: Agent | None
) -> tuple[list[Bank], Muted]:
    """applicable_banks, and what the person muted for `agent` (nothing without one), read in the
    same round trip: recall needs both every time."""
    read = banks_read(team=team, person=person, scope=scope)
    statements: list[tuple[str, Any]] = [(read.sql, read.params)]
    if agent is not None:  # both in one round trip
        statements.append((_MUTES, {"team": team.pk, "person": person.pk, "agent": agent.pk}))
    rows, *mutes = run_together(statements)
    found = [row for rows_muted in mutes for row in rows_muted or ()]
    muted = Muted(
        categories=frozenset(category for category, note in found if note is None),
        notes=frozenset(note for _, note in found if note is not None),
    )
    return read.banks(rows or []), muted


@dataclass(frozen=True)
class BanksRead:
    """The statement that reads the banks a turn for a person in a scope applies, for a caller that
    sends it with statements of its own (the composer, with its history: one round trip)."""

    sql: str  # parameters by name, prefixed bank_
    params: dict[str, Any]
    wanted: list[str]  # the banks' addresses, narrowest first

    def banks(self, rows: list[tuple[Any, ...]]) -> list[Bank]:
        """The banks of the statement's rows, narrowest first (applicable_banks' answer)."""
        columns = columns_of(Bank)
        by_id = {bank.address: bank for bank in map(columns.instance, rows)}
        return [by_id[address] for address in self.wanted if address in by_id]


def banks_read(*, team: Team, person: Person, scope: str) -> BanksRead:
    """The statement applicable_banks runs, for a scope already validated (validate_scope)."""
    wanted = [bank_id_for(Bank.Kind.GLOBAL, person, "")]
    if scope:
        wanted = [bank_id_for(Bank.Kind.PRIVATE, person, scope), bank_id_for(Bank.Kind.SHARED, None, scope), *wanted]
    return BanksRead(_banks_sql(), {"bank_team": team.pk, "bank_addresses": wanted}, wanted)


@functools.cache
def _banks_sql() -> str:
    """Read by hand-written SQL, every field through config.prepared.columns_of: a turn and a recall
    read the banks every time, and compiling the equivalent queryset cost more than running it."""
    columns = columns_of(Bank)
    return f"SELECT {columns.select} FROM {columns.table} WHERE team_id = %(bank_team)s AND address = ANY(%(bank_addresses)s::text[])"


_MUTES = (
    f"SELECT category, note_id FROM {Mute._meta.db_table} "
    "WHERE team_id = %(team)s AND person_id = %(person)s AND agent_id = %(agent)s"
)
