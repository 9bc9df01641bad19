"""The lens as of a date in a real browser: the front page's "As it was on" lists the notes as they stood
that day (a note deleted since included, what was erased never), and a note's page shows what it said
then, or that it did not exist yet, or was deleted by then; at a desktop width and a phone's, axe clean."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import Page, expect

from memory.models import Note, Revision
from memory.services import Actor, edit_note, erase_note, forget, remember
from tests.browser.test_browser_screens import fits_and_passes_axe, log_in
from tests.support.factories import AgentFactory, PersonFactory, TeamFactory, written

PASSWORD = "correct horse battery staple"
pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@dataclass
class Past:
    home: Note
    phone_id: int
    three_days_ago: str
    five_days_ago: str


def backdate(note_id: int, *moments: object) -> None:
    """Move this note's logged writes, oldest first, to these moments (the log's own times)."""
    revisions = Revision.objects.filter(note_id=note_id).order_by("created_at", "id")
    for revision, moment in zip(revisions, moments, strict=False):
        Revision.objects.filter(pk=revision.pk).update(created_at=moment)


@pytest.fixture
def past(django_user_model) -> Past:
    """Ada's home city was Oslo four days ago and Bergen since yesterday; her phone number was known
    four days ago and forgotten two days ago; a secret she erased was written four days ago."""
    team = TeamFactory.create(name="Acme")
    agent = AgentFactory.create(team=team, name="Coach")
    user = django_user_model.objects.create_user("ada", password=PASSWORD)
    ada = PersonFactory.create(team=team, external_id="ada", display_name="Ada", user=user)
    actor = Actor(Revision.Actor.AGENT, agent.slug)
    now = timezone.now()
    home = written(remember(team=team, person=ada, actor=actor, key="home-city", description="Where Ada lives",
                            content="Ada lives in Oslo."))  # fmt: skip
    edit_note(note=home, actor=actor, mode="replace", content="Ada lives in Bergen.")
    backdate(home.pk, now - timedelta(days=4), now - timedelta(days=1))
    phone = written(remember(team=team, person=ada, actor=actor, key="old-phone", description="Ada's phone number",
                             content="+47 000 00 000"))  # fmt: skip
    forget(team=team, person=ada, actor=actor, key="old-phone")
    backdate(phone.pk, now - timedelta(days=4), now - timedelta(days=2))
    secret = written(remember(team=team, person=ada, actor=actor, key="pin", description="A secret",
                              content="My PIN is okapi4321."))  # fmt: skip
    backdate(secret.pk, now - timedelta(days=4))
    erase_note(note=secret, actor=Actor(Revision.Actor.OWNER, "user:ada"))
    home.refresh_from_db()
    return Past(
        home=home,
        phone_id=phone.pk,
        three_days_ago=(now - timedelta(days=3)).date().isoformat(),
        five_days_ago=(now - timedelta(days=5)).date().isoformat(),
    )


def test_the_lens_shows_memory_as_it_was_on_a_day(page: Page, live_server, past: Past, artifact):
    base = live_server.url
    log_in(page, base)
    expect(page.get_by_text("Ada lives in Bergen.")).to_be_visible()
    page.get_by_label("As it was on").fill(past.three_days_ago)
    page.get_by_role("button", name="Show").click()
    page.wait_for_url(f"**/lens/as-of/?as_of={past.three_days_ago}")
    expect(page.get_by_role("heading", name=f"What agents remembered on {past.three_days_ago}")).to_be_visible()
    main = page.locator("main")
    expect(main).to_contain_text("Ada lives in Oslo.")
    expect(main).to_contain_text("+47 000 00 000")  # deleted since, but known then
    expect(main).not_to_contain_text("Bergen")
    expect(main).not_to_contain_text("okapi4321")  # erased: never shown again
    fits_and_passes_axe(page, "lens-as-of", artifact)

    # A note's page: what it said then, swapped in by htmx.
    page.goto(f"{base}/m/{past.home.pk}")
    expect(page.locator("#note-card .content")).to_have_text("Ada lives in Bergen.")
    page.evaluate("window.stillTheSamePage = true")
    page.get_by_label("As it was on").fill(past.three_days_ago)
    page.get_by_role("button", name="Show").click()
    expect(page.locator("#note-as-of .content")).to_have_text("Ada lives in Oslo.")
    assert page.evaluate("window.stillTheSamePage === true")  # swapped in place, not a new page
    fits_and_passes_axe(page, "note-as-of", artifact)
    page.get_by_label("As it was on").fill(past.five_days_ago)
    page.get_by_role("button", name="Show").click()
    expect(page.locator("#note-as-of")).to_contain_text("This note did not exist yet.")

    # A note deleted since has a page of its own as of a date: the log still knows it.
    page.goto(f"{base}/m/{past.phone_id}/as-of?as_of={timezone.now().date().isoformat()}")
    expect(page.locator("#note-as-of")).to_contain_text("This note was deleted by then.")
    fits_and_passes_axe(page, "deleted-note-as-of", artifact)
    page.goto(f"{base}/lens/as-of/?as_of=someday")
    expect(page.get_by_role("alert")).to_contain_text("ISO 8601")
