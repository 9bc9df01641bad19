"""The lens in a real browser: where a curated note was learned from, deleting it with the messages
it came from, and a conversation read back with a tombstone where a message was erased."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from conversations.models import Message
from conversations.services import start_conversation
from curator.providers import RulesProvider
from curator.services import curate_conversation
from memory.models import Note
from tests.browser import test_browser_lens
from tests.browser.test_browser_lens import Owner, log_in
from tests.support.canary import find_text
from tests.support.factories import chat

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
owner = test_browser_lens.owner  # Ada, her login and her agent Coach, as the lens's browser tests have them


def test_a_curated_note_shows_where_it_was_learned_and_goes_with_its_messages(
    page: Page, live_server, owner: Owner, artifact
):
    conversation = start_conversation(team=owner.person.team, agent=owner.agent, person=owner.person)
    said = chat(conversation, [("I just moved to Cnrytown. I really love cnrycake pastries.", "Welcome!")])
    curate_conversation(conversation_id=conversation.pk, provider=RulesProvider())
    pastries = Note.objects.get(key="preference-cnrycake-pastries")

    log_in(page, live_server.url)
    page.goto(f"{live_server.url}/m/{pastries.pk}")
    origins = page.locator("#note-origins")
    expect(origins.get_by_role("heading", name="Learned from")).to_be_visible()
    expect(origins).to_contain_text("I just moved to Cnrytown.")
    page.screenshot(path=artifact("learned-from"), full_page=True)

    page.get_by_role("link", name="Delete this note…").click()
    expect(page.locator(".sources-erased")).to_contain_text("The 1 message it was learned from is erased")
    page.get_by_role("button", name="Delete the note and the 1 message it was learned from").click()
    page.wait_for_url(live_server.url + "/lens/")
    expect(page.get_by_role("status")).to_contain_text("and the 1 message it was learned from")
    assert Message.objects.get(pk=said[0].pk).is_erased

    # The other note learned from that message now points at a tombstone; once it goes too, nothing
    # of where the person moved is left anywhere. (The pastries' key, which the rules provider built
    # from what was said, is the revision log's to replace: see the note-erasure tests.)
    home = Note.objects.get(key="home-city")
    page.goto(f"{live_server.url}/m/{home.pk}")
    expect(page.locator("#note-origins")).to_contain_text("message erased")
    page.get_by_role("link", name="Delete this note…").click()
    page.get_by_role("button", name="Delete the note", exact=True).click()
    page.wait_for_url(live_server.url + "/lens/")
    assert find_text("cnrytown") == []


def test_a_conversation_is_read_back_with_a_tombstone(page: Page, live_server, owner: Owner, artifact):
    conversation = start_conversation(team=owner.person.team, agent=owner.agent, person=owner.person)
    said = chat(conversation, [("My locker code is 4711.", "Noted."), ("I like tea.", "Good choice.")])

    log_in(page, live_server.url)
    page.get_by_role("link", name="Your conversations").click()
    page.get_by_role("link", name="With Coach").click()
    first = page.locator(f"#message-{said[0].pk}")
    expect(first).to_contain_text("My locker code is 4711.")
    first.get_by_role("link", name="Delete this message…").click()
    expect(page.get_by_role("heading", name="Delete this message?")).to_be_visible()
    page.get_by_role("button", name="Delete the message").click()

    page.wait_for_url(f"**/lens/conversations/{conversation.pk}*")
    expect(page.locator(f"#message-{said[0].pk}")).to_contain_text("Message erased")
    expect(page.locator("#message-list")).not_to_contain_text("4711")
    expect(page.locator(f"#message-{said[2].pk}")).to_contain_text("I like tea.")
    page.screenshot(path=artifact("tombstone"), full_page=True)

    page.get_by_role("link", name="Delete this whole conversation…").click()
    page.get_by_role("button", name="Delete the conversation").click()
    page.wait_for_url(live_server.url + "/lens/conversations/")
    expect(page.get_by_role("status")).to_contain_text("3 messages and its summary were erased")
    assert not Message.objects.filter(conversation=conversation).exclude(content="").exists()
