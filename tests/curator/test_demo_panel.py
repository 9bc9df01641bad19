"""The demo's panel: notices that stay until the next change, a word when nothing is kept, corrections
and deletes, and a signed-in login's demo memory that is its own and shows in its lens, with the
demo's turns in what agents looked up about them."""

from __future__ import annotations

import pytest
from django.test import Client

from accounts.demo import DEMO_AGENT, DEMO_OWNER, ensure_demo
from accounts.models import Person
from conversations.models import Turn
from memory.models import Note, Read, Revision
from tests.support.fixtures import HTMX

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("demo_on")]


def say(client, text: str) -> str:
    response = client.post("/demo/say", {"message": text}, headers=HTMX)
    assert response.status_code == 200
    return response.content.decode()


def test_notices_stay_until_the_next_change_and_nothing_kept_is_said(client):
    first = say(client, "Hi, I'm Ada and I live in Oslo.")
    assert "Now knows <strong>name</strong>: “Their name is Ada.”" in first
    assert "Nothing to keep from that." not in first
    assert '<div id="announcements" hx-swap-oob="innerHTML">' in first  # announced once

    page = client.get("/demo/").content.decode()  # a reload keeps the last change on screen
    assert "The last change:" in page
    assert "Now knows <strong>name</strong>" in page

    nothing = say(client, "Hmm.")
    assert '<p class="nothing-kept">Nothing to keep from that.</p>' in nothing
    assert "Now knows <strong>name</strong>" in nothing  # still the last change

    moved = say(client, "I moved to Bergen.")
    assert "Corrected <strong>home-city</strong>" in moved
    assert "Now knows <strong>name</strong>" not in moved  # replaced by the newer change


def test_the_panel_corrects_and_deletes_a_fact(client):
    say(client, "Hi, I'm Ada and I live in Oslo.")
    home = Note.objects.get(key="home-city")
    corrected = client.post(f"/demo/fact/{home.pk}/correct", {"content": "Lives in Tromsø."}, headers=HTMX)
    assert corrected.status_code == 200
    assert "Corrected <strong>home-city</strong>: “Lives in Oslo.” → “Lives in Tromsø.”" in corrected.content.decode()
    home.refresh_from_db()
    assert home.content == "Lives in Tromsø."
    assert Revision.objects.filter(note_id=home.pk, action="update", actor="owner").exists()

    deleted = client.post(f"/demo/fact/{home.pk}/delete", headers=HTMX).content.decode()
    assert "Deleted <strong>a fact</strong>: what it said is erased, and so are the messages it was learned from." in (
        deleted
    )
    # As in the lens, the message it was learned from goes with it (the name note learned from it stays).
    assert "I live in Oslo" not in deleted
    assert "Message erased." in deleted.split('class="transcript"')[1]
    assert "home-city" not in deleted.split('class="known"')[0]  # the notice names no key
    assert not Note.objects.filter(pk=home.pk).exists()
    assert "Tromsø" not in deleted  # erased, also from the notices of the earlier correction
    assert 'id="known-count">1</span>' in deleted


def test_a_visitor_cannot_correct_or_delete_someone_elses_fact(client):
    say(client, "Hi, I'm Ada and I live in Oslo.")
    home = Note.objects.get(key="home-city")
    other = Client()
    assert other.post(f"/demo/fact/{home.pk}/delete", headers=HTMX).status_code == 404  # said nothing yet
    say(other, "Hi, I'm Grace.")
    answer = other.post(f"/demo/fact/{home.pk}/delete", headers=HTMX).content.decode()
    assert "That fact is gone already" in answer
    assert Note.objects.filter(pk=home.pk).exists()


def test_a_signed_in_owners_demo_memory_is_theirs_and_shows_in_their_lens(client):
    credentials = ensure_demo()
    assert client.login(username=credentials.username, password=credentials.password)
    panel = say(client, "Hi, I'm Ada and I live in Oslo.")
    assert "See all of it in your Memory lens" in panel
    owner = Person.objects.get(team=credentials.team, external_id=DEMO_OWNER)
    home = Note.objects.get(key="home-city")
    assert home.bank.person_id == owner.pk
    assert not Person.objects.filter(external_id__startswith="demo-").exists()
    lens = client.get("/lens/").content.decode()
    assert "Lives in Oslo." in lens
    assert f'href="/m/{home.pk}"' in lens


def test_a_signed_in_login_without_a_demo_person_gets_one_linked_to_it(client, django_user_model):
    user = django_user_model.objects.create_user("grace", password="x-y-z-w")
    client.force_login(user)
    assert client.get("/demo/").status_code == 200
    assert not Person.objects.filter(user=user).exists()  # looking stores nothing
    say(client, "Hi, I'm Grace.")
    person = Person.objects.get(user=user)
    assert person.external_id == "login-grace"
    assert "Their name is Grace." in client.get("/lens/").content.decode()


def test_the_demos_turns_are_in_the_read_audit_and_in_what_agents_looked_up(client):
    credentials = ensure_demo()
    assert client.login(username=credentials.username, password=credentials.password)
    say(client, "Hi, I'm Ada and I live in Oslo.")
    say(client, "Where do I live?")

    owner = Person.objects.get(team=credentials.team, external_id=DEMO_OWNER)
    home = Note.objects.get(key="home-city", bank__person=owner)
    reads = list(Read.objects.filter(team=credentials.team, person=owner).order_by("created_at", "id"))
    assert [(read.tool, read.agent.slug) for read in reads] == [("turn", DEMO_AGENT)] * 2
    asked = Turn.objects.get(pk=reads[1].turn_id)
    assert asked.message.content == "Where do I live?"
    assert (asked.profile, reads[1].query) == ("memory_only", "")  # a turn keeps its id, not the message
    assert home.pk in reads[1].notes
    page = client.get("/lens/reads/").content.decode()
    assert page.count("was given memories for a turn") == 2
    assert f'href="/m/{home.pk}"' in page
