"""Whole-person erasure: everything held about a person in a team, in one transaction.

Memory erases its own part (the notes of the person's banks, each as every note is erased, with the
messages it was learned from; what shared banks say of them; the content of their revisions, their
mutes and banks) and asks every section other apps registered
(memory.person_data: conversations with their messages, summaries, vectors and turns) to erase
theirs. The revision log keeps its events (who, when, which action) with their content blank.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Any

from django.db import transaction
from django.db.models import Case, CharField, F, TextField, Value, When
from django.db.models.functions import Cast, Concat

from accounts.models import Person, Team
from accounts.services import delete_person, tombstone_person
from config.exceptions import NotFound
from memory import kept_banks, person_data
from memory.models import Bank, Mute, Note, Proposal, Revision
from memory.queries import CONTENT_ACTIONS, shared_notes_about
from memory.services import reads
from memory.services.mutes import banks_they_read
from memory.services.notes import edit_note, erase_note
from memory.services.revisions import ERASED_REASON, Actor, new_bank_version
from webhooks.models import EventType
from webhooks.services import emit_event, erase_event_content


@dataclass
class PersonErasure:
    """What an erasure removed, by kind of row."""

    person: str
    notes: int = 0
    shared_notes_redacted: int = 0
    revisions: int = 0
    mutes: int = 0
    proposals: int = 0
    banks: int = 0
    sections: dict[str, int] = field(default_factory=dict)
    hard: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {
            "person": self.person,
            "erased": {
                "notes": self.notes,
                "shared_notes_redacted": self.shared_notes_redacted,
                "revisions": self.revisions,
                "mutes": self.mutes,
                "proposals": self.proposals,
                "banks": self.banks,
                **self.sections,
            },
            "person_row": "deleted" if self.hard else "tombstone",
        }

    def summary(self) -> str:
        counts = ", ".join(f"{count} {name.replace('_', ' ')}" for name, count in self.as_dict()["erased"].items())
        return f"Erased {counts}; the person row was {'deleted' if self.hard else 'kept as a tombstone'}."


def _lines(snapshot: Any) -> list[str]:
    content = snapshot.get("content") if isinstance(snapshot, dict) else None
    return content.splitlines() if isinstance(content, str) else []


def _their_lines(note: Note, person: Person) -> tuple[set[str], set[str]]:
    """The lines and descriptions that writes about this person put into a shared note."""
    lines: set[str] = set()
    descriptions: set[str] = set()
    for revision in Revision.objects.filter(team_id=note.team_id, note_id=note.pk, person=person).filter(
        action__in=CONTENT_ACTIONS
    ):
        lines |= set(_lines(revision.after)) - set(_lines(revision.before))
        after_description = (revision.after or {}).get("description")
        if after_description and after_description != (revision.before or {}).get("description"):
            descriptions.add(after_description)
    return lines, descriptions


def _scrub_snapshot(snapshot: Any, lines: set[str], descriptions: set[str], fallback: str) -> Any:
    if not isinstance(snapshot, dict):
        return snapshot
    cleaned = dict(snapshot)
    if isinstance(cleaned.get("content"), str):
        cleaned["content"] = "\n".join(line for line in cleaned["content"].splitlines() if line not in lines)
    if cleaned.get("description") in descriptions:
        cleaned["description"] = fallback
    return cleaned


def _erase_from_shared_note(note: Note, person: Person, actor: Actor) -> bool:
    """Take what was said of the person out of a shared note. A note only they were the subject of
    is erased whole; a note others wrote to as well keeps their lines, and its revisions lose the
    person's. Returns whether the note was erased whole."""
    others_wrote = (
        Revision.objects.filter(team_id=note.team_id, note_id=note.pk, action__in=CONTENT_ACTIONS)
        .exclude(person=person)
        .exists()
    )
    lines, descriptions = _their_lines(note, person)
    remaining = [line for line in note.content.splitlines() if line not in lines]
    if not others_wrote or not "".join(remaining).strip():
        erase_note(note=note, actor=actor)
        return True
    fallback = f"What is known about {(note.category or note.key).replace('-', ' ')}"
    description = fallback if note.description in descriptions else note.description
    edit_note(note=note, actor=actor, mode="replace", content="\n".join(remaining), description=description)
    for revision in Revision.objects.filter(team_id=note.team_id, note_id=note.pk):
        Revision.objects.filter(pk=revision.pk).update(
            before=_scrub_snapshot(revision.before, lines, descriptions, fallback),
            after=_scrub_snapshot(revision.after, lines, descriptions, fallback),
        )
    return False


