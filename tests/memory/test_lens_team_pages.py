"""A team admin's lens: the team's people a page at a time (TEAM_PEOPLE_PER_PAGE), found by name."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from accounts.models import Membership
from memory.services import remember
from tests.support.factories import PersonFactory, note_fields
from tests.support.fixtures import HTMX

pytestmark = pytest.mark.django_db


def listed(html: str) -> list[str]:
    """The team people shown, by their heading, in page order."""
    return re.findall(r'<h3 id="person-\d+">([^<]+)</h3>', html)


@pytest.fixture
def team_of_25(tenant, person, actor, lens_user):
    """Ada administers her team, which has 25 other people with a note each, and one with none."""
    Membership.objects.create(team=tenant.team, user=lens_user, role=Membership.Role.ADMIN)
    remember(team=tenant.team, person=person, actor=actor, **note_fields())
    for n in range(24):
        someone = PersonFactory.create(team=tenant.team, external_id=f"p{n:02d}", display_name=f"Person {n:02d}")
        remember(team=tenant.team, person=someone, actor=actor, **note_fields(content=f"Person {n:02d} lives here."))
    grace = PersonFactory.create(team=tenant.team, external_id="zz-grace", display_name="Grace Hopper")
    remember(
        team=tenant.team, person=grace, actor=actor, category="home", **note_fields(content="Grace lives in Arlington.")
    )
    PersonFactory.create(team=tenant.team, external_id="p-silent", display_name="Person Silent")


def test_the_team_admin_lens_lists_twenty_people_a_page_after_the_admins_own(lens_client, team_of_25):
    first = lens_client.get("/lens/").content.decode()
    assert "What agents remember about you" in first  # her own lens, on every page
    assert listed(first) == [f"Person {n:02d}" for n in range(20)]
    assert "25 people · page 1 of 2." in first
    assert '<a rel="next" href="?page=2">Next people</a>' in first
    second = lens_client.get("/lens/?page=2").content.decode()
    assert "What agents remember about you" in second
    assert listed(second) == ["Person 20", "Person 21", "Person 22", "Person 23", "Grace Hopper"]
    assert '<a rel="prev" href="?page=1">Previous people</a>' in second
    assert "Person Silent" not in first + second  # nothing remembered: not listed
    # Past the end is the last page, as the other lists do.
    assert listed(lens_client.get("/lens/?page=9").content.decode()) == listed(second)


def test_the_search_box_finds_people_whose_name_or_id_contains_the_words(lens_client, team_of_25):
    html = lens_client.get("/lens/", {"name": "grace"}).content.decode()
    assert listed(html) == ["Grace Hopper"]
    assert "1 person matches “grace”." in html
    assert 'value="grace"' in html
    assert listed(lens_client.get("/lens/", {"name": "P2"}).content.decode()) == [f"Person {n}" for n in range(20, 24)]
    many = lens_client.get("/lens/", {"name": "person", "page": "2"}).content.decode()
    assert listed(many) == ["Person 20", "Person 21", "Person 22", "Person 23"]
    assert '<a rel="prev" href="?name=person&amp;page=1">Previous people</a>' in many
    nobody = lens_client.get("/lens/", {"name": "nobody"}).content.decode()
    assert listed(nobody) == []
    assert "0 people match “nobody”." in nobody
    assert "What agents remember about you" in nobody


@pytest.mark.parametrize("page", ["abc", "0", "-1", "1.5", "9" * 30])
def test_a_malformed_page_number_is_a_400_page(lens_client, team_of_25, page):
    response = lens_client.get("/lens/", {"page": page})
    assert response.status_code == 400
    assert "page" in response.content.decode()


def test_muting_on_a_later_page_redraws_that_page(lens_client, team_of_25, tenant):
    html = lens_client.get("/lens/", {"name": "grace"}).content.decode()
    assert 'hx-post="/lens/mute?name=grace"' in html
    grace = tenant.team.people.get(external_id="zz-grace")
    mute = {"person": grace.pk, "agent": tenant.agent.pk, "category": "home"}
    response = lens_client.post("/lens/mute?name=grace", mute, headers=HTMX)
    assert response.status_code == 200
    assert listed(response.content.decode()) == ["Grace Hopper"]
    assert "Muted for" in response.content.decode()
    # Without htmx, back to the page it was on.
    response = lens_client.post("/lens/unmute?name=grace", mute)
    assert response["Location"] == "/lens/?name=grace"


def test_a_login_that_administers_no_team_sees_no_people_finder(lens_client, person, actor, tenant):
    remember(team=tenant.team, person=person, actor=actor, **note_fields())
    html = lens_client.get("/lens/").content.decode()
    assert "Find a person by name" not in html
    assert "Pages of people" not in html


def test_a_page_costs_the_same_queries_however_large_the_team(lens_client, team_of_25, tenant, actor):
    def queries_for_first_page() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert lens_client.get("/lens/").status_code == 200
        return len(captured.captured_queries)

    before = queries_for_first_page()
    for n in range(20):
        someone = PersonFactory.create(team=tenant.team, external_id=f"q{n:02d}", display_name=f"Quiet {n:02d}")
        remember(team=tenant.team, person=someone, actor=actor, **note_fields(content=f"Quiet {n:02d} lives here."))
    assert queries_for_first_page() == before
