"""The lens page "What agents looked up about you": a person sees the reads about them, a team
admin the team's; never another person's or another team's."""

from __future__ import annotations

import pytest
from django.urls import reverse

from accounts.models import Membership
from conversations.services import start_conversation
from memory.models import Read
from memory.services.reads import flush_reads, record_read
from tests.support.factories import AgentFactory, PersonFactory, chat, note_fields, written
from tests.support.fixtures import PASSWORD, make_tenant

pytestmark = pytest.mark.django_db
URL = reverse("lens-reads")


def audit(team, agent, person, tool="search", *, query="", notes=(), messages=(), conversations=()) -> None:
    record_read(
        team=team, agent=agent, person=person, tool=tool, started=0.0, query=query, notes=notes, messages=messages,
        conversations=conversations,
    )  # fmt: skip
    flush_reads()


@pytest.fixture
def reads(tenant, person, actor):
    from memory.services import remember

    home = written(remember(team=tenant.team, person=person, actor=actor, **note_fields(key="home-city")))
    coach = AgentFactory.create(team=tenant.team, name="Coach")
    bob = PersonFactory.create(team=tenant.team, external_id="bob")
    talk = start_conversation(team=tenant.team, agent=coach, person=person)
    said = chat(talk, [("I moved to Oslo", "Welcome")])
    audit(tenant.team, tenant.agent, person, query="where does ada live", notes=[home.pk, 999_999])
    audit(
        tenant.team, coach, person, "search_conversation", query="what did ada say",
        messages=[m.pk for m in said], conversations=[talk.pk, talk.pk],
    )  # fmt: skip
    audit(tenant.team, coach, person, Read.TURN, notes=[home.pk])
    audit(tenant.team, tenant.agent, bob, query="about bob")
    other = make_tenant()
    audit(other.team, other.agent, PersonFactory.create(team=other.team, external_id="ada"), query="other team")
    return home, coach, talk


def test_a_person_sees_the_reads_about_them_newest_first_with_links_to_their_notes(lens_client, reads):
    home, _, talk = reads
    page = lens_client.get(URL)
    assert page.status_code == 200
    html = page.content.decode()
    assert "What agents looked up about you" in html
    assert (
        html.index("Its question was the message it answered")
        < html.index("what did ada say")
        < html.index("where does ada live")
    )  # newest first
    assert "about bob" not in html
    assert "other team" not in html
    assert f'href="{reverse("lens-note", args=[home.pk])}"' in html
    assert "1 not shown" in html  # the note 999999 is not hers to see (or gone)
    conversation_url = reverse("lens-conversation", args=[talk.pk])
    assert f'<a href="{conversation_url}">conversation {talk.pk}</a> (2)' in html
    transcript = lens_client.get(conversation_url).content.decode()
    assert "I moved to Oslo" in transcript
    assert "Conversation with Coach" in transcript


def test_the_page_filters_by_agent(lens_client, reads):
    _, coach, _ = reads
    html = lens_client.get(URL, {"agent": coach.pk}).content.decode()
    assert "what did ada say" in html
    assert "where does ada live" not in html
    assert lens_client.get(URL, {"agent": make_tenant().agent.pk}).status_code == 404  # another team's agent


def test_a_team_admin_sees_the_whole_team_and_each_agent(client, django_user_model, tenant, reads):
    admin = django_user_model.objects.create_user("admin-login", password=PASSWORD)
    Membership.objects.create(team=tenant.team, user=admin, role=Membership.Role.ADMIN)
    client.force_login(admin)
    html = client.get(URL).content.decode()
    assert "about bob" in html
    assert "where does ada live" in html
    assert "other team" not in html
    _, coach, _ = reads
    only_coach = client.get(URL, {"agent": coach.pk}).content.decode()
    assert "what did ada say" in only_coach
    assert "about bob" not in only_coach


def test_an_erased_query_says_so(lens_client, tenant, person, reads, actor):
    from memory.services import erase_note

    home, _, _ = reads
    erase_note(note=home, actor=actor)
    html = lens_client.get(URL).content.decode()
    assert "where does ada live" not in html
    assert "Query removed: it found something that was erased since." in html


def test_the_page_needs_a_login(client):
    assert client.get(URL).status_code == 302


def test_a_conversation_page_shows_only_the_logins_people(lens_client, tenant, person):
    bob = PersonFactory.create(team=tenant.team, external_id="bob")
    own = start_conversation(team=tenant.team, agent=tenant.agent, person=person)
    chat(own, [("Hello from Ada", "Hi Ada")])
    theirs = start_conversation(team=tenant.team, agent=tenant.agent, person=bob)
    chat(theirs, [("Hello from Bob", "Hi Bob")])
    other = make_tenant()
    elsewhere = start_conversation(
        team=other.team, agent=other.agent, person=PersonFactory.create(team=other.team, external_id="ada")
    )
    page = lens_client.get(reverse("lens-conversation", args=[own.pk]))
    assert page.status_code == 200
    assert "Hello from Ada" in page.content.decode()
    assert lens_client.get(reverse("lens-conversation", args=[theirs.pk])).status_code == 404
    assert lens_client.get(reverse("lens-conversation", args=[elsewhere.pk])).status_code == 404
