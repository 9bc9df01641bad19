"""What a person mutes for an agent: a category the agent must not be shown."""

from __future__ import annotations

from django.db import transaction
from django.db.models import Q

from accounts.models import Agent, Person
from memory.exceptions import InvalidNote, NoteNotFound
from memory.models import Bank, CategoryMute
from memory.services.revisions import new_bank_version
from memory.validation import check_category


def banks_they_read(person: Person) -> list[int]:
    """A mute changes what the person's turns see in every bank they read: their own banks and the
    team's shared ones (a new version of a shared bank costs its other readers one fresh read)."""
    return list(
        Bank.objects.filter(Q(person=person) | Q(kind=Bank.Kind.SHARED), team_id=person.team_id).values_list(
            "pk", flat=True
        )
    )


@transaction.atomic
def mute_category(*, person: Person, agent: Agent, category: str) -> CategoryMute:
    if agent.team_id != person.team_id:
        raise NoteNotFound("That agent is not in this person's team.", field="agent")
    normalized = check_category(category)
    if not normalized:
        raise InvalidNote("category must not be empty.", field="category")
    mute, created = CategoryMute.objects.get_or_create(
        team_id=person.team_id, person=person, agent=agent, category=normalized
    )
    if created:
        new_bank_version(banks_they_read(person))
    return mute


@transaction.atomic
def unmute_category(*, person: Person, agent: Agent, category: str) -> None:
    deleted, _ = CategoryMute.objects.filter(
        team_id=person.team_id, person=person, agent=agent, category=check_category(category)
    ).delete()
    if deleted:
        new_bank_version(banks_they_read(person))


@transaction.atomic
def mute_for_agents(*, person: Person, agents: list[Agent], category: str) -> list[CategoryMute]:
    """Mute a category of this person for each of these agents (an admin's mute for every agent of
    the team names them all); a mute already there is kept as it is."""
    return [mute_category(person=person, agent=agent, category=category) for agent in agents]


@transaction.atomic
def remove_mute(*, mute: CategoryMute) -> None:
    """Unmute: the agent is shown the category's notes again (nothing was deleted by the mute)."""
    unmute_category(person=mute.person, agent=mute.agent, category=mute.category)
