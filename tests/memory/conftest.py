from __future__ import annotations

import pytest

from accounts.models import Person
from memory.models import Revision
from memory.services import Actor
from tests.factories import PersonFactory


@pytest.fixture
def person(tenant) -> Person:
    return PersonFactory(team=tenant.team, external_id="ada")


@pytest.fixture
def actor(tenant) -> Actor:
    return Actor(Revision.Actor.AGENT, tenant.agent.slug, "req-1")


def note_fields(**overrides: object) -> dict[str, object]:
    fields = {"key": "home-city", "description": "Where the person lives", "content": "Ada lives in Oslo."}
    fields.update(overrides)
    return fields
