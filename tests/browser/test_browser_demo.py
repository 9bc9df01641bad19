import pytest
from playwright.sync_api import Page, expect

pytestmark = pytest.mark.usefixtures("demo_on")


def say(page: Page, text: str) -> None:
    """Send one message and wait until htmx has swapped in the answer to it.

    The answer is the only thing that adds a line of the visitor's to the transcript, so the count
    going up by one is the signal; waiting for the network to go quiet is not (it may already be
    quiet before the request starts).
    """
    said = page.locator(".transcript li.user")
    before = said.count()
    page.fill("#demo-message", text)
    page.click("text=Send")
    expect(said).to_have_count(before + 1)
    expect(said.last).to_have_text(f"You {text}")
    expect(page.locator("#demo-message")).to_have_value("")


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_demos_four_things_to_try(page, live_server, artifact):
    page.goto(live_server.url + "/demo/")
    assert page.text_content("#knows-heading") == "What it knows, 0 of 8"

    # 01: tell it your name and where you live, then start a new conversation.
    say(page, "Hi, I'm Ada and I live in Oslo.")
    expect(page.locator("#known-count")).to_have_text("2")
    assert "Their name is Ada." in page.text_content("#known")
    # The button answers with HX-Redirect, and htmx then loads /demo/ again: wait for that load,
    # then for what only the new conversation's page has (an empty transcript).
    with page.expect_navigation(url=live_server.url + "/demo/"):
        page.click("#new-conversation")
    expect(page.locator(".transcript li.muted")).to_be_visible()
    expect(page.locator(".transcript li.user")).to_have_count(0)
    assert page.text_content("#known-count") == "2"
    assert "Oslo" not in page.text_content(".transcript")

    # 02: ask where you live: the answer can only come from memory.
    say(page, "Where do I live?")
    assert "Lives in Oslo." in page.text_content(".given")
    page.screenshot(path=artifact("asked"), full_page=True)

    # 03: tell it you moved: the row changes, no second one appears.
    say(page, "I moved to Bergen.")
    expect(page.locator(".event", has_text="Corrected")).to_have_count(1)
    assert "Lives in Bergen" in page.text_content("#known")
    assert page.text_content("#known-count") == "2"

    # 04: nine unrelated things: what it decides to lose is on the screen as it happens.
    seen = []
    for text in [
        "I'm allergic to peanuts", "I work at Acme", "I have a dog named Pixel", "I love sailing",
        "I hate mornings", "I enjoy jazz", "I like tea", "I'm vegetarian", "I'm on the train",
    ]:  # fmt: skip
        say(page, text)
        seen.extend(page.locator(".event").all_text_contents())
        if page.locator(".event.evict").count():
            page.screenshot(path=artifact("eviction"), full_page=True)
    assert page.text_content("#known-count") == "8"
    assert any(event.strip().startswith("Forgot") for event in seen), seen
    assert any("Did not keep a new passing state (current-state)" in event for event in seen), seen
    page.screenshot(path=artifact("full"), full_page=True)
