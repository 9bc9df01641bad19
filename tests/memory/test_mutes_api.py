"""Mutes over the API: an admin-capable key lists, adds and removes a person's category mutes."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from accounts.services import issue_api_key
from memory.models import Mute
from memory.services import remember
from tests.support.factories import AgentFactory, PersonFactory, note_fields

pytestmark = pytest.mark.django_db

HEALTH = note_fields(key="allergies", description="Food allergies", content="Allergic to peanuts", category="health")


@pytest.fixture
def coach(admin_tenant):
    return AgentFactory(team=admin_tenant.team, slug="coach")


@pytest.fixture
def ada(admin_tenant):
    return PersonFactory(team=admin_tenant.team, external_id="ada")


def recalled(client, person="ada"):
    body = client.post("/api/v1/tools/recall_memories", {"person": person, "query": "peanuts allergic"}, format="json")
    return [result["key"] for result in body.json()["results"]]


def client_of(agent, *, can_admin=False):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {issue_api_key(agent=agent, can_admin=can_admin).plaintext}")
    return client


def test_a_category_muted_for_every_agent_is_withheld_from_each_until_unmuted(admin_tenant, coach, ada, actor):
    remember(team=admin_tenant.team, person=ada, actor=actor, **HEALTH)
    coach_client = client_of(coach)
    assert recalled(admin_tenant.client) == recalled(coach_client) == ["allergies"]
    created = admin_tenant.client.post("/api/v1/mutes", {"person": "ada", "category": "Health"}, format="json")
    assert created.status_code == 201
    mutes = created.json()["mutes"]
    assert sorted(m["agent"] for m in mutes) == sorted([admin_tenant.agent.slug, "coach"])
    assert {(m["person"], m["category"]) for m in mutes} == {("ada", "health")}
    assert recalled(admin_tenant.client) == recalled(coach_client) == []
    listed = admin_tenant.client.get("/api/v1/mutes", {"person": "ada"}).json()["results"]
    assert sorted(m["id"] for m in listed) == sorted(m["id"] for m in mutes)
    coach_mute = next(m for m in mutes if m["agent"] == "coach")
    assert admin_tenant.client.delete(f"/api/v1/mutes/{coach_mute['id']}").status_code == 204
    assert recalled(coach_client) == ["allergies"]  # unmuted for the coach: the note is back
    assert recalled(admin_tenant.client) == []  # still muted for the other agent


def test_a_mute_for_one_named_agent_leaves_the_others(admin_tenant, coach, ada, actor):
    remember(team=admin_tenant.team, person=ada, actor=actor, **HEALTH)
    body = admin_tenant.client.post(
        "/api/v1/mutes", {"person": "ada", "category": "health", "agent": "coach"}, format="json"
    ).json()
    assert [m["agent"] for m in body["mutes"]] == ["coach"]
    assert recalled(client_of(coach)) == []
    assert recalled(admin_tenant.client) == ["allergies"]
    again = admin_tenant.client.post(
        "/api/v1/mutes", {"person": "ada", "category": "health", "agent": "coach"}, format="json"
    ).json()
    assert again["mutes"][0]["id"] == body["mutes"][0]["id"]  # already muted: kept as it is
    assert Mute.objects.count() == 1
    assert [m["agent"] for m in admin_tenant.client.get("/api/v1/mutes", {"agent": "coach"}).json()["results"]] == [
        "coach"
    ]


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        ({"person": "nobody", "category": "health"}, 404, None),
        ({"person": "ada", "category": "health", "agent": "ghost"}, 404, None),
        ({"person": "ada"}, 400, "category"),
        ({"person": "ada", "category": "!!!"}, 400, "category"),
        ({"person": "ada", "note": 5}, 404, None),
        ({"person": "ada", "note": 10**30}, 400, "note"),
        ({"person": "ada", "note": 5, "category": "health"}, 400, "note"),
        ({"category": "health"}, 400, "person"),
    ],
)
def test_bad_mutes_are_refused_with_the_error_shape_and_nothing_is_muted(admin_tenant, ada, body, status, field):
    response = admin_tenant.client.post("/api/v1/mutes", body, format="json")
    assert response.status_code == status, response.content
    error = response.json()["error"]
    assert error["message"]
    if field is not None:
        assert error["field"] == field
    assert not Mute.objects.exists()


def test_mutes_need_an_admin_capable_key_and_stay_in_their_team(admin_tenant, tenant, ada):
    plain = client_of(admin_tenant.agent)
    assert plain.get("/api/v1/mutes").status_code == 403
    assert plain.post("/api/v1/mutes", {"person": "ada", "category": "health"}, format="json").status_code == 403
    mute = admin_tenant.client.post("/api/v1/mutes", {"person": "ada", "category": "health"}, format="json").json()[
        "mutes"
    ][0]
    assert plain.delete(f"/api/v1/mutes/{mute['id']}").status_code == 403
    other_admin = client_of(AgentFactory(team=tenant.team), can_admin=True)
    assert other_admin.get("/api/v1/mutes").json()["results"] == []
    assert other_admin.delete(f"/api/v1/mutes/{mute['id']}").status_code == 404  # another team's: not found
    assert other_admin.post("/api/v1/mutes", {"person": "ada", "category": "x"}, format="json").status_code == 404
    assert Mute.objects.filter(pk=mute["id"]).exists()
