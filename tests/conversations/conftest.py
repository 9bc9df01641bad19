from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from accounts.models import Person
from conversations.models import Conversation, Message
from conversations.services import record_message, start_conversation
from tests.factories import PersonFactory


@pytest.fixture
def person(tenant) -> Person:
    return PersonFactory(team=tenant.team, external_id="ada")


@pytest.fixture
def conversation(tenant, person) -> Conversation:
    return start_conversation(team=tenant.team, agent=tenant.agent, person=person)


def chat(conversation: Conversation, pairs: list[tuple[str, str]], *, days_ago: int = 0) -> list[Message]:
    """Record (person, agent) exchanges in order, spaced a minute apart."""
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
