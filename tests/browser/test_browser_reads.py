"""The lens page of what agents looked up, in a real browser: from the lens to the lookups, a
filter by agent, and on to a note and a conversation that lookups found."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect
from rest_framework.test import APIClient

from accounts.services import issue_api_key
from conversations.services import start_conversation
from memory.models import Revision
from memory.services import Actor, remember
from tests.browser.test_browser_lens import PASSWORD, log_in
from tests.support.factories import AgentFactory, PersonFactory, TeamFactory, chat, written

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def agent_client(agent) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {issue_api_key(agent=agent, name='browser').plaintext}")
    return client


def test_a_person_sees_what_agents_looked_up_and_opens_a_note_found(
    page: Page, live_server, django_user_model, artifact
):
    team = TeamFactory.create(name="Acme")
    coach, planner = AgentFactory.create(team=team, name="Coach"), AgentFactory.create(team=team, name="Planner")
    user = django_user_model.objects.create_user("ada", password=PASSWORD)
    person = PersonFactory.create(team=team, external_id="ada", display_name="Ada", user=user)
    home = written(remember(
        team=team, person=person, actor=Actor(Revision.Actor.AGENT, coach.slug), key="home-city",
        description="Where Ada lives", content="Ada lives in Oslo.",
    ))  # fmt: skip
    found = agent_client(coach).post("/api/v1/tools/search", {"person": "ada", "query": "Oslo"}, format="json")
    assert [hit["id"] for hit in found.json()["results"]] == [home.pk]
    asked = agent_client(planner).post("/api/v1/tools/recall", {"person": "ada", "query": "holidays"}, format="json")
    assert asked.status_code == 200
    talk = start_conversation(team=team, agent=planner, person=person)
    said = chat(talk, [("We moved to Oslo in May.", "Noted.")])
    searched = agent_client(planner).post(
        "/api/v1/tools/search_conversation", {"person": "ada", "query": "moved Oslo"}, format="json"
    )
    assert [hit["message_id"] for hit in searched.json()["results"]] == [said[0].pk]

    log_in(page, live_server.url)
    page.get_by_role("link", name="What agents looked up about you").click()
    expect(page.get_by_role("heading", name="What agents looked up about you")).to_be_visible()
    entries = page.locator("li.read")
    expect(entries).to_have_count(3)
    expect(entries.nth(0)).to_contain_text("Planner used search_conversation")  # newest first
    expect(entries.nth(0)).to_contain_text(f"1 message from conversation {talk.pk}")
    expect(entries.nth(1)).to_contain_text("Planner used recall")
    expect(entries.nth(1)).to_contain_text("“holidays”")
    expect(entries.nth(1)).to_contain_text("Nothing found.")
    expect(entries.nth(2)).to_contain_text("Coach used search")
    expect(entries.nth(2)).to_contain_text("“Oslo”")
    page.screenshot(path=artifact("reads"), full_page=True)

    page.get_by_label("Agent").select_option(label="Coach")
    page.get_by_role("button", name="Show").click()
    expect(page.locator("li.read")).to_have_count(1)
    expect(page.locator("li.read")).to_contain_text("Coach used search")

    page.locator("li.read").get_by_role("link", name="home-city").click()
    page.wait_for_url(f"**/m/{home.pk}")
    expect(page.locator("#note-card .content")).to_have_text("Ada lives in Oslo.")

    page.go_back()
    page.get_by_label("Agent").select_option(label="Planner")
    page.get_by_role("button", name="Show").click()
    page.locator("li.read").get_by_role("link", name=f"conversation {talk.pk}").click()
    page.wait_for_url(f"**/lens/conversations/{talk.pk}")
    expect(page.get_by_role("heading", name="With Planner")).to_be_visible()
    expect(page.locator(f"#message-{said[0].pk}")).to_contain_text("We moved to Oslo in May.")
