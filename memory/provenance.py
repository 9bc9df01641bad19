"""Where a tool write came from: the messages it was learned from and the turn it was written during.

Messages and turns belong to conversations, which builds on memory; memory knows them only through
the resolver conversations registers at start-up (ConversationsConfig.ready), as it registers its
tools and its vector index.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

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


Resolver = Callable[[SourceRequest], Recorder]
_resolvers: list[Resolver] = []


def register_resolver(resolver: Resolver) -> None:
    _resolvers[:] = [resolver]


def resolve_sources(request: SourceRequest) -> Recorder | None:
    """A recorder of the named sources, once each is checked (UnknownSource, 422, names the field of
    the first that is not the calling agent's with this person); None when none is named."""
    if not request.message_ids and request.turn_id is None:
        return None
    if not _resolvers:
        raise UnknownSource("No conversations are kept here, so no source can be named.", field="source_messages")
    return _resolvers[0](request)
