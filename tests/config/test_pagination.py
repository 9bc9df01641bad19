"""Every API list pages with limit/offset, holds at most API_MAX_PAGE_SIZE per page, and refuses what it cannot read."""

from __future__ import annotations

import pytest

from memory.services import remember
from tests.support.factories import note_fields

pytestmark = pytest.mark.django_db


@pytest.fixture
def lists(tenant) -> list[str]:
    """Every list endpoint of the API, each with something in it."""
    conversation = tenant.client.post("/api/v1/conversations", {"person": "ada"}, format="json").json()["id"]
    tenant.client.post(
        f"/api/v1/conversations/{conversation}/messages", {"role": "user", "content": "Hello"}, format="json"
    )
    tenant.client.post(
        "/api/v1/tools/remember",
        {"person": "ada", "key": "home-city", "description": "Where Ada lives", "content": "Oslo"},
        format="json",
    )
    return [
        "/api/v1/notes",
        "/api/v1/banks",
        "/api/v1/revisions",
        "/api/v1/conversations",
        f"/api/v1/conversations/{conversation}/messages",
    ]


def test_every_list_pages_and_refuses_a_page_over_the_maximum(tenant, lists, settings):
    assert settings.API_MAX_PAGE_SIZE == 200
    for url in lists:
        page = tenant.client.get(url, {"limit": 200, "offset": 0})
        assert page.status_code == 200, url
        assert set(page.json()) == {"count", "next", "previous", "results"}, url
        assert page.json()["count"] >= 1, url

        refused = tenant.client.get(url, {"limit": 201})
        assert refused.status_code == 400, url
        assert refused.json() == {
            "error": {
                "code": "invalid",
                "message": "limit: The most a page holds is 200; ask for more pages with offset.",
                "field": "limit",
            }
        }, url


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"limit": "1e20"}, "limit"),
        ({"limit": "-1"}, "limit"),
        ({"limit": "0"}, "limit"),
        ({"limit": "²"}, "limit"),
        ({"limit": "١٢"}, "limit"),  # Arabic-Indic digits: int() reads them, a client does not mean them
        ({"limit": ""}, "limit"),
        ({"limit": "9" * 5000}, "limit"),
        ({"limit": "10.0"}, "limit"),
        ({"offset": "null"}, "offset"),
        ({"offset": "-5"}, "offset"),
        ({"offset": "1e3"}, "offset"),
        ({"offset": "99999999999999999999"}, "offset"),
    ],
)
def test_limit_and_offset_must_be_plain_whole_numbers(tenant, lists, query, field):
    for url in lists:
        response = tenant.client.get(url, query)
        assert response.status_code == 400, url
        error = response.json()["error"]
        assert (error["code"], error["field"]) == ("invalid", field), url
        assert "plain digits" in error["message"]


def test_a_page_holds_what_was_asked_and_the_default_is_50(tenant, person, actor):
    for number in range(60):
        remember(team=tenant.team, person=person, actor=actor, **note_fields(key=f"fact-{number}"))
    default = tenant.client.get("/api/v1/notes").json()
    assert (default["count"], len(default["results"])) == (60, 50)
    tail = tenant.client.get("/api/v1/notes", {"limit": "007", "offset": "55"}).json()
    assert [note["key"] for note in tail["results"]] == [f"fact-{number}" for number in range(55, 60)]


def test_the_schema_states_the_bounds(tenant):
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)
    parameters = {p["name"]: p["schema"] for p in schema["paths"]["/api/v1/notes"]["get"]["parameters"]}
    assert parameters["limit"] == {"type": "integer", "minimum": 1, "maximum": 200}
    assert parameters["offset"] == {"type": "integer", "minimum": 0, "maximum": 1_000_000_000}
