import pytest

from accounts.models import Person

pytestmark = pytest.mark.django_db


def test_register_person_creates_then_updates(tenant):
    first = tenant.client.post("/api/v1/people", {"person": "ada", "display_name": "Ada"}, format="json")
    assert first.status_code == 201
    assert first.json()["person"] == "ada"
    again = tenant.client.post("/api/v1/people", {"person": "ada", "display_name": "Ada L."}, format="json")
    assert again.status_code == 200
    assert Person.objects.filter(team=tenant.team).count() == 1
    assert Person.objects.get(team=tenant.team, external_id="ada").display_name == "Ada L."


def test_a_person_of_another_team_is_a_404(tenant, other_tenant):
    other_tenant.client.post("/api/v1/people", {"person": "bob"}, format="json")
    assert other_tenant.client.get("/api/v1/people/bob").status_code == 200
    response = tenant.client.get("/api/v1/people/bob")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_the_same_external_id_in_two_teams_is_two_people(tenant, other_tenant):
    tenant.client.post("/api/v1/people", {"person": "sam", "display_name": "Team A's Sam"}, format="json")
    other_tenant.client.post("/api/v1/people", {"person": "sam", "display_name": "Team B's Sam"}, format="json")
    assert tenant.client.get("/api/v1/people/sam").json()["display_name"] == "Team A's Sam"
    assert other_tenant.client.get("/api/v1/people/sam").json()["display_name"] == "Team B's Sam"


def test_blank_person_is_refused(tenant):
    response = tenant.client.post("/api/v1/people", {"person": "   "}, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["field"] == "person"
