"""config.prepared: a read built once as a queryset, run again with other values, reads what the
queryset reads, and refuses what it could not prepare."""

from __future__ import annotations

import pytest
from django.db import transaction
from django.db.transaction import TransactionManagementError

from config.prepared import Prepared
from memory.models import Bank, Note
from memory.services import remember
from tests.factories import note_fields

pytestmark = pytest.mark.django_db


def _by_key() -> tuple[Prepared[Note], list[int]]:
    built: list[int] = []

    def build(team_id, bank_id, key):
        built.append(1)
        return Note.objects.filter(team_id=team_id, bank_id=bank_id, key=key).order_by("pk")[:1]

    return Prepared(build, team_id=int, bank_id=int, key=str), built


def test_a_prepared_read_reads_what_its_queryset_reads_every_field_converted(tenant, person, actor, other_tenant):
    first = remember(
        team=tenant.team, person=person, actor=actor,
        scope_refs={"work_item": ["T-1", "T-2"]}, **note_fields(key="coffee", content="Flat white"),
    ).note  # fmt: skip
    second = remember(team=tenant.team, person=person, actor=actor, **note_fields(key="tea", content="Green")).note
    read, built = _by_key()

    for note in (first, second):
        found = read.first(team_id=tenant.team.pk, bank_id=note.bank_id, key=note.key)
        assert found is not None
        fresh = Note.objects.get(pk=note.pk)
        for field in Note._meta.concrete_fields:
            assert getattr(found, field.attname) == getattr(fresh, field.attname), field.attname
        assert found._state.adding is False
    # A JSON field, converted as the queryset converts it.
    assert read.first(team_id=tenant.team.pk, bank_id=first.bank_id, key="coffee").scope_refs == {
        "work_item": ["T-1", "T-2"]
    }
    assert read.first(team_id=other_tenant.team.pk, bank_id=first.bank_id, key="coffee") is None
    assert read.first(team_id=tenant.team.pk, bank_id=first.bank_id, key="coffee' OR '1'='1") is None
    assert len(built) == 1  # built once, however often it runs


def test_values_are_checked_against_their_kinds(tenant):
    read, _ = _by_key()
    with pytest.raises(TypeError, match="key must be str"):
        read.first(team_id=tenant.team.pk, bank_id=1, key=None)
    with pytest.raises(TypeError, match="team_id must be int"):
        read.first(team_id=True, bank_id=1, key="coffee")
    with pytest.raises(TypeError, match="Expected the values"):
        read.first(team_id=tenant.team.pk, key="coffee")


def test_what_would_change_the_sql_is_refused_when_the_read_is_built(tenant):
    with pytest.raises(TypeError, match="only int and str"):
        Prepared(lambda ids: Note.objects.filter(pk__in=ids), ids=list)
    related = Prepared(lambda pk: Note.objects.select_related("bank").filter(pk=pk), pk=int)
    with pytest.raises(ValueError, match="own fields only"):
        related.all(pk=1)
    unused = Prepared(lambda pk, key: Note.objects.filter(pk=pk), pk=int, key=str)
    with pytest.raises(ValueError, match="does not use key"):
        unused.all(pk=1, key="coffee")


@pytest.mark.django_db(transaction=True)  # outside any transaction, as a request's reads are
def test_a_locking_read_runs_only_inside_a_transaction(tenant, person, actor):
    note = remember(team=tenant.team, person=person, actor=actor, **note_fields()).note
    locking = Prepared(lambda pk: Bank.objects.select_for_update(of=("self",)).filter(pk=pk)[:1], pk=int)
    with pytest.raises(TransactionManagementError):
        locking.first(pk=note.bank_id)
    with transaction.atomic():
        assert locking.first(pk=note.bank_id).pk == note.bank_id
