"""The bounded bank through the single write path: upserts, eviction before the write, refusals."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from memory import services
from memory.exceptions import Refused
from memory.models import Bank, Note, Revision

pytestmark = pytest.mark.django_db

ADMIN = services.Actor("admin", "test")
AGENT = services.Actor("agent", "bench-agent")
CAPACITY = 8


@pytest.fixture
def bank(tenant, person) -> Bank:
    bank = services.get_or_create_bank(team=tenant.team, person=person, scope="", kind=Bank.Kind.GLOBAL)
    return services.update_bank_settings(
        bank=bank, actor=ADMIN, changes={"policy": Bank.Policy.BOUNDED, "capacity": CAPACITY}
    )


def remember(tenant, person, key: str, kind: str = Note.Kind.FACT, content: str | None = None):
    return services.remember(
        team=tenant.team,
        person=person,
        actor=AGENT,
        key=key,
        description=f"About {key.replace('-', ' ')}",
        content=content or f"What is known about {key.replace('-', ' ')}.",
        bank=Bank.Kind.GLOBAL,
        kind=kind,
    )


def age(bank: Bank, key: str, delta: timedelta) -> None:
    Note.objects.filter(bank=bank, key=key).update(updated_at=timezone.now() - delta)


def keys(bank: Bank) -> set[str]:
    return set(Note.objects.filter(bank=bank).values_list("key", flat=True))


@pytest.fixture
def full_bank(tenant, person, bank) -> Bank:
    """Eight notes: seven year-old names and a preference that is the weakest by far."""
    for i in range(CAPACITY - 1):
        remember(tenant, person, f"name-{i}", Note.Kind.IDENTITY)
        age(bank, f"name-{i}", timedelta(days=365))
    remember(tenant, person, "favourite-sandwich", Note.Kind.PREFERENCE)
    age(bank, "favourite-sandwich", timedelta(days=400))
    assert Note.objects.filter(bank=bank).count() == CAPACITY
    return bank


def test_bank_fixture_is_bounded(bank):
    bank.refresh_from_db()
    assert bank.policy == Bank.Policy.BOUNDED
    assert bank.capacity == CAPACITY
    assert bank.limit == CAPACITY


def test_correction_by_key_replaces_the_note_in_a_full_bank(tenant, person, full_bank):
    revisions_before = Revision.objects.filter(bank=full_bank).count()
    original = Note.objects.get(bank=full_bank, key="favourite-sandwich")

    result = remember(tenant, person, "favourite-sandwich", Note.Kind.PREFERENCE, content="Now it is a BLT.")

    assert result.action == "updated"
    assert result.evicted == []
    assert Note.objects.filter(bank=full_bank).count() == CAPACITY
    assert Note.objects.filter(bank=full_bank, key="favourite-sandwich").count() == 1
    note = Note.objects.get(bank=full_bank, key="favourite-sandwich")
    assert note.pk == original.pk
    assert note.content == "Now it is a BLT."
    assert note.repetitions == 2
    new = Revision.objects.filter(bank=full_bank).order_by("id")[revisions_before:]
    assert [r.action for r in new] == [Revision.Action.UPDATE]
    update = new[0]
    assert update.note_id == note.pk
    assert update.before["content"] == original.content
    assert update.after["content"] == "Now it is a BLT."
    assert not Revision.objects.filter(bank=full_bank, action=Revision.Action.EVICT).exists()


def test_correction_by_key_of_the_weakest_note_does_not_evict_it(tenant, person, full_bank):
    # Even a correction that would be judged worthless as a newcomer (ephemeral) is an update.
    result = remember(tenant, person, "favourite-sandwich", Note.Kind.EPHEMERAL, content="Just for today.")
    assert result.action == "updated"
    assert keys(full_bank) == {*(f"name-{i}" for i in range(CAPACITY - 1)), "favourite-sandwich"}


def test_ninth_note_worth_more_evicts_the_weakest_before_the_write(tenant, person, full_bank):
    victim = Note.objects.get(bank=full_bank, key="favourite-sandwich")

    result = remember(tenant, person, "peanut-allergy", Note.Kind.FACT)

    assert result.action == "created"
    assert [e["key"] for e in result.evicted] == ["favourite-sandwich"]
    assert result.evicted[0]["id"] == victim.pk
    assert Note.objects.filter(bank=full_bank).count() == CAPACITY
    assert not Note.objects.filter(pk=victim.pk).exists()
    assert "peanut-allergy" in keys(full_bank)
    evict = Revision.objects.get(bank=full_bank, action=Revision.Action.EVICT)
    create = Revision.objects.get(bank=full_bank, action=Revision.Action.CREATE, note_key="peanut-allergy")
    assert evict.id < create.id
    assert evict.note_id == victim.pk
    assert evict.note_key == "favourite-sandwich"
    assert evict.actor == Revision.Actor.POLICY
    assert evict.before["key"] == "favourite-sandwich"


def test_ninth_note_worth_less_is_refused_and_nothing_changes(tenant, person, full_bank):
    notes_before = list(Note.objects.filter(bank=full_bank).order_by("key").values())
    revisions_before = Revision.objects.filter(bank=full_bank).count()

    with pytest.raises(Refused) as caught:
        remember(tenant, person, "on-the-train", Note.Kind.EPHEMERAL)

    assert caught.value.code == "refused"
    assert "'favourite-sandwich'" in caught.value.message
    assert "'on-the-train'" in caught.value.message
    assert list(Note.objects.filter(bank=full_bank).order_by("key").values()) == notes_before
    new = list(Revision.objects.filter(bank=full_bank).order_by("id")[revisions_before:])
    assert [r.action for r in new] == [Revision.Action.REFUSED]
    assert new[0].note_key == "on-the-train"
    assert new[0].after["key"] == "on-the-train"
    assert new[0].note_id is None


def test_a_year_old_name_is_not_pushed_out_by_a_fresh_sandwich(tenant, person, bank):
    for i in range(CAPACITY):
        remember(tenant, person, f"name-{i}", Note.Kind.IDENTITY)
        age(bank, f"name-{i}", timedelta(days=365))

    with pytest.raises(Refused):
        remember(tenant, person, "favourite-sandwich", Note.Kind.PREFERENCE)

    assert keys(bank) == {f"name-{i}" for i in range(CAPACITY)}


def test_train_journey_is_refused_rather_than_pushing_out_an_allergy(tenant, person, bank):
    for i in range(CAPACITY - 1):
        remember(tenant, person, f"name-{i}", Note.Kind.IDENTITY)
    remember(tenant, person, "peanut-allergy", Note.Kind.FACT, content="Severe peanut allergy; carries an EpiPen.")
    age(bank, "peanut-allergy", timedelta(days=30))

    with pytest.raises(Refused) as caught:
        remember(tenant, person, "on-the-train", Note.Kind.EPHEMERAL, content="On the train to Leeds right now.")

    assert "'peanut-allergy'" in caught.value.message
    assert "peanut-allergy" in keys(bank)
    assert "on-the-train" not in keys(bank)
    assert Note.objects.filter(bank=bank).count() == CAPACITY
    assert not Revision.objects.filter(bank=bank, action=Revision.Action.EVICT).exists()
    assert Revision.objects.filter(bank=bank, action=Revision.Action.REFUSED, note_key="on-the-train").count() == 1


def test_below_capacity_everything_is_admitted(tenant, person, bank):
    for i in range(CAPACITY - 1):
        remember(tenant, person, f"name-{i}", Note.Kind.IDENTITY)
    result = remember(tenant, person, "on-the-train", Note.Kind.EPHEMERAL)
    assert result.action == "created"
    assert result.evicted == []
    assert Note.objects.filter(bank=bank).count() == CAPACITY


def test_lowering_capacity_evicts_the_weakest_down_to_it(tenant, person):
    from memory.services import Actor as _Actor
    from memory.services import get_or_create_bank, remember, update_bank_settings

    actor = _Actor("agent", "test")
    bank = get_or_create_bank(team=tenant.team, person=person, scope="", kind="global")
    update_bank_settings(bank=bank, actor=actor, changes={"policy": "bounded", "capacity": 8})
    for i in range(6):
        remember(team=tenant.team, person=person, actor=actor, key=f"fact-{i}", description="d", content=f"fact {i}")
    remember(team=tenant.team, person=person, actor=actor, key="name", description="d", content="Ada", kind="identity")
    update_bank_settings(bank=bank, actor=actor, changes={"capacity": 4})
    assert Note.objects.filter(bank=bank).count() == 4
    assert Note.objects.filter(bank=bank, key="name").exists()
    assert Revision.objects.filter(action="evict", reason__contains="capacity is 4").count() == 3


def test_expired_notes_do_not_hold_places_against_a_new_one(tenant, person):
    from datetime import timedelta

    from django.utils import timezone

    from memory.services import Actor as _Actor
    from memory.services import get_or_create_bank, remember, update_bank_settings

    actor = _Actor("agent", "test")
    bank = get_or_create_bank(team=tenant.team, person=person, scope="", kind="global")
    update_bank_settings(bank=bank, actor=actor, changes={"policy": "bounded", "capacity": 2})
    for i in range(2):
        remember(
            team=tenant.team, person=person, actor=actor, key=f"name-{i}", description="d", content="x", kind="identity"
        )
    Note.objects.filter(bank=bank).update(expires_at=timezone.now() - timedelta(minutes=1))
    result = remember(team=tenant.team, person=person, actor=actor, key="allergy", description="d", content="peanuts")
    assert result.action == "created"
    assert list(Note.objects.filter(bank=bank).values_list("key", flat=True)) == ["allergy"]
    assert Revision.objects.filter(action="delete", actor="expiry").count() == 2
