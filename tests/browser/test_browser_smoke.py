import pytest


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_docs_page_renders_the_api_in_a_real_browser(page, live_server, artifact):
    asked: list[str] = []
    page.on("request", lambda request: asked.append(request.url))
    page.goto(live_server.url + "/api/docs/")
    page.wait_for_selector("text=Mnemo API")
    page.get_by_text("/api/v1/me", exact=True).first.wait_for()
    # Everything came from this machine: the sidecar serves Swagger UI, no CDN.
    assert asked
    assert [url for url in asked if not url.startswith((live_server.url + "/", "data:", "blob:"))] == []
    page.screenshot(path=artifact("docs"))


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_home_page_links_to_the_docs(page, live_server, artifact):
    page.goto(live_server.url + "/")
    assert page.text_content("h1") == "Mnemo"
    page.click("text=API reference")
    page.wait_for_url(live_server.url + "/api/docs/")
    page.screenshot(path=artifact("docs-from-home"))