def _blank_their_revisions(team: Team, person: Person) -> int:
    """Every revision naming the person loses its content and its key (which may have been built
    from content); the event stays. Refused attempts that never had a note get a key of their own."""
    return Revision.objects.filter(team=team, person=person).update(
        before=None,
        after=None,
        erased=True,
        note_key=Case(
            When(note_id__isnull=False, then=Concat(Value("erased-"), Cast("note_id", CharField()))),
            When(note_key="", then=Value("")),
            default=Concat(Value("erased-attempt-"), Cast("id", CharField())),
            output_field=CharField(),
        ),
        reason=Case(When(reason=ERASED_REASON, then=F("reason")), default=Value(""), output_field=TextField()),
    )


@transaction.atomic
def erase_person(*, team: Team, person: Person, actor: Actor, hard: bool = False) -> PersonErasure:
    """Erase everything held about a person in a team, in one transaction: the notes of their banks,
    what shared banks say of them, the content of every revision about them, their mutes, proposals and banks,
    and every registered section (their conversations). The person row stays as a tombstone (no
    display name, erased_at set), or with `hard` is deleted; the revision log's events stay either way."""
    if person.team_id != team.pk:
        raise NotFound("No such person in this team.", field="person")
    # One erasure at a time per person; writes about them that come later start afresh.
    person = Person.objects.select_for_update().get(pk=person.pk)
    report = PersonErasure(person=person.external_id, hard=hard)
    for note in list(Note.objects.filter(team=team, bank__person=person).select_related("bank")):
        erase_note(note=note, actor=actor)
        report.notes += 1
    for note in list(shared_notes_about(team=team, person=person)):
        if _erase_from_shared_note(note, person, actor):
            report.notes += 1
        else:
            report.shared_notes_redacted += 1
    report.revisions = _blank_their_revisions(team, person)
    new_bank_version(banks_they_read(person))  # their mutes go: what their turns see changes
    report.mutes = Mute.objects.filter(team=team, person=person).delete()[1].get("memory.Mute", 0)
    # What waited for their review goes too, decided or not: kept or declined rows hold no words,
    # but still say which agent proposed what, and when.
    report.proposals = Proposal.objects.filter(team=team, person=person).delete()[1].get("memory.Proposal", 0)
    for section in person_data.sections():
        report.sections.update(section.erase(team, person))
    report.sections["reads"] = reads.erase_reads_of_person(team=team, person=person)
    # The banks are empty now; their events keep the bank id (bank_ref) when the row goes.
    theirs = list(Bank.objects.filter(team=team, person=person).values_list("pk", flat=True))
    report.banks = Bank.objects.filter(team=team, person=person).delete()[1].get("memory.Bank", 0)
    # No recall reads these banks again: this process lets go of what it kept of them at once.
    transaction.on_commit(partial(kept_banks.forget_kept_banks, theirs))
    # What webhooks were told of them loses its words; receivers are told to erase what they hold.
    erase_event_content(team_id=team.pk, person_id=person.pk, hard=hard)
    emit_event(
        team_id=team.pk,
        event_type=EventType.PERSON_ERASED,
        data={"person": person.external_id, "actor": actor.kind, "hard": hard},
        subject=f"person:{person.pk}",
    )
    if hard:
        # The events stay, but no longer name the person: their id leaves the bank ids too.
        for bank_ref in set(Revision.objects.filter(team=team, person=person).values_list("bank_ref", flat=True)):
            prefix = f"user:{person.external_id}"
            if bank_ref == prefix or bank_ref.startswith(prefix + ":"):
                Revision.objects.filter(team=team, person=person, bank_ref=bank_ref).update(
                    bank_ref=f"user:erased-person-{person.pk}" + bank_ref.removeprefix(prefix)
                )
        Revision.objects.filter(team=team, person=person).update(person=None)
        delete_person(person=person)
    else:
        tombstone_person(person=person)
    return report
