"""What a person mutes for an agent: a category the agent must not be shown."""

from __future__ import annotations

from django.db import transaction

from accounts.models import Agent, Person
from memory.exceptions import InvalidNote, NoteNotFound
from memory.models import CategoryMute
from memory.validation import check_category


@transaction.atomic
def mute_category(*, person: Person, agent: Agent, category: str) -> CategoryMute:
    if agent.team_id != person.team_id:
        raise NoteNotFound("That agent is not in this person's team.", field="agent")
    normalized = check_category(category)
    if not normalized:
        raise InvalidNote("category must not be empty.", field="category")
    mute, _ = CategoryMute.objects.get_or_create(
        team_id=person.team_id, person=person, agent=agent, category=normalized
    )
    return mute


@transaction.atomic
def unmute_category(*, person: Person, agent: Agent, category: str) -> None:
    CategoryMute.objects.filter(
        team_id=person.team_id, person=person, agent=agent, category=check_category(category)
    ).delete()
