"""The Memory lens in a real browser: log in, read, correct inline, see a refusal, delete, mute."""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest
from playwright.sync_api import Page, expect

from accounts.models import Agent, Person
from memory.models import Note, Revision
from memory.services import Actor, append_observation, remember
from tests.support.factories import AgentFactory, PersonFactory, TeamFactory, written

PASSWORD = "correct horse battery staple"
pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@dataclass
class Owner:
    person: Person
    agent: Agent
    home: Note


@pytest.fixture
def owner(django_user_model) -> Owner:
    team = TeamFactory.create(name="Acme")
    agent = AgentFactory.create(team=team, name="Coach")
    user = django_user_model.objects.create_user("ada", password=PASSWORD)
    person = PersonFactory.create(team=team, external_id="ada", display_name="Ada", user=user)
    actor = Actor(Revision.Actor.AGENT, agent.slug)
    home = written(remember(
        team=team, person=person, actor=actor, key="home-city", description="Where Ada lives",
        content="Ada lives in Oslo.",
    ))  # fmt: skip
    append_observation(team=team, person=person, actor=actor, category="food", observation="Likes rye bread.")
    return Owner(person=person, agent=agent, home=home)


def log_in(page: Page, base_url: str) -> None:
    page.goto(base_url + "/lens/")
    page.wait_for_url("**/login/?next=/lens/")
    page.get_by_label("Username").fill("ada")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    # The exact URL: a glob such as "**/lens/" already matches the login page's "?next=/lens/".
    page.wait_for_url(base_url + "/lens/")


def test_owner_logs_in_reads_corrects_and_deletes_a_note(page: Page, live_server, owner: Owner, artifact):
    log_in(page, live_server.url)
    expect(page.get_by_role("heading", name="Memory lens")).to_be_visible()
    expect(page.get_by_text("2 of 40")).to_be_visible()

    page.get_by_role("link", name="home-city").click()
    page.wait_for_url(f"**/m/{owner.home.pk}")
    expect(page.locator("#note-card .content")).to_have_text("Ada lives in Oslo.")
    page.evaluate("window.stillTheSamePage = true")

    page.get_by_text("Edit this note").click()
    page.get_by_label("Content").fill("Ada lives in Bergen.")
    page.get_by_role("button", name="Save").click()
    expect(page.locator("#note-card .content")).to_have_text("Ada lives in Bergen.")
    expect(page.locator("#revision-list del").first).to_have_text("Oslo.")
    assert page.evaluate("window.stillTheSamePage") is True  # swapped by htmx, not reloaded

    page.screenshot(path=artifact("edited"), full_page=True)
    page.get_by_text("Edit this note").click()
    page.get_by_label("Content").fill("x" * 2001)
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_role("alert")).to_contain_text("Not saved.")
    expect(page.locator("#note-card")).to_contain_text("content is 2001 characters; the limit is 2000")
    assert len(page.get_by_label("Content").input_value()) == 2001
    expect(page.locator("#note-card .content")).to_have_text("Ada lives in Bergen.")
    assert page.evaluate("window.stillTheSamePage") is True
    page.screenshot(path=artifact("refused"), full_page=True)

    page.get_by_role("link", name="Delete this note…").click()
    page.wait_for_url(f"**/m/{owner.home.pk}/delete")
    expect(page.get_by_role("heading", name="Delete “home-city”?")).to_be_visible()
    page.get_by_role("button", name="Delete the note").click()
    page.wait_for_url(live_server.url + "/lens/")
    expect(page.get_by_role("status")).to_contain_text("Deleted the note. What it said is erased")
    expect(page.get_by_role("link", name="home-city")).to_have_count(0)
    assert not Note.objects.filter(pk=owner.home.pk).exists()

    page.get_by_label("Search your memories").fill("where does Ada live in Bergen")
    page.get_by_role("button", name="Search").click()
    expect(page.locator("#search-results")).to_contain_text("Recall finds nothing for that.")
    page.screenshot(path=artifact("deleted"), full_page=True)


def test_owner_searches_and_mutes_a_category(page: Page, live_server, owner: Owner, artifact):
    log_in(page, live_server.url)
    page.evaluate("window.stillTheSamePage = true")

    page.get_by_label("Search your memories").fill("rye bread")
    page.get_by_role("button", name="Search").click()
    expect(page.locator("#search-results")).to_contain_text("Likes rye bread.")
    expect(page).to_have_url(re.compile(r"/lens/\?q=rye(\+|%20)bread$"))  # pushed by htmx, so Back works

    food = page.locator(".category", has=page.get_by_role("heading", name="food"))
    food.get_by_label("Mute for").select_option(label="Coach")
    food.get_by_role("button", name="Mute").click()
    food = page.locator(".category", has=page.get_by_role("heading", name="food"))
    expect(food).to_have_class(re.compile(r"\bis-muted\b"))
    expect(food).to_contain_text("Muted for Coach")
    expect(food.get_by_role("button", name="Unmute")).to_be_visible()
    assert page.evaluate("window.stillTheSamePage") is True
    assert owner.person.mutes.filter(agent=owner.agent, category="food").exists()

    digest = page.locator(f"#digest-{owner.person.pk}-{owner.agent.pk}")
    page.get_by_text("What each agent is reminded of").click()
    expect(digest).not_to_contain_text("food")  # the mute took the category out of Coach's digest
    expect(digest).to_contain_text("home-city")
    page.screenshot(path=artifact("muted"), full_page=True)

    food.get_by_role("button", name="Unmute").click()
    expect(page.locator(".category.is-muted")).to_have_count(0)
    assert not owner.person.mutes.exists()
    page.get_by_text("What each agent is reminded of").click()
    expect(digest).to_contain_text("food")
    page.screenshot(path=artifact("unmuted"), full_page=True)
