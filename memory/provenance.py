"""Where a note came from: the messages it was learned from and the turn it was written during.

Messages and turns belong to conversations, which builds on memory; memory reaches them only
through the backend conversations registers at start-up (ConversationsConfig.ready), as it
registers its tools and its vector index. The tools check and record the sources a write names;
the lens shows a note's origins, and erasing a note (memory.services.erase_note, whatever asks for
it) erases the messages it was learned from and clears the summaries they fed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from accounts.models import Agent, Person, Team
from memory.exceptions import UnknownSource
from memory.models import Note

Recorder = Callable[[Note], None]


@dataclass(frozen=True)
class SourceRequest:
    team: Team
    agent: Agent
    person: Person
    message_ids: list[int] = field(default_factory=list)
    turn_id: int | None = None


@dataclass(frozen=True)
class Origin:
    """One message a note came from, as the lens shows it."""

    when: datetime
    role: str  # "person" or "agent"
    agent: str  # the agent's name
    quote: str  # a short quote; empty once the message is erased
    url: str  # the message in its conversation, in the lens
    erased: bool = False
    during_turn: bool = False  # named as the turn the note was written during, not as a source


@dataclass(frozen=True)
class ErasedSources:
    """What erasing a note's sources took: the messages, now tombstones, and the conversation
    summaries built from them, cleared until rebuilt from what is left."""

    messages: int = 0
    summaries: int = 0


class Backend(Protocol):
    def resolve(self, request: SourceRequest) -> Recorder: ...

    def origins(self, note: Note) -> list[Origin]: ...

    def source_count(self, note: Note) -> int: ...

    def erase_sources(self, note: Note) -> ErasedSources: ...

    def record_kept(self, note: Note, message_ids: list[int], turn_id: int | None) -> None: ...

    def message_origins(self, team_id: int, message_ids: list[int]) -> dict[int, Origin]: ...


_backends: list[Backend] = []


def register_backend(backend: Backend) -> None:
    _backends[:] = [backend]


def resolve_sources(request: SourceRequest) -> Recorder | None:
    """A recorder of the named sources, once each is checked (UnknownSource, 422, names the field of
    the first that is not the calling agent's with this person); None when none is named."""
    if not request.message_ids and request.turn_id is None:
        return None
    if not _backends:
        raise UnknownSource("No conversations are kept here, so no source can be named.", field="source_messages")
    return _backends[0].resolve(request)


def origins_of(note: Note) -> list[Origin]:
    return _backends[0].origins(note) if _backends else []


def source_count(note: Note) -> int:
    """How many messages (not yet erased) erasing this note would erase with it."""
    return _backends[0].source_count(note) if _backends else 0


def erase_sources(note: Note) -> ErasedSources:
    """Erase the messages a note was learned from (a fact lives on in what it came from), and clear
    the summaries they fed. Only memory.services.erase_note calls this, in its transaction."""
    return _backends[0].erase_sources(note) if _backends else ErasedSources()


def record_kept_sources(note: Note, message_ids: list[int], turn_id: int | None) -> None:
    """Record, for a note kept on review, the sources its proposal named (checked when it was made):
    those still there and not erased, since a message erased while it waited is no source any more."""
    if _backends and (message_ids or turn_id is not None):
        _backends[0].record_kept(note, message_ids, turn_id)


def proposal_origins(team_id: int, message_ids: list[int]) -> dict[int, Origin]:
    """The messages proposals were learned from, by id, as the lens shows a note's origins (one
    query for all of a person's proposals)."""
    return _backends[0].message_origins(team_id, message_ids) if _backends and message_ids else {}
