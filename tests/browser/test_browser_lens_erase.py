"""The Memory lens in a real browser: "Delete everything about me", behind a typed confirmation,
leaves an empty lens, and nothing of what the person said anywhere."""

from __future__ import annotations

import re
from uuid import uuid4

import pytest
from playwright.sync_api import Page, expect

from conversations.models import Conversation
from conversations.services import start_conversation, update_summary
from memory.models import Revision
from memory.services import Actor, append_observation, remember
from tests.browser.test_browser_lens import PASSWORD, log_in
from tests.support.canary import find_text
from tests.support.factories import AgentFactory, PersonFactory, TeamFactory, chat

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_delete_everything_about_me_leaves_an_empty_lens(page: Page, live_server, django_user_model, artifact):
    canary = f"cnry{uuid4().hex[:10]}"
    team = TeamFactory.create(name="Acme")
    agent = AgentFactory.create(team=team, name="Coach")
    user = django_user_model.objects.create_user("ada", password=PASSWORD)
    ada = PersonFactory.create(team=team, external_id="ada", display_name="Ada", user=user)
    actor = Actor(Revision.Actor.AGENT, agent.slug)
    remember(team=team, person=ada, actor=actor, key=f"preference-{canary}", description="Pastries",
             content=f"Loves {canary} pastries.")  # fmt: skip
    append_observation(team=team, person=ada, actor=actor, category="home", observation=f"Lives in {canary}town.")
    conversation = start_conversation(team=team, agent=agent, person=ada)
    chat(conversation, [(f"I just moved to {canary}town.", "Welcome!")])
    update_summary(conversation=conversation, summary=f"Lives in {canary}town.", through_order=2)

    log_in(page, live_server.url)
    expect(page.get_by_role("link", name=f"preference-{canary}")).to_be_visible()
    page.get_by_role("link", name="Delete everything about me").click()
    page.wait_for_url(f"**/lens/people/{ada.pk}/erase")
    expect(page.get_by_role("heading", name="Delete everything about you?")).to_be_visible()
    page.get_by_label("Type “delete everything” to confirm").fill("delete")
    page.get_by_role("button", name="Delete everything").click()
    expect(page.get_by_text("Type “delete everything” exactly; nothing was deleted.")).to_be_visible()
    assert find_text(canary)  # a wrong phrase erased nothing
    page.screenshot(path=artifact("confirm"), full_page=True)

    page.get_by_label("Type “delete everything” to confirm").fill("delete everything")
    page.get_by_role("button", name="Delete everything").click()
    page.wait_for_url(live_server.url + "/lens/")
    expect(page.get_by_role("status")).to_contain_text("Deleted everything about ada.")
    expect(page.get_by_text(re.compile(r"No agent has remembered anything about (you|ada) yet\."))).to_be_visible()
    # The log keeps its erased events, but they have nothing left to show a person.
    expect(page.get_by_text(re.compile(r"Nothing was (refused or evicted|removed)\."))).to_be_visible()
    expect(page.locator(".notes li")).to_have_count(0)
    page.get_by_text("What each agent is reminded of").click()
    expect(page.locator(f"#digest-{ada.pk}-{agent.pk}")).to_contain_text("Nothing.")
    expect(page.locator("body")).not_to_contain_text(canary)
    page.screenshot(path=artifact("empty"), full_page=True)
    assert not Conversation.objects.filter(person=ada).exists()
    assert find_text(canary) == []
