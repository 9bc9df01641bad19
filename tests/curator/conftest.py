from __future__ import annotations

import pytest

from accounts.models import Person
from conversations.models import Conversation
from conversations.services import record_message, start_conversation
from tests.factories import PersonFactory


@pytest.fixture
def person(tenant) -> Person:
    return PersonFactory(team=tenant.team, external_id="ada")


@pytest.fixture
def conversation(tenant, person) -> Conversation:
    return start_conversation(team=tenant.team, agent=tenant.agent, person=person)


def say(conversation: Conversation, *exchanges: tuple[str, str]) -> None:
    for said, replied in exchanges:
        record_message(conversation=conversation, role="user", content=said)
        record_message(conversation=conversation, role="assistant", content=replied)
