"""A team admin's lens in Chromium: the team's people a page at a time and the box that finds one,
at a desktop width and a phone's, with axe (tests/browser/test_browser_screens.py's check)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from accounts.models import Membership
from memory.models import Revision
from memory.services import Actor, remember
from tests.browser.test_browser_screens import PASSWORD, fits_and_passes_axe, log_in
from tests.support.factories import AgentFactory, PersonFactory, TeamFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def team_admin(django_user_model) -> None:
    """Ada administers Acme, where agents remember something about 23 other people."""
    team = TeamFactory.create(name="Acme")
    agent = AgentFactory.create(team=team, name="Coach")
    user = django_user_model.objects.create_user("ada", password=PASSWORD)
    Membership.objects.create(team=team, user=user, role=Membership.Role.ADMIN)
    ada = PersonFactory.create(team=team, external_id="ada", display_name="Ada", user=user)
    actor = Actor(Revision.Actor.AGENT, agent.slug)
    remember(team=team, person=ada, actor=actor, key="home-city", description="Where Ada lives", content="Oslo.")
    names = [f"Member {n:02d}" for n in range(22)] + ["Grace Hopper"]
    for n, name in enumerate(names):
        someone = PersonFactory.create(team=team, external_id=f"member-{n:02d}", display_name=name)
        remember(
            team=team, person=someone, actor=actor, category="home", key="home-city",
            description=f"Where {name} lives", content=f"{name} lives by the sea.",
        )  # fmt: skip


def people_shown(page: Page) -> list[str]:
    return page.locator(".team-people h3[id^=person-]").all_inner_texts()


def test_a_team_admin_pages_through_the_team_and_finds_a_person_by_name(page: Page, live_server, team_admin, artifact):
    base = live_server.url
    log_in(page, base)
    expect(page.get_by_role("heading", name="What agents remember about you")).to_be_visible()
    expect(page.locator("#people-count")).to_have_text("23 people · page 1 of 2.")
    assert people_shown(page) == [f"Member {n:02d}" for n in range(20)]
    fits_and_passes_axe(page, "lens-team-page-1", artifact)

    page.get_by_role("link", name="Next people").click()
    page.wait_for_url(re.compile(r"/lens/\?page=2$"))
    assert people_shown(page) == ["Member 20", "Member 21", "Grace Hopper"]
    expect(page.get_by_role("heading", name="What agents remember about you")).to_be_visible()
    fits_and_passes_axe(page, "lens-team-page-2", artifact)

    search = page.get_by_role("searchbox", name="Find a person by name or id")
    search.fill("grace")
    page.get_by_role("button", name="Find").click()
    page.wait_for_url(re.compile(r"/lens/\?name=grace$"))
    assert people_shown(page) == ["Grace Hopper"]
    expect(page.locator("#people-count")).to_have_text("1 person matches “grace”.")
    expect(page.get_by_role("searchbox", name="Find a person by name or id")).to_have_value("grace")
    fits_and_passes_axe(page, "lens-team-search", artifact)

    # Muting on the found page keeps it: the redrawn list is still the search's.
    page.get_by_role("button", name="Mute").click()
    expect(page.get_by_text("Muted for Coach: it is not given these notes")).to_be_visible()
    assert people_shown(page) == ["Grace Hopper"]

    page.get_by_role("link", name="Show everyone").click()
    page.wait_for_url(base + "/lens/")
    assert len(people_shown(page)) == 20

    response = page.goto(base + "/lens/?page=two")
    assert response is not None
    assert response.status == 400
