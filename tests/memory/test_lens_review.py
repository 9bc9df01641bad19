"""Review in the lens: the person turns it on, and keeps, edits and keeps, or declines what waits."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from accounts.models import Person
from accounts.services import issue_api_key
from conversations.models import NoteSource
from conversations.services import start_conversation
from memory.models import Bank, Note, Proposal, Revision
from memory.services import Actor, get_or_create_bank, latch_full, propose, set_review_writes
from tests.support.factories import PersonFactory, chat
from tests.support.fixtures import HTMX, Tenant, make_tenant

pytestmark = pytest.mark.django_db


@pytest.fixture
def waiting(tenant: Tenant, person: Person, lens_client: Client) -> Proposal:
    """Ada reviews what is kept; the agent proposed what she said about tea, citing her message."""
    set_review_writes(person=person, review=True)
    conversation = start_conversation(team=tenant.team, agent=tenant.agent, person=person)
    said = chat(conversation, [("I drink green tea every morning.", "Nice.")])
    return propose(
        team=tenant.team, person=person, agent=tenant.agent, actor=Actor.for_agent(tenant.agent),
        operation="remember", key="tea", description="What Ada drinks", content="Green tea every morning.",
        source_messages=[said[0].pk],
    )  # fmt: skip


def test_the_toggle_turns_review_on_and_off_in_plain_words(lens_client: Client, person: Person) -> None:
    page = lens_client.get("/lens/").content.decode()
    assert "Waiting for you" in page
    assert "Ask me before keeping anything" in page
    on = lens_client.post(f"/lens/people/{person.pk}/review", {"review": "on"}, headers=HTMX)
    assert on.status_code == 200
    assert "Ask before keeping is <strong>on</strong>" in on.content.decode()
    assert "From now on, what agents learn about you waits here" in on.content.decode()
    assert Person.objects.get(pk=person.pk).review_writes is True
    off = lens_client.post(f"/lens/people/{person.pk}/review", {"review": "off"}, follow=True)
    assert Person.objects.get(pk=person.pk).review_writes is False
    assert "Agents keep what they learn about you again" in off.content.decode()


def test_the_list_says_what_which_agent_and_from_which_message(lens_client: Client, waiting: Proposal) -> None:
    page = lens_client.get("/lens/").content.decode()
    assert "wants to remember “What Ada drinks”" in page
    assert "Green tea every morning." in page
    assert "you said" in page
    assert "“I drink green tea every morning.”" in page
    assert waiting.agent is not None
    assert f"{waiting.agent.name} wants to remember" in page


def test_keep_writes_the_note_with_its_source(lens_client: Client, waiting: Proposal) -> None:
    answer = lens_client.post(f"/lens/proposals/{waiting.pk}/keep", headers=HTMX)
    assert answer.status_code == 200
    assert "Kept." in answer.content.decode()
    assert "Green tea every morning." not in answer.content.decode()  # no longer waiting
    note = Note.objects.get()
    assert (note.key, note.content) == ("tea", "Green tea every morning.")
    assert NoteSource.objects.filter(note=note).count() == 1
    assert Revision.objects.get(action="keep").actor == "owner"


def test_edit_and_keep_keeps_the_persons_words(lens_client: Client, waiting: Proposal) -> None:
    answer = lens_client.post(f"/lens/proposals/{waiting.pk}/keep", {"content": "Tea,\r\nsometimes."}, headers=HTMX)
    assert answer.status_code == 200
    assert Note.objects.get().content == "Tea,\nsometimes."
    blank = lens_client.post(f"/lens/proposals/{waiting.pk}/keep", {"content": "  "}, headers=HTMX)
    assert blank.status_code == 422  # decided already: said so, nothing changes
    assert Note.objects.get().content == "Tea,\nsometimes."


def test_an_empty_edit_is_refused_and_it_still_waits(lens_client: Client, waiting: Proposal) -> None:
    answer = lens_client.post(f"/lens/proposals/{waiting.pk}/keep", {"content": " "}, headers=HTMX)
    assert answer.status_code == 422
    assert "Write what to keep, or choose Don&#x27;t keep." in answer.content.decode()
    assert Proposal.objects.get(pk=waiting.pk).status == "pending"


def test_dont_keep_leaves_nothing(lens_client: Client, waiting: Proposal) -> None:
    answer = lens_client.post(f"/lens/proposals/{waiting.pk}/reject", headers=HTMX)
    assert answer.status_code == 200
    assert "Not kept. What it said is gone." in answer.content.decode()
    declined = Proposal.objects.get(pk=waiting.pk)
    assert (declined.status, declined.content, declined.decided_by) == ("rejected", "", "user:ada-login")
    assert not Note.objects.exists()


def test_a_full_bank_refuses_keeping_and_it_still_waits(
    tenant: Tenant, person: Person, lens_client: Client, waiting: Proposal
) -> None:
    bank = get_or_create_bank(team=tenant.team, person=person, scope="", kind=Bank.Kind.GLOBAL)
    latch_full(bank=bank, actor=Actor(Revision.Actor.ADMIN, "test"), reason="full")
    answer = lens_client.post(f"/lens/proposals/{waiting.pk}/keep", headers=HTMX)
    assert answer.status_code == 422
    assert "Not kept yet:" in answer.content.decode()
    assert Proposal.objects.get(pk=waiting.pk).status == "pending"
    assert not Note.objects.exists()


def test_another_persons_proposals_and_toggle_are_not_found(lens_client: Client, waiting: Proposal) -> None:
    stranger = make_tenant()
    bob = PersonFactory.create(team=stranger.team, external_id="bob")
    theirs = propose(
        team=stranger.team, person=bob, agent=stranger.agent, actor=Actor.for_agent(stranger.agent),
        operation="remember", key="pet", description="Pet", content="A cat.",
    )  # fmt: skip
    assert lens_client.post(f"/lens/proposals/{theirs.pk}/keep").status_code == 404
    assert lens_client.post(f"/lens/proposals/{theirs.pk}/reject").status_code == 404
    assert lens_client.post(f"/lens/people/{bob.pk}/review", {"review": "on"}).status_code == 404
    assert lens_client.post(f"/lens/people/{waiting.person_id}/review", {"review": "maybe"}).status_code == 404
    assert Proposal.objects.get(pk=theirs.pk).status == "pending"
    assert Person.objects.get(pk=bob.pk).review_writes is False


def test_the_panel_and_the_api_list_read_in_a_fixed_number_of_queries(
    tenant: Tenant, person: Person, lens_client: Client, waiting: Proposal
) -> None:
    admin = APIClient()
    admin.credentials(HTTP_AUTHORIZATION=f"Bearer {issue_api_key(agent=tenant.agent, can_admin=True).plaintext}")

    def counted() -> tuple[int, int]:
        with CaptureQueriesContext(connection) as lens:
            assert lens_client.get("/lens/").status_code == 200
        with CaptureQueriesContext(connection) as api:
            assert admin.get("/api/v1/proposals", {"person": "ada"}).status_code == 200
        return len(lens), len(api)

    counted()  # the key is looked up once, then kept (accounts.keycache)
    before = counted()
    conversation = start_conversation(team=tenant.team, agent=tenant.agent, person=person)
    said = chat(conversation, [("I like figs.", "Noted."), ("And plums.", "Noted.")])
    for n, message in enumerate(said[::2]):
        propose(
            team=tenant.team, person=person, agent=tenant.agent, actor=Actor.for_agent(tenant.agent),
            operation="remember", key=f"fruit-{n}", description="Fruit", content="Figs and plums.",
            source_messages=[message.pk],
        )  # fmt: skip
    assert counted() == before
