"""A mute reaches what was derived: muting a category, or one uncategorised note, for an agent
withholds from that agent the notes, the messages they were learned from and the summary built
from those messages, in its turns and every read tool. Another agent still sees it all; nothing is
deleted, and unmuting gives it all back."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from uuid import uuid4

import pytest
from rest_framework.test import APIClient

from accounts.models import Agent, Person
from accounts.services import issue_api_key
from conversations.models import Conversation, Message
from conversations.mutes import muted_messages
from conversations.services import start_conversation
from curator.providers import RulesProvider
from curator.services import curate_conversation
from memory.models import Mute, Note
from tests.support.canary import probing
from tests.support.factories import AgentFactory, PersonFactory, chat
from tests.support.fixtures import Tenant

pytestmark = pytest.mark.django_db

PROBES = ("search_conversation", "recent_messages", "recall_memories", "search", "recall")


@dataclass
class Said:
    canary: str  # lower case: every check reads the text lowered
    note: Note  # learned from the canary's message
    source: Message
    conversation: Conversation


def say_the_canary(tenant: Tenant, person: Person, *, categorised: bool) -> Said:
    """Ada says three things; the curator learns a note from each and builds the summary from them.
    The second message, its note and the summary hold the canary: a liking (category "preferences")
    or where she lives (no category)."""
    canary = f"cnry{uuid4().hex[:10]}"
    said = f"I really love {canary} pastries." if categorised else f"I live in {canary.capitalize()}."
    conversation = start_conversation(team=tenant.team, agent=tenant.agent, person=person)
    messages = chat(conversation, [("I'm vegetarian.", "Noted."), (said, "Lovely!"), ("I like tea.", "Good.")])
    curate_conversation(conversation_id=conversation.pk, provider=RulesProvider())
    note = Note.objects.get(team=tenant.team, content__icontains=canary)
    assert note.category == ("preferences" if categorised else "")
    conversation.refresh_from_db()
    assert canary in conversation.summary.lower()
    return Said(canary, note, messages[2], conversation)


def client_of(agent: Agent, *, can_admin: bool = False) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {issue_api_key(agent=agent, can_admin=can_admin).plaintext}")
    return client


def text_of(response: Any) -> str:
    assert response.status_code in (200, 201), response.content
    return json.dumps(response.json(), ensure_ascii=False).lower()


def turn(client: APIClient, said: Said) -> dict[str, Any]:
    response = client.post(
        "/api/v1/turns",
        {"person": "ada", "conversation": said.conversation.pk, "message": "What do I love, and where do I live?"},
        format="json",
    )
    assert response.status_code == 201, response.content
    body: dict[str, Any] = response.json()
    return body


def probe(client: APIClient, tool: str, said: Said) -> str:
    args = {} if tool == "recent_messages" else {"query": f"{said.canary} pastries live"}
    with probing():  # the probes' queries hold the canary; they leave no audit row
        return text_of(client.post(f"/api/v1/tools/{tool}", {"person": "ada", **args}, format="json"))


def assert_withheld_from(client: APIClient, said: Said) -> None:
    body = turn(client, said)
    assert "summary" not in {block["layer"] for block in body["blocks"]}
    assert said.canary not in json.dumps(body["blocks"]).lower()
    assert said.canary not in json.dumps(body["messages"]).lower()
    for tool in PROBES:
        assert said.canary not in probe(client, tool, said), tool
    around = client.post(
        "/api/v1/tools/search_conversation", {"person": "ada", "around": said.source.pk}, format="json"
    )
    assert around.status_code == 404  # a withheld message is one this agent does not have


def mute(admin: APIClient, said: Said, agent: Agent, *, by_category: bool) -> int:
    what: dict[str, Any] = {"category": said.note.category} if by_category else {"note": said.note.pk}
    response = admin.post("/api/v1/mutes", {"person": "ada", "agent": agent.slug, **what}, format="json")
    assert response.status_code == 201, response.content
    (created,) = response.json()["mutes"]
    assert (created["category"], created["note"]) == (
        (said.note.category, None) if by_category else (None, said.note.pk)
    )
    return int(created["id"])


@pytest.mark.parametrize("by_category", [True, False], ids=["category", "uncategorised-note"])
def test_a_mute_withholds_the_note_its_messages_and_their_summary_until_unmuted(
    tenant: Tenant, person: Person, by_category: bool
) -> None:
    said = say_the_canary(tenant, person, categorised=by_category)
    agent_client = tenant.client
    coach = AgentFactory.create(team=tenant.team, slug="coach")
    coach_client = client_of(coach)
    admin = client_of(tenant.agent, can_admin=True)
    before = turn(agent_client, said)
    assert "summary" in {block["layer"] for block in before["blocks"]}
    assert said.canary in json.dumps(before).lower()

    # Muted for the coach only: this agent still has everything.
    coach_mute = mute(admin, said, coach, by_category=by_category)
    assert said.canary not in probe(coach_client, "recall_memories", said)
    assert said.canary in probe(agent_client, "search_conversation", said)
    assert said.canary in probe(agent_client, "recall_memories", said)
    assert admin.delete(f"/api/v1/mutes/{coach_mute}").status_code == 204

    mute_id = mute(admin, said, tenant.agent, by_category=by_category)
    assert_withheld_from(agent_client, said)
    for tool in ("recall_memories", "search", "recall"):  # the unmuted agent still sees the note
        assert said.canary in probe(coach_client, tool, said), tool
    # Nothing was deleted.
    assert Note.objects.filter(pk=said.note.pk).exists()
    assert Message.objects.get(pk=said.source.pk).content == said.source.content
    assert said.canary in Conversation.objects.get(pk=said.conversation.pk).summary.lower()

    assert admin.delete(f"/api/v1/mutes/{mute_id}").status_code == 204
    assert said.canary in probe(agent_client, "search_conversation", said)
    assert said.canary in probe(agent_client, "recent_messages", said)
    assert said.canary in probe(agent_client, "recall_memories", said)
    again = turn(agent_client, said)
    assert "summary" in {block["layer"] for block in again["blocks"]}
    assert said.canary in json.dumps(again["blocks"]).lower()


def test_muted_messages_are_this_pairs_sources_of_notes_muted_for_this_agent(tenant: Tenant, person: Person) -> None:
    said = say_the_canary(tenant, person, categorised=True)
    coach = AgentFactory.create(team=tenant.team)
    assert muted_messages(agent=tenant.agent, person=person).ids == frozenset()
    Mute.objects.create(team=tenant.team, person=person, agent=coach, note=said.note)
    assert muted_messages(agent=tenant.agent, person=person).ids == frozenset()  # another agent's mute
    Mute.objects.create(team=tenant.team, person=person, agent=tenant.agent, category="preferences")
    muted = muted_messages(agent=tenant.agent, person=person)
    tea = Message.objects.get(conversation=said.conversation, content="I like tea.")
    assert muted.ids == {said.source.pk, tea.pk}  # both likings' sources; "I'm vegetarian." is health
    assert muted.withholds_summary(said.conversation)
    someone = PersonFactory.create(team=tenant.team)
    assert muted_messages(agent=tenant.agent, person=someone).ids == frozenset()


def test_a_note_mute_names_a_note_about_the_person_once_per_agent(admin_tenant: Tenant) -> None:
    ada = PersonFactory.create(team=admin_tenant.team, external_id="ada")
    grace = PersonFactory.create(team=admin_tenant.team, external_id="grace")
    said = say_the_canary(admin_tenant, ada, categorised=False)
    client = admin_tenant.client
    created = client.post("/api/v1/mutes", {"person": "ada", "note": said.note.pk}, format="json")
    assert created.status_code == 201
    again = client.post("/api/v1/mutes", {"person": "ada", "note": said.note.pk}, format="json")
    assert [m["id"] for m in again.json()["mutes"]] == [m["id"] for m in created.json()["mutes"]]
    assert Mute.objects.count() == 1
    listed = client.get("/api/v1/mutes", {"person": "ada"}).json()["results"]
    assert [(m["note"], m["category"]) for m in listed] == [(said.note.pk, None)]
    assert grace.pk  # a note about Ada is not one of Grace's to mute
    refused = client.post("/api/v1/mutes", {"person": "grace", "note": said.note.pk}, format="json")
    assert refused.status_code == 404
    assert refused.json()["error"]["code"] == "not_found"
    assert Mute.objects.count() == 1
