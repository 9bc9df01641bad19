"""The canary scanner finds text wherever the project stores it, and reports nothing once it is gone."""

import pytest

from accounts.models import Person
from memory.models import Revision
from memory.services import Actor, remember
from tests.support.canary import find_text, project_text_columns
from tests.support.factories import note_fields, written
from tests.support.fixtures import Tenant

pytestmark = pytest.mark.django_db


def test_the_scan_covers_the_project_apps_text_and_json_columns() -> None:
    columns = set(project_text_columns())
    assert ("memory_note", "content") in columns
    assert ("conversations_message", "content") in columns
    assert ("memory_revision", "after") in columns  # a JSON column
    assert not any(table.startswith(("auth_", "django_")) for table, _ in columns)


def test_a_planted_canary_is_found_in_text_and_json_columns_until_removed(
    tenant: Tenant, person: Person, actor: Actor
) -> None:
    canary = "Zqxcanary" + "Plover"
    assert find_text(canary) == []
    note = written(remember(team=tenant.team, person=person, actor=actor, **note_fields(content=f"Near {canary} lake")))
    found = {(s.table, s.column) for s in find_text(canary.lower())}
    assert ("memory_note", "content") in found
    assert ("memory_revision", "after") in found
    note.delete()
    Revision.objects.filter(team=tenant.team).update(after=None)
    assert find_text(canary) == []
