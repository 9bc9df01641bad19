"""Review in a real browser: what waits for the person is listed with who proposed it and from which
message; they keep one (at a phone's width), edit and keep one, and decline one (at a desktop's),
and every state of the list fits both widths and passes axe."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from playwright.sync_api import Page, expect

from conversations.services import start_conversation
from memory.models import Note, Proposal
from memory.services import Actor, propose, set_review_writes
from tests.browser.test_browser_screens import PASSWORD, WIDTHS, fits_and_passes_axe, log_in
from tests.support.factories import AgentFactory, PersonFactory, TeamFactory, chat

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@dataclass
class Waiting:
    tea: Proposal
    figs: Proposal
    city: Proposal


@pytest.fixture
def waiting(django_user_model) -> Waiting:
    team = TeamFactory.create(name="Acme")
    agent = AgentFactory.create(team=team, name="Coach")
    user = django_user_model.objects.create_user("ada", password=PASSWORD)
    ada = PersonFactory.create(team=team, external_id="ada", display_name="Ada", user=user)
    set_review_writes(person=ada, review=True)
    said = chat(
        start_conversation(team=team, agent=agent, person=ada),
        [("I drink green tea every morning.", "Nice."), ("I love figs.", "Noted."), ("I moved to Bergen.", "Oh!")],
    )
    actor = Actor.for_agent(agent)

    def proposed(key: str, description: str, content: str, message: int) -> Proposal:
        return propose(
            team=team, person=ada, agent=agent, actor=actor, operation="remember", key=key,
            description=description, content=content, source_messages=[said[message].pk],
        )  # fmt: skip

    return Waiting(
        tea=proposed("tea", "What Ada drinks", "Green tea every morning.", 0),
        figs=proposed("figs", "What Ada loves", "Figs.", 2),
        city=proposed("home-city", "Where Ada lives", "Ada lives in Bergen.", 4),
    )


def test_the_person_keeps_edits_and_declines_what_waits(page: Page, live_server, waiting: Waiting, artifact):
    log_in(page, live_server.url)
    panel = page.locator(".review")
    expect(page.get_by_role("heading", name="Waiting for you")).to_be_visible()
    expect(panel).to_contain_text("Ask before keeping is on")
    expect(panel).to_contain_text("Coach wants to remember “What Ada drinks”")
    expect(panel).to_contain_text("“I drink green tea every morning.”")
    fits_and_passes_axe(page, "review-waiting", artifact)

    page.set_viewport_size({"width": WIDTHS["phone"], "height": 900})
    page.locator(f"#proposal-{waiting.tea.pk}").get_by_role("button", name="Keep", exact=True).click()
    expect(page.locator("#announcements")).to_contain_text("Kept.")
    expect(page.locator(f"#proposal-{waiting.tea.pk}")).to_have_count(0)

    page.set_viewport_size({"width": WIDTHS["desktop"], "height": 900})
    city = page.locator(f"#proposal-{waiting.city.pk}")
    city.get_by_text("Edit and keep").click()
    city.get_by_label("What to keep instead").fill("Ada lives in Bergen, near the fish market.")
    city.get_by_role("button", name="Keep my version").click()
    expect(page.locator("#announcements")).to_contain_text("Kept with your changes.")
    page.locator(f"#proposal-{waiting.figs.pk}").get_by_role("button", name="Don't keep").click()
    expect(page.locator("#announcements")).to_contain_text("Not kept. What it said is gone.")
    expect(panel.locator(".proposal")).to_have_count(0)
    expect(panel).to_contain_text("Nothing waits for you.")
    fits_and_passes_axe(page, "review-decided", artifact)

    assert sorted(Note.objects.values_list("key", "content")) == [
        ("home-city", "Ada lives in Bergen, near the fish market."),
        ("tea", "Green tea every morning."),
    ]
    assert Proposal.objects.get(pk=waiting.figs.pk).content == ""

    # A reload shows the notes in their banks: kept, as any note is.
    page.reload()
    expect(page.get_by_role("link", name="tea")).to_be_visible()
    panel.get_by_role("button", name="Stop asking: let agents keep what they learn").click()
    expect(page.locator("#announcements")).to_contain_text("Agents keep what they learn about you again.")
    fits_and_passes_axe(page, "review-off", artifact)
