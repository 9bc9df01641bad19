"""The lens mutes one note, categorised or not, for one agent or every agent, on the note's page,
and says what that does: which agent is not given what, that nothing is deleted and Unmute gives
it all back."""

from __future__ import annotations

import pytest

from memory.models import Mute
from memory.queries import build_digest
from memory.services import remember
from tests.support.factories import AgentFactory, PersonFactory, note_fields, written
from tests.support.fixtures import HTMX

pytestmark = pytest.mark.django_db

SAYS = (
    "is not given this note, the messages it was learned from, or conversation summaries built from those "
    "messages: not in its turns, recall, search or conversation search. Nothing is deleted; you still see "
    "everything here, and Unmute gives it all back."
)


def home_of(tenant, person, actor):
    fields = note_fields(key="home-city", description="Where Ada lives", content="Ada lives in Oslo.")
    return written(remember(team=tenant.team, person=person, actor=actor, **fields))


def digest_keys(tenant, person, agent):
    return [entry.key for entry in build_digest(team=tenant.team, person=person, agent=agent).entries]


def test_a_note_page_mutes_an_uncategorised_note_for_one_agent_and_says_what_that_does(
    lens_client, tenant, person, actor
):
    note = home_of(tenant, person, actor)
    assert note.category == ""
    coach = AgentFactory.create(team=tenant.team, name="Coach")
    page = lens_client.get(f"/m/{note.pk}").content.decode()
    assert "Mute this note for" in page
    assert f"That agent {SAYS}" in page
    assert '<option value="every">every agent</option>' in page

    muted = lens_client.post(f"/m/{note.pk}/mute", {"agent": coach.pk}, headers=HTMX)
    html = muted.content.decode()
    assert html.lstrip().startswith('<section id="note-mutes"')
    assert f"Muted this note for Coach. Coach {SAYS}" in html
    assert "Muted for Coach: it is not given this note" in html
    assert digest_keys(tenant, person, coach) == []
    assert digest_keys(tenant, person, tenant.agent) == ["home-city"]

    unmuted = lens_client.post(f"/m/{note.pk}/unmute", {"agent": coach.pk}, follow=True)
    assert unmuted.status_code == 200
    assert any("Unmuted this note for Coach" in str(m) for m in unmuted.context["messages"])
    assert digest_keys(tenant, person, coach) == ["home-city"]
    assert not Mute.objects.exists()


def test_every_agent_mutes_the_note_for_each_agent_of_the_team(lens_client, tenant, person, actor):
    note = home_of(tenant, person, actor)
    coach = AgentFactory.create(team=tenant.team)
    response = lens_client.post(f"/m/{note.pk}/mute", {"agent": "every"})
    assert response.status_code == 302
    assert sorted(Mute.objects.values_list("agent_id", flat=True)) == sorted([tenant.agent.pk, coach.pk])
    assert digest_keys(tenant, person, coach) == digest_keys(tenant, person, tenant.agent) == []
    page = lens_client.get(f"/m/{note.pk}").content.decode()
    assert "Muted for every agent." in page


def test_a_note_mute_refuses_an_agent_of_another_team_and_a_note_about_someone_else(
    lens_client, tenant, person, actor, other_tenant
):
    note = home_of(tenant, person, actor)
    assert lens_client.post(f"/m/{note.pk}/mute", {"agent": other_tenant.agent.pk}).status_code == 404
    assert lens_client.post(f"/m/{note.pk}/mute", {"agent": "x"}).status_code == 404
    grace = PersonFactory.create(team=tenant.team, external_id="grace")
    hers = written(remember(team=tenant.team, person=grace, actor=actor, **note_fields(key="pet", content="A cat.")))
    assert lens_client.post(f"/m/{hers.pk}/mute", {"agent": tenant.agent.pk}).status_code == 404
    assert not Mute.objects.exists()
