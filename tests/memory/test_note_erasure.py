"""Erasing a note reaches the revision log: every revision of its bank and key, refused attempts
included, loses its content; a key built from the content is replaced wherever the log names it;
the events stay."""

from __future__ import annotations

from uuid import uuid4

import pytest

from accounts.models import Person
from memory.exceptions import Refused, TooLong
from memory.models import Note, Revision
from memory.services import (
    Actor,
    append_observation,
    edit_note,
    erase_note,
    merge_notes,
    record_refused_call,
    remember,
    update_bank_settings,
)
from tests.support.canary import find_text
from tests.support.factories import note_fields, written
from tests.support.fixtures import Tenant

pytestmark = pytest.mark.django_db


def new_canary() -> str:
    return f"cnry{uuid4().hex[:10]}"


def test_erasing_a_note_blanks_refused_attempts_and_replaces_its_content_built_key(
    tenant: Tenant, person: Person, actor: Actor
) -> None:
    canary = new_canary()
    key = f"preference-{canary}-pastries"
    note = written(remember(
        team=tenant.team, person=person, actor=actor,
        **note_fields(key=key, description=f"Loves {canary} pastries", content=f"Ada loves {canary} pastries."),
    ))  # fmt: skip
    # A refused edit (over the cap) and a refused append under the same key carry the attempted text.
    with pytest.raises(TooLong):
        edit_note(note=note, actor=actor, mode="replace", content=f"{canary} " * 400)
    append_observation(team=tenant.team, person=person, actor=actor, category="food", observation="Likes rye.")
    with pytest.raises(TooLong):
        append_observation(
            team=tenant.team, person=person, actor=actor, category="x", key=key, observation=f"{canary} " * 400,
            bank="private",
        )  # fmt: skip
    # A call refused before its bank was resolved (malformed arguments), naming the key.
    record_refused_call(
        team=tenant.team, actor=actor, operation="remember",
        arguments={"person": "ada", "key": key, "content": f"again {canary}", "kind": 7}, message="kind: bad",
    )  # fmt: skip
    assert {s.table for s in find_text(canary)} == {"memory_note", "memory_revision"}
    kept = Revision.objects.filter(team=tenant.team).exclude(note_key=key).count()

    erase_note(note=Note.objects.get(pk=note.pk), actor=actor)

    assert find_text(canary) == []
    erased = Revision.objects.filter(team=tenant.team, note_key=f"erased-{note.pk}").order_by("id")
    assert list(erased.values_list("action", flat=True)) == ["create", "refused", "refused", "refused", "delete"]
    assert all(r.erased and r.before is None and r.after is None for r in erased)
    assert erased.last().reason == "erased on the person's request"  # type: ignore[union-attr]
    # The food note and its events are untouched.
    assert Revision.objects.filter(team=tenant.team).exclude(note_key=f"erased-{note.pk}").count() == kept
    assert Note.objects.get(key="food").content == "Likes rye."
    assert not Revision.objects.filter(note_key="food", erased=True).exists()


def test_erasing_a_note_replaces_its_key_in_the_reasons_of_the_banks_other_events(
    tenant: Tenant, person: Person, actor: Actor
) -> None:
    canary = new_canary()
    key = f"fact-{canary}"
    note = written(remember(team=tenant.team, person=person, actor=actor, **note_fields(key=key, content="Ada.")))
    update_bank_settings(bank=note.bank, actor=actor, changes={"policy": "bounded", "capacity": 2})
    remember(team=tenant.team, person=person, actor=actor, kind="identity", **note_fields(key="name", content="A."))
    # The bank is at capacity: an ephemeral newcomer is refused, and the refusal names the weakest.
    with pytest.raises(Refused):
        remember(team=tenant.team, person=person, actor=actor, kind="ephemeral", **note_fields(key="mood"))
    assert Revision.objects.get(note_key="mood").reason.count(key) == 1

    erase_note(note=Note.objects.get(pk=note.pk), actor=actor)

    assert find_text(canary) == []
    assert Revision.objects.get(note_key="mood").reason.count(f"erased-{note.pk}") == 1
    assert Note.objects.filter(key="name").exists()


def test_erasing_a_note_erases_the_notes_merged_into_it(tenant: Tenant, person: Person, actor: Actor) -> None:
    canary = new_canary()
    keep = written(remember(team=tenant.team, person=person, actor=actor, **note_fields(key="home", content="Oslo")))
    absorbed = written(remember(
        team=tenant.team, person=person, actor=actor, **note_fields(key=f"moved-{canary}", content=f"Moved {canary}")
    )).pk  # fmt: skip
    merged = merge_notes(
        keep=keep, absorb=[Note.objects.get(pk=absorbed)], actor=actor, content="Lives in Oslo, moved.", reason="dup"
    )
    other = written(remember(team=tenant.team, person=person, actor=actor, **note_fields(key="pet", content="Cat")))

    erase_note(note=merged, actor=actor)

    assert find_text(canary) == []
    assert Revision.objects.filter(note_key=f"erased-{absorbed}", erased=True).count() == 2
    assert Revision.objects.get(note_id=other.pk).after["content"] == "Cat"  # type: ignore[index]
