import pytest


@pytest.fixture(autouse=True)
def _demo_on(settings):
    settings.DEMO_ENABLED = True


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_demos_four_things_to_try(page, live_server, artifact):
    page.goto(live_server.url + "/demo/")
    assert page.text_content("#knows-heading") == "What it knows, 0 of 8"

    # 01: tell it your name and where you live, then start a new conversation.
    page.fill("#demo-message", "Hi, I'm Ada and I live in Oslo.")
    page.click("text=Send")
    page.wait_for_selector("#known-count:text('2')")
    assert "Their name is Ada." in page.text_content("#known")
    page.click("#new-conversation")
    page.wait_for_load_state("networkidle")
    assert page.text_content("#known-count") == "2"
    assert "Oslo" not in page.text_content(".transcript")

    # 02: ask where you live: the answer can only come from memory.
    page.fill("#demo-message", "Where do I live?")
    page.click("text=Send")
    page.wait_for_selector(".given")
    assert "Lives in Oslo." in page.text_content(".given")
    page.screenshot(path=artifact("asked"), full_page=True)

    # 03: tell it you moved: the row changes, no second one appears.
    page.fill("#demo-message", "I moved to Bergen.")
    page.click("text=Send")
    page.wait_for_selector("text=Corrected")
    assert "Lives in Bergen" in page.text_content("#known")
    assert page.text_content("#known-count") == "2"

    # 04: nine unrelated things: what it decides to lose is on the screen as it happens.
    seen = []
    for text in [
        "I'm allergic to peanuts", "I work at Acme", "I have a dog named Pixel", "I love sailing",
        "I hate mornings", "I enjoy jazz", "I like tea", "I'm vegetarian", "I'm on the train",
    ]:  # fmt: skip
        page.fill("#demo-message", text)
        page.click("text=Send")
        page.wait_for_function("document.querySelector('#demo-message').value === ''")
        page.wait_for_load_state("networkidle")
        seen.extend(page.locator(".event").all_text_contents())
        if page.locator(".event.evict").count():
            page.screenshot(path=artifact("eviction"), full_page=True)
    assert page.text_content("#known-count") == "8"
    assert any(event.strip().startswith("Forgot") for event in seen), seen
    assert any("Did not keep current-state" in event for event in seen), seen
    page.screenshot(path=artifact("full"), full_page=True)
