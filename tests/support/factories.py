"""Data builders for tests, each defined here once: model factories, a note's fields, a recorded chat.

Fixtures (tenants, `person`, `conversation`, `actor`, inline indexing) are in tests/support/fixtures.py.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import factory
from django.utils import timezone

from accounts.models import Agent, Person, Team
from conversations.models import Conversation, Message
from conversations.services import record_message
from memory.models import Note
from memory.services import WriteResult


class TeamFactory(factory.django.DjangoModelFactory[Team]):
    class Meta:
        model = Team

    slug = factory.Sequence(lambda n: f"team-{n}")
    name = factory.LazyAttribute(lambda team: team.slug.title())


class AgentFactory(factory.django.DjangoModelFactory[Agent]):
    class Meta:
        model = Agent

    team = factory.SubFactory(TeamFactory)
    slug = factory.Sequence(lambda n: f"agent-{n}")
    name = factory.LazyAttribute(lambda agent: agent.slug.title())


class PersonFactory(factory.django.DjangoModelFactory[Person]):
    class Meta:
        model = Person

    team = factory.SubFactory(TeamFactory)
    external_id = factory.Sequence(lambda n: f"person-{n}")


def note_fields(**overrides: Any) -> dict[str, Any]:
    """A note's key, description and content for the write path (Ada's home city unless overridden)."""
    fields: dict[str, Any] = {
        "key": "home-city",
        "description": "Where the person lives",
        "content": "Ada lives in Oslo.",
    }
    fields.update(overrides)
    return fields


def written(result: WriteResult) -> Note:
    """The note a write created or changed (a delete leaves none)."""
    assert result.note is not None, f"the write left no note ({result.action})"
    return result.note


def chat(conversation: Conversation, pairs: list[tuple[str, str]], *, days_ago: int = 0) -> list[Message]:
    """Record (person, agent) exchanges in order, spaced a minute apart, the last one ending
    about a minute before now (`days_ago` days earlier with it). Returns the messages recorded."""
    start = timezone.now() - timedelta(days=days_ago, minutes=len(pairs) * 2 + 1)
    recorded = []
    for index, (said, replied) in enumerate(pairs):
        at = start + timedelta(minutes=2 * index)
        recorded.append(record_message(conversation=conversation, role="user", content=said, created_at=at))
        recorded.append(
            record_message(
                conversation=conversation, role="assistant", content=replied, created_at=at + timedelta(seconds=30)
            )
        )
    return recorded
