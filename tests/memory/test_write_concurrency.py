"""Writes of one team run side by side: a write locks what it writes, never the team's row."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, connections, transaction

from accounts.services import get_or_create_person
from memory.services import remember
from tests.support.factories import note_fields


@pytest.mark.django_db(transaction=True)  # two connections, each committing its own transaction
def test_a_write_for_one_person_does_not_wait_for_a_write_for_another(tenant, actor):
    # A lock on the team's row would make every write of the team wait for this one (and every
    # insert that names the team: its foreign key check waits for the lock too).
    ada = get_or_create_person(team=tenant.team, external_id="ada")
    bob = get_or_create_person(team=tenant.team, external_id="bob")
    for person in (ada, bob):
        remember(team=tenant.team, person=person, actor=actor, **note_fields())
    holding, release = threading.Event(), threading.Event()
    failures: list[BaseException] = []

    def ada_writes_and_waits() -> None:
        try:
            with transaction.atomic():
                remember(team=tenant.team, person=ada, actor=actor, **note_fields(content="Ada moved to Bergen."))
                holding.set()
                release.wait(20)
        except BaseException as exc:  # shown by the assertion below
            failures.append(exc)
            holding.set()
        finally:
            connections.close_all()

    writer = threading.Thread(target=ada_writes_and_waits)
    writer.start()
    try:
        assert holding.wait(20)
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = '3s'")  # waiting for Ada's transaction fails here
        result = remember(team=tenant.team, person=bob, actor=actor, **note_fields(content="Bob moved to Tromsø."))
        assert result.action == "updated"
    finally:
        release.set()
        writer.join(30)
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = 0")
    assert not failures, failures
