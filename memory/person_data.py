"""What apps above memory hold about a person, for whole-person requests (export, import, erasure).

Memory answers a data-subject request: `memory.packages.export_person` exports and
`memory.services.erase_person` erases everything held about a person in a team. Conversations
live in an app above memory, which memory must not import, so that app registers a section here
from its `AppConfig.ready`: the package member it fills, and how it exports, checks, imports and
erases its part. Memory calls every registered section, in registration order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from accounts.models import Agent, Person, Team


@dataclass(frozen=True)
class PersonSection:
    name: str  # the member of a memory package it fills, e.g. "conversations"
    # (team, person, agent): what the section holds about the person, as JSON; with an agent, only
    # what that agent may read.
    export: Callable[[Team, Person, Agent | None], list[dict[str, Any]]]
    # (member, agent): raises a DomainError naming the fault when the member is malformed, or when it
    # names another agent's data than the agent's (with an agent: an ordinary key's import); called
    # before anything is written or read.
    check: Callable[[Any, Agent | None], None]
    # (team, member): imports a checked member; returns what it did, as counts and refusals.
    load: Callable[[Team, Any], dict[str, Any]]
    # (team, person): deletes what the section holds about the person; returns counts by kind of row.
    erase: Callable[[Team, Person], dict[str, int]]


_SECTIONS: dict[str, PersonSection] = {}


def register(section: PersonSection) -> None:
    known = _SECTIONS.setdefault(section.name, section)
    if known is not section:
        raise ValueError(f"A person section named {section.name!r} is already registered.")


def sections() -> list[PersonSection]:
    return list(_SECTIONS.values())
