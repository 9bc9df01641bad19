"""Every page a person reads, at a desktop width and a phone's: nothing wider than the screen,
no serious or critical accessibility violation (axe-core, run in the page), the plain words there,
and a screenshot of each under tests/artifacts/. Then the flows that change what a page says: mute,
delete, an htmx request that fails, and the demo."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import Page, expect

from accounts.models import Agent, Membership, Person
from conversations.models import Conversation, Message
from conversations.services import erase_message, record_message, start_conversation
from memory.models import Note, Revision
from memory.services import (
    Actor,
    append_observation,
    erase_note,
    expire_notes,
    forget,
    remember,
    update_bank_settings,
)
from memory.services.reads import flush_reads, record_read
from tests.support.factories import AgentFactory, PersonFactory, TeamFactory, written

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("demo_on")]

PASSWORD = "correct horse battery staple"
AXE = Path(__file__).resolve().parent / "vendor" / "axe.min.js"  # axe-core 4.14.1 from the npm registry
WIDTHS = {"desktop": 1280, "phone": 390}
LONG_NOTE = (
    "Ada is writing a book about the history of lighthouses on the Norwegian coast, chapter by chapter, "
    "and wants every chapter to open with a keeper's logbook entry; she has finished the chapters on "
    "Lindesnes and Svenner and is researching Ryvingen next."
)


@dataclass
class World:
    person: Person
    agent: Agent
    home: Note
    shared: Note
    talk: Conversation
    said: Message


@pytest.fixture
def world(django_user_model) -> World:
    """Ada, a team admin, with a memory that has something of everything the lens shows."""
    team = TeamFactory.create(name="Acme")
    agent = AgentFactory.create(team=team, name="Coach")
    user = django_user_model.objects.create_user("ada", password=PASSWORD)
    Membership.objects.create(team=team, user=user, role=Membership.Role.ADMIN)
    ada = PersonFactory.create(team=team, external_id="ada", display_name="Ada", user=user)
    actor = Actor(Revision.Actor.AGENT, agent.slug)

    def note(person: Person = ada, **fields: Any) -> Note:
        return written(remember(team=team, person=person, actor=actor, **fields))

    home = note(key="home-city", description="Where Ada lives", content="Ada lives in Oslo.")
    note(key="book", description="What Ada is writing", content=LONG_NOTE, kind=Note.Kind.PREFERENCE)
    append_observation(team=team, person=ada, actor=actor, category="food", observation="Likes rye bread.")
    note(key="deadline", description="When Apollo ships", content="Apollo ships in May.", scope="project:apollo")
    shared = note(
        key="stack", description="What Apollo runs on", content="Apollo runs on Django.", scope="project:apollo",
        bank="shared",
    )  # fmt: skip
    note(key="old-phone", description="Ada's old phone number", content="+47 000 00 000")
    forget(team=team, person=ada, actor=actor, key="old-phone")
    note(
        key="on-a-train", description="Where Ada is right now", content="On the train to Bergen.",
        expires_at=timezone.now() + timedelta(minutes=1),
    )  # fmt: skip
    expire_notes(now=timezone.now() + timedelta(minutes=2))
    with pytest.raises(Exception, match="the limit is 2000"):
        note(key="essay", description="An essay", content="x" * 2001)

    # Grace's global bank keeps two things: a third evicts, a passing state is refused.
    grace = PersonFactory.create(team=team, external_id="grace", display_name="Grace")
    employer = note(grace, key="employer", description="Where Grace works", content="Grace works at Acme.")
    update_bank_settings(
        bank=employer.bank, actor=Actor(Revision.Actor.ADMIN, "test"), changes={"policy": "bounded", "capacity": 2}
    )
    note(grace, key="city", description="Where Grace lives", content="Grace lives in Rome.", kind=Note.Kind.IDENTITY)
    note(grace, key="cilantro", description="Cilantro", content="Grace hates cilantro.", kind=Note.Kind.PREFERENCE)
    with pytest.raises(Exception, match="worth less"):
        note(grace, key="on-a-bus", description="Where Grace is", content="On a bus.", kind=Note.Kind.EPHEMERAL)
    PersonFactory.create(team=team, external_id="demo-0123abcd")  # an anonymous demo visitor who said nothing

    # A conversation with one message erased, and an agent's lookup that found a note and a message.
    talk = start_conversation(team=team, agent=agent, person=ada)
    said = record_message(conversation=talk, role="user", content="I moved to Oslo in May. " + LONG_NOTE)
    record_message(conversation=talk, role="assistant", content="Welcome to Oslo!")
    erase_message(message=record_message(conversation=talk, role="user", content="My bank PIN is 4321."))
    record_read(
        team=team, agent=agent, person=ada, tool="search_conversation", started=0.0, query="when did Ada move",
        notes=[home.pk], messages=[said.pk], conversations=[talk.pk],
    )  # fmt: skip
    flush_reads()
    return World(person=ada, agent=agent, home=home, shared=shared, talk=talk, said=said)


def fits_and_passes_axe(page: Page, name: str, artifact: Any) -> None:
    """At each width: no horizontal scrolling, no serious or critical axe violation, a screenshot."""
    for label, width in WIDTHS.items():
        page.set_viewport_size({"width": width, "height": 900})
        overflow = page.evaluate("() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]")
        assert overflow[0] <= overflow[1], f"{name} at {width}px is {overflow[0]}px wide"
        if not page.evaluate("() => typeof window.axe !== 'undefined'"):
            page.add_script_tag(path=str(AXE))
        checked = page.evaluate(
            """async () => {
                const results = await axe.run(document);
                return {
                    version: axe.version,
                    passed: results.passes.length,
                    violations: results.violations
                        .filter(v => v.impact === "serious" || v.impact === "critical")
                        .map(v => ({id: v.id, impact: v.impact, help: v.help,
                                    nodes: v.nodes.slice(0, 3).map(n => n.target.join(" "))})),
                };
            }"""
        )
        assert checked["version"] == "4.14.1"
        assert checked["passed"] > 10  # the rules ran (contrast, names, landmarks, ...)
        assert checked["violations"] == [], f"{name} at {width}px: {checked['violations']}"
        page.screenshot(path=artifact(f"{name}-{label}"), full_page=True)


def log_in(page: Page, base_url: str) -> None:
    page.goto(base_url + "/login/?next=/lens/")
    page.get_by_label("Username").fill("ada")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(base_url + "/lens/")


def test_every_page_fits_a_phone_passes_axe_and_speaks_plainly(page: Page, live_server, world: World, artifact):
    base = live_server.url
    page.goto(base + "/login/")
    expect(page.get_by_role("heading", name="Log in")).to_be_visible()
    fits_and_passes_axe(page, "login", artifact)

    log_in(page, base)
    # The memory itself, per bank in words, with the limits as counts and no engine terms outside the toggles.
    expect(page.get_by_role("heading", name="About you, everywhere")).to_be_visible()
    expect(page.get_by_role("heading", name="About you in project Apollo")).to_be_visible()
    expect(page.get_by_role("heading", name="Shared in project Apollo").first).to_be_visible()
    expect(page.get_by_text("Ada lives in Oslo.")).to_be_visible()
    expect(page.get_by_text("Apollo ships in May.")).to_be_visible()
    expect(page.get_by_text("of 40 notes").first).to_be_visible()
    expect(page.get_by_text("Show all").first).to_be_visible()
    # Why things are gone and what was not kept, as sentences.
    expect(page.get_by_text("Coach forgot “Ada's old phone number” (old-phone) when asked to.")).to_be_visible()
    expect(page.get_by_text("“Where Ada is right now” (on-a-train) expired at")).to_be_visible()
    expect(page.get_by_text("Did not save what Coach wrote to essay: content is 2001 characters")).to_be_visible()
    expect(page.get_by_role("heading", name="People in this team")).to_be_visible()
    expect(
        page.get_by_text(
            "Forgot “Where Grace works” (employer) to make room for a new preference: it keeps at most 2 things "
            "and this was the least important."
        )
    ).to_be_visible()
    expect(page.get_by_text("Did not keep a new passing state (on-a-bus)")).to_be_visible()
    expect(page.get_by_text("demo-0123abcd")).to_have_count(0)
    expect(
        page.get_by_text(
            "That agent is not given these notes, the messages they were learned from, or summaries built from those messages."
        ).first
    ).to_be_visible()
    assert "worth" not in page.locator("main").inner_text()
    fits_and_passes_axe(page, "lens", artifact)

    page.get_by_label("Search your memories").fill("where does Ada live")
    page.get_by_role("button", name="Search").click()
    expect(page.locator("#search-results")).to_contain_text("About you, everywhere")
    fits_and_passes_axe(page, "lens-search", artifact)

    page.goto(f"{base}/m/{world.home.pk}")
    expect(page.locator("#note-card .content")).to_have_text("Ada lives in Oslo.")
    fits_and_passes_axe(page, "note", artifact)

    page.goto(f"{base}/m/{world.shared.pk}")
    fits_and_passes_axe(page, "shared-note", artifact)

    page.goto(f"{base}/m/{world.home.pk}/delete")
    expect(page.get_by_role("heading", name="Delete “home-city”?")).to_be_visible()
    fits_and_passes_axe(page, "delete", artifact)

    # The person's conversations, one read with a tombstone, the two confirmations, and the lookups.
    page.goto(f"{base}/lens/conversations/")
    fits_and_passes_axe(page, "conversations", artifact)
    page.goto(f"{base}/lens/conversations/{world.talk.pk}")
    expect(page.locator(f"#message-{world.said.pk}")).to_contain_text("I moved to Oslo in May.")
    expect(page.get_by_text("Message erased").first).to_be_visible()
    fits_and_passes_axe(page, "conversation", artifact)
    page.goto(f"{base}/lens/conversations/{world.talk.pk}/messages/{world.said.pk}/delete")
    fits_and_passes_axe(page, "message-delete", artifact)
    page.goto(f"{base}/lens/conversations/{world.talk.pk}/delete")
    fits_and_passes_axe(page, "conversation-delete", artifact)
    page.goto(f"{base}/lens/reads/")
    expect(page.get_by_text("when did Ada move").first).to_be_visible()
    fits_and_passes_axe(page, "reads", artifact)
    page.goto(f"{base}/lens/people/{world.person.pk}/erase")
    fits_and_passes_axe(page, "erase-everything", artifact)

    page.goto(f"{base}/m/999999999")
    expect(page.get_by_role("heading", name="Not found")).to_be_visible()
    expect(page.get_by_role("link", name="Back to the Memory lens")).to_be_visible()
    fits_and_passes_axe(page, "not-found", artifact)

    page.goto(base + "/demo/")
    page.fill("#demo-message", "Hi, I'm Ada and I live in Oslo.")
    page.get_by_role("button", name="Send").click()
    expect(page.locator("#known-count")).to_have_text("2")
    page.get_by_text("Correct or delete").first.click()
    fits_and_passes_axe(page, "demo", artifact)

    page.goto(base + "/")
    fits_and_passes_axe(page, "home", artifact)


def test_mute_delete_a_failed_save_and_the_demo_say_what_happened(page: Page, live_server, world: World, artifact):
    base = live_server.url
    log_in(page, base)
    page.set_viewport_size({"width": WIDTHS["phone"], "height": 900})

    # An htmx request that fails says so where it was made: with the server's words, or its status, or
    # that the server could not be reached.
    page.route("**/lens/?q=*", lambda route: route.fulfill(status=500, body="boom"))
    page.get_by_label("Search your memories").fill("Oslo")
    page.get_by_role("button", name="Search").click()
    failed = page.locator(".request-failed[role=alert]")
    expect(failed).to_have_text(
        "That did not work (the server answered 500); nothing was changed. Reload the page and try again."
    )
    page.unroute("**/lens/?q=*")
    page.route("**/lens/?q=*", lambda route: route.abort())
    page.get_by_role("button", name="Search").click()
    expect(failed).to_have_text(
        "Mnemo could not be reached, so nothing was changed. Check the connection and try again."
    )
    expect(failed).to_have_count(1)
    page.unroute("**/lens/?q=*")
    page.get_by_role("button", name="Search").click()
    expect(page.locator("#search-results")).to_contain_text("Ada lives in Oslo.")
    expect(failed).to_have_count(0)  # gone once a request goes through

    # Mute: said next to the control, confirmed after, and the muted state is legible (axe checks contrast).
    food = page.locator(".category", has=page.get_by_role("heading", name="food")).first
    food.get_by_label("Mute for").select_option(label="Coach")
    food.get_by_role("button", name="Mute").click()
    expect(page.locator("#announcements")).to_contain_text(
        "Muted “food” for Coach. Coach is not given these notes, the messages they were learned from, or "
        "conversation summaries built from those messages"
    )
    expect(page.locator(".category.is-muted").first).to_contain_text(
        "Muted for Coach: it is not given these notes, the messages they were learned from, or summaries built from them"
    )
    fits_and_passes_axe(page, "muted", artifact)

    # A save on a note deleted elsewhere says so, in place.
    page.goto(f"{base}/m/{world.home.pk}")
    page.get_by_text("Edit this note").click()
    page.get_by_label("Content").fill("Ada lives in Bergen.")
    erase_note(note=world.home, actor=Actor(Revision.Actor.AGENT, world.agent.slug))
    page.get_by_role("button", name="Save").click()
    failed = page.locator(".request-failed[role=alert]")
    expect(failed).to_have_text(
        "This note was deleted elsewhere (in another tab, by an agent, or it expired), so your change was not saved."
    )
    fits_and_passes_axe(page, "save-after-delete", artifact)

    # The delete flow ends on the lens, which lists it under Removed without what it said.
    book = Note.objects.get(key="book")
    page.goto(f"{base}/m/{book.pk}/delete")
    page.get_by_role("button", name="Delete the note").click()
    page.wait_for_url(base + "/lens/")
    expect(page.locator("#announcements")).to_contain_text("What it said is erased")
    expect(page.get_by_text("You deleted a note; what it said is erased.")).to_be_visible()
    assert "lighthouses" not in page.content()
    fits_and_passes_axe(page, "deleted", artifact)

    # The demo: a message that yields nothing says so; the notices of the last change stay.
    page.goto(base + "/demo/")
    page.fill("#demo-message", "Hi, I'm Ada.")
    page.get_by_role("button", name="Send").click()
    expect(page.locator(".event.create")).to_contain_text("Now knows name")
    page.fill("#demo-message", "Hmm.")
    page.get_by_role("button", name="Send").click()
    expect(page.locator(".nothing-kept")).to_have_text("Nothing to keep from that.")
    expect(page.locator(".event.create")).to_contain_text("Now knows name")
    expect(page.locator("#announcements")).to_contain_text("Nothing to keep from that.")
    page.get_by_text("Correct or delete").first.click()
    page.get_by_role("button", name="Delete name").click()
    expect(page.locator(".event.delete")).to_contain_text("Deleted a fact")
    expect(page.locator("#known-count")).to_have_text("0")
    fits_and_passes_axe(page, "demo-after", artifact)
    assert Person.objects.filter(user__username="ada", team__slug="demo").exists()  # her own demo memory
