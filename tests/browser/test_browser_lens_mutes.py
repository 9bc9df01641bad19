"""The lens in a real browser: muting one note (uncategorised) for an agent on its page, the words
that say what that does, at a desktop's and a phone's width, axe clean; and unmuting it."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from memory.models import Mute
from tests.browser import test_browser_lens
from tests.browser.test_browser_lens import Owner, log_in
from tests.browser.test_browser_screens import fits_and_passes_axe
from tests.support.factories import AgentFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
owner = test_browser_lens.owner  # Ada, her login and her agent Coach, as the lens's browser tests have them

WITHHELD = (
    "is not given this note, the messages it was learned from, or conversation summaries built from those "
    "messages: not in its turns, recall, search or conversation search. Nothing is deleted; you still see "
    "everything here, and Unmute gives it all back."
)


def test_a_note_is_muted_for_an_agent_on_its_page_and_the_lens_says_exactly_what_that_does(
    page: Page, live_server, owner: Owner, artifact
):
    AgentFactory.create(team=owner.person.team, name="Tutor")
    log_in(page, live_server.url)
    page.goto(f"{live_server.url}/m/{owner.home.pk}")
    mutes = page.locator("#note-mutes")
    expect(mutes.get_by_role("heading", name="Which agents may use this note")).to_be_visible()
    expect(mutes.locator(".mute-help")).to_have_text(f"That agent {WITHHELD}")
    fits_and_passes_axe(page, "note-mute", artifact)

    mutes.get_by_label("Mute this note for").select_option(label="Coach")
    mutes.get_by_role("button", name="Mute").click()
    expect(page.locator("#note-mutes [role=status]")).to_have_text(f"Muted this note for Coach. Coach {WITHHELD}")
    expect(page.locator("#note-mutes .muted-tag")).to_have_text(
        "Muted for Coach: it is not given this note, the messages it was learned from, or summaries built from them"
    )
    assert Mute.objects.filter(note=owner.home, agent=owner.agent).exists()
    fits_and_passes_axe(page, "note-muted", artifact)

    page.locator("#note-mutes").get_by_role("button", name="Unmute").click()
    expect(page.locator("#note-mutes [role=status]")).to_contain_text(
        "Unmuted this note for Coach: Coach is given this note, the messages it was learned from and the "
        "summaries built from those messages again."
    )
    assert not Mute.objects.exists()
