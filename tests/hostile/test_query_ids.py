"""Every number read from a query string, in the API and the lens, is read by one rule
(config.text.query_id): ASCII digits within Postgres' bigint. Anything else is a 400 naming the
parameter (the error shape in the API, a plain page in the lens), never a 500."""

from __future__ import annotations

import pytest

from config.text import INT64_MAX
from conversations.services import start_conversation
from tests.support.factories import chat

pytestmark = pytest.mark.django_db

# Not ids: Unicode digits int() would take, a sign, an exponent, spaces, zero, past bigint, and
# 5,000 digits (past the 4,300 digits int() converts at all).
MALFORMED = ["²", "٣", "-1", "0", "abc", "1e3", " 1", "1.0", str(INT64_MAX + 1), "9" * 5000]

API = [
    ("/api/v1/revisions", "note"),
    ("/api/v1/notes", "limit"),
    ("/api/v1/notes", "offset"),  # an offset may be 0
]
LENS = [
    ("/lens/conversations/", "agent"),
    ("/lens/conversations/", "page"),
    ("/lens/conversations/{conversation}", "page"),
    ("/lens/reads/", "agent"),
    ("/lens/reads/", "person"),
    ("/lens/reads/", "page"),
]


def _cases(endpoints: list[tuple[str, str]]) -> list[object]:
    return [
        pytest.param(path, name, raw, id=f"{path}?{name}={raw if len(raw) < 30 else f'{len(raw)}-digits'}")
        for path, name in endpoints
        for raw in MALFORMED
        if not (name == "offset" and raw == "0")
    ]


@pytest.mark.parametrize(("path", "name", "raw"), _cases(API))
def test_a_malformed_number_in_an_api_query_is_400_naming_it(api, path, name, raw):
    response = api.get(path, {name: raw})

    assert response.status_code == 400, response.content[:300]
    error = response.json()["error"]
    assert (error["code"], error["field"]) == ("invalid", name)
    assert name in error["message"]


@pytest.mark.parametrize(("path", "name", "raw"), _cases(LENS))
def test_a_malformed_number_in_a_lens_query_is_a_400_page(lens_client, conversation, path, name, raw):
    response = lens_client.get(path.format(conversation=conversation.pk), {name: raw})

    assert response.status_code == 400, response.content[:300]
    assert response["Content-Type"].startswith("text/plain")
    assert response.content.decode().startswith(f"{name} must be ")


def test_the_largest_id_is_read_and_finds_nothing(api, lens_client, conversation):
    biggest = str(INT64_MAX)
    assert api.get("/api/v1/revisions", {"note": biggest}).json()["results"] == []
    assert lens_client.get("/lens/conversations/", {"agent": biggest}).status_code == 200
    assert lens_client.get("/lens/reads/", {"agent": biggest}).status_code == 404  # no such agent here
    assert lens_client.get("/lens/reads/", {"page": biggest}).status_code == 200  # past the end: the last page


def test_the_lens_still_filters_and_pages_by_well_formed_numbers(lens_client, tenant, person, conversation):
    chat(conversation, [("Hi", "Hello")])
    other = start_conversation(team=tenant.team, agent=tenant.agent, person=person)
    listed = lens_client.get("/lens/conversations/", {"agent": tenant.agent.pk, "page": "1"}).content.decode()
    assert f"/lens/conversations/{conversation.pk}" in listed
    assert f"/lens/conversations/{other.pk}" in listed
    assert 'aria-current="page">' in listed
    assert lens_client.get("/lens/conversations/", {"agent": ""}).status_code == 200  # empty: no filter
