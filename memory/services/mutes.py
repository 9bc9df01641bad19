"""What a person mutes for an agent: a category, or one note, the agent must not be shown.

A mute withholds the muted notes, the messages they were learned from and the summary built from
those messages (conversations.queries.muted_messages); it deletes nothing, and unmuting gives it
all back.
"""

from __future__ import annotations

from django.db import transaction
from django.db.models import Q

from accounts.models import Agent, Person
from memory.exceptions import InvalidNote, NoteNotFound
from memory.models import Bank, Mute, Note
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


def notes_they_may_mute(person: Person) -> Q:
    """The notes a person may mute: those about them (their banks) and their team's shared ones."""
    return Q(team_id=person.team_id) & (Q(bank__person=person) | Q(bank__kind=Bank.Kind.SHARED))


def _check_agent(person: Person, agent: Agent) -> None:
    if agent.team_id != person.team_id:
        raise NoteNotFound("That agent is not in this person's team.", field="agent")


def _changed(person: Person) -> None:
    # Every process's kept notes and banks are per bank version: a new one is read anew everywhere
    # once this commits. Muted messages are read with each turn and search, so nothing else is kept.
    new_bank_version(banks_they_read(person))


@transaction.atomic
def mute_category(*, person: Person, agent: Agent, category: str) -> Mute:
    _check_agent(person, agent)
    normalized = check_category(category)
    if not normalized:
        raise InvalidNote("category must not be empty.", field="category")
    mute, created = Mute.objects.get_or_create(
        team_id=person.team_id, person=person, agent=agent, category=normalized, note=None
    )
    if created:
        _changed(person)
    return mute


@transaction.atomic
def unmute_category(*, person: Person, agent: Agent, category: str) -> None:
    deleted, _ = Mute.objects.filter(
        team_id=person.team_id, person=person, agent=agent, category=check_category(category), note=None
    ).delete()
    if deleted:
        _changed(person)


@transaction.atomic
def mute_note(*, person: Person, agent: Agent, note: Note) -> Mute:
    """Mute one note, categorised or not, for this agent; a mute already there is kept."""
    _check_agent(person, agent)
    if not Note.objects.filter(notes_they_may_mute(person), pk=note.pk).exists():
        raise NoteNotFound("That note is not one about this person.", field="note")
    mute, created = Mute.objects.get_or_create(team_id=person.team_id, person=person, agent=agent, note=note)
    if created:
        _changed(person)
    return mute


@transaction.atomic
def unmute_note(*, person: Person, agent: Agent, note: Note) -> None:
    deleted, _ = Mute.objects.filter(team_id=person.team_id, person=person, agent=agent, note=note).delete()
    if deleted:
        _changed(person)


@transaction.atomic
def mute_for_agents(
    *, person: Person, agents: list[Agent], category: str | None = None, note: Note | None = None
) -> list[Mute]:
    """Mute a category, or one note, of this person for each of these agents (an admin's mute for
    every agent of the team names them all); a mute already there is kept as it is."""
    if (category is None) == (note is None):
        raise InvalidNote("Name either a category or a note to mute, not both.", field="category")
    if note is not None:
        return [mute_note(person=person, agent=agent, note=note) for agent in agents]
    assert category is not None
    return [mute_category(person=person, agent=agent, category=category) for agent in agents]


@transaction.atomic
def remove_mute(*, mute: Mute) -> None:
    """Unmute: the agent is shown the notes, their messages and summaries again (nothing was deleted)."""
    deleted, _ = Mute.objects.filter(pk=mute.pk).delete()
    if deleted:
        _changed(mute.person)
