import pytest


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_demo_shows_its_rate_limit_in_place(page, live_server, settings):
    settings.DEMO_ENABLED = True
    settings.DEMO_RATE = "2/hour"
    page.goto(live_server.url + "/demo/")  # 1
    page.fill("#demo-message", "Hi, I'm Ada and I live in Oslo.")
    page.click("text=Send")  # 2
    page.wait_for_selector("#known-count:text('2')")

    page.fill("#demo-message", "I moved to Bergen.")
    page.click("text=Send")  # 3: over the limit; htmx swaps the 429's fragment in instead of dropping it
    alert = page.wait_for_selector("#demo-body .error[role=alert]")
    assert "The demo takes at most 2 requests per hour from one address" in alert.text_content()
    assert page.text_content("#known-count") == "2"
    assert "Lives in Oslo." in page.text_content("#known")
