import pytest


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_demo_panel_updates_live_and_a_new_conversation_keeps_the_memory(page, live_server):
    page.goto(live_server.url + "/demo/")
    assert page.text_content("#knows-heading") == "What it knows, 0 of 8"
    page.fill("#demo-message", "Hi, I'm Ada and I live in Oslo.")
    page.click("text=Send")
    page.wait_for_selector("#known-count:text('2')")
    assert "Their name is Ada." in page.text_content("#known")
    page.click("#new-conversation")
    page.wait_for_load_state("networkidle")
    assert page.text_content("#known-count") == "2"
    page.fill("#demo-message", "I moved to Bergen.")
    page.click("text=Send")
    page.wait_for_selector("text=Corrected")
    assert "Lives in Bergen" in page.text_content("#known")
    assert page.text_content("#known-count") == "2"
    page.screenshot(path="/tmp/demo.png", full_page=True)
