"""A person's export from the admin: the memory package as a JSON download, logged."""

from __future__ import annotations

import json

import pytest
from django.contrib.admin.models import LogEntry

from accounts.models import Person

pytestmark = pytest.mark.django_db


def remember(tenant, person: str, key: str, content: str) -> None:
    body = {"person": person, "key": key, "description": f"{key} of {person}", "content": content}
    assert tenant.client.post("/api/v1/tools/remember", body, format="json").status_code == 200


def test_the_admin_exports_one_person_as_a_json_download_of_their_notes_only(admin_client, tenant, other_tenant):
    remember(tenant, "ada", "home-city", "Ada lives in Oslo.")
    remember(tenant, "ada", "pet", "Ada has a cat.")
    remember(tenant, "bob", "home-city", "Bob lives in Lima.")
    remember(other_tenant, "ada", "home-city", "Another team's Ada lives in Rome.")
    ada = Person.objects.get(team=tenant.team, external_id="ada")

    response = admin_client.post("/admin/accounts/person/", {"action": "export_selected", "_selected_action": [ada.pk]})
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json; charset=utf-8"
    assert response["Content-Disposition"] == f'attachment; filename="mnemo-export-{tenant.team.slug}-ada.json"'
    package = json.loads(response.content)
    assert package["person"]["id"] == "ada"
    assert package["team"] == tenant.team.slug
    contents = sorted(note["content"] for bank in package["banks"] for note in bank["notes"])
    assert contents == ["Ada has a cat.", "Ada lives in Oslo."]
    assert "Lima" not in response.content.decode()
    assert "Rome" not in response.content.decode()

    # The download is in the person's admin history, with who made it.
    entry = LogEntry.objects.get(object_id=str(ada.pk))
    assert entry.user.username == "admin"
    assert "Exported" in entry.get_change_message()


def test_exporting_several_people_at_once_is_refused_with_a_message(admin_client, tenant):
    remember(tenant, "ada", "home-city", "Ada lives in Oslo.")
    remember(tenant, "bob", "home-city", "Bob lives in Lima.")
    people = list(Person.objects.filter(team=tenant.team).values_list("pk", flat=True))
    response = admin_client.post(
        "/admin/accounts/person/", {"action": "export_selected", "_selected_action": people}, follow=True
    )
    assert response["Content-Type"].startswith("text/html")
    assert "Select exactly one person to export" in response.content.decode()
    assert not LogEntry.objects.exists()
