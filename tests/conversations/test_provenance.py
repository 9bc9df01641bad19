"""Provenance: every note knows the messages (or turn) it came from.

The curator cites the messages of its pass (validated against the pass; all of them when it cites
none); the rules provider cites the message each fact came from; a tool write may name the calling
agent's own messages with the person and the turn it is written during, and nothing else.
"""

from __future__ import annotations

import pytest

from accounts.services import get_or_create_person
from conversations.models import NoteSource
from conversations.provenance import source_messages
from conversations.services import record_message, start_conversation, take_turn
from curator.providers import RulesProvider, ScriptedProvider
from curator.schemas import CuratorPlan
from curator.services import curate_conversation
from memory.models import Note, Revision
from memory.tools import REGISTRY
from tests.support.factories import chat
from tests.support.fixtures import make_tenant


def remember_plan(*sources: int) -> CuratorPlan:
    return CuratorPlan.model_validate(
        {"operations": [{"op": "remember", "key": "home-city", "description": "Home", "content": "Oslo",
                         "sources": list(sources)}]}
    )  # fmt: skip


def test_the_rules_provider_cites_the_message_each_fact_came_from(tenant, person, conversation):
    said = chat(
        conversation,
        [("I like tea.", "Noted."), ("I just moved to Cnrytown. I really love cnrycake pastries.", "Lovely!")],
    )
    curate_conversation(conversation_id=conversation.pk, provider=RulesProvider())

    notes = {note.key: note for note in Note.objects.filter(team=tenant.team)}
    assert set(notes) == {"preference-tea", "home-city", "preference-cnrycake-pastries"}
    assert source_messages(notes["preference-tea"]) == [said[0]]
    assert source_messages(notes["home-city"]) == [said[2]]
    assert source_messages(notes["preference-cnrycake-pastries"]) == [said[2]]


def test_a_provider_citing_messages_outside_its_pass_is_held_to_the_pass(tenant, person, conversation):
    earlier = record_message(conversation=conversation, role="user", content="I live in Bergen.")
    curate_conversation(conversation_id=conversation.pk, provider=ScriptedProvider())
    said = chat(conversation, [("I moved to Oslo.", "Nice.")])
    other = start_conversation(team=tenant.team, agent=tenant.agent, person=person)
    elsewhere = record_message(conversation=other, role="user", content="Unrelated.")

    provider = ScriptedProvider(curations=[remember_plan(said[0].pk, earlier.pk, elsewhere.pk, 999_999)])
    curate_conversation(conversation_id=conversation.pk, provider=provider)

    assert source_messages(Note.objects.get(key="home-city")) == [said[0]]


def test_a_provider_citing_nothing_valid_falls_back_to_every_message_of_the_pass(tenant, person, conversation):
    said = chat(conversation, [("I moved to Oslo.", "Nice.")])
    curate_conversation(conversation_id=conversation.pk, provider=ScriptedProvider(curations=[remember_plan(999)]))
    assert source_messages(Note.objects.get(key="home-city")) == said


def test_the_curator_prompt_gives_each_message_its_id(tenant, person, conversation):
    said = chat(conversation, [("I moved to Oslo.", "Nice.")])
    provider = ScriptedProvider()
    curate_conversation(conversation_id=conversation.pk, provider=provider)
    request = provider.seen[0]
    assert [line.id for line in request.messages] == [m.pk for m in said]
    from curator.providers import curate_prompt

    assert f'"id":{said[0].pk}' in curate_prompt(request).replace(" ", "")


def call(tenant, name, **args):
    args.setdefault("person", "ada")
    return tenant.client.post(f"/api/v1/tools/{name}", args, format="json")


def test_a_tool_write_records_the_messages_and_turn_it_names(tenant, person, conversation):
    said = chat(conversation, [("I moved to Oslo.", "Nice.")])
    turn = take_turn(team=tenant.team, agent=tenant.agent, person=person, message="Also, I love tea.").turn
    response = call(
        tenant, "remember", key="home-city", description="Home", content="Lives in Oslo.",
        source_messages=[said[0].pk], turn=turn.pk,
    )  # fmt: skip
    assert response.status_code == 200, response.content
    note = Note.objects.get(pk=response.json()["id"])
    assert source_messages(note) == [said[0]]
    assert NoteSource.objects.filter(note=note, turn=turn).exists()

    appended = call(tenant, "remember_about_user", observation="Likes tea", category="preferences",
                    source_messages=[turn.message_id])  # fmt: skip
    assert appended.status_code == 200, appended.content
    assert [m.pk for m in source_messages(Note.objects.get(pk=appended.json()["id"]))] == [turn.message_id]


@pytest.mark.parametrize("whose", ["another agent's", "another person's", "unknown"])
def test_a_tool_write_naming_a_message_not_its_own_is_refused_and_logged(tenant, person, conversation, whose):
    mine = record_message(conversation=conversation, role="user", content="I moved to Oslo.")
    if whose == "another agent's":
        other = make_tenant()
        other.agent.team = tenant.team  # a second agent of the same team
        other.agent.slug = "other-agent"
        other.agent.save()
        foreign = start_conversation(team=tenant.team, agent=other.agent, person=person)
        message_id = record_message(conversation=foreign, role="user", content="Hi").pk
    elif whose == "another person's":
        bob = get_or_create_person(team=tenant.team, external_id="bob")
        foreign = start_conversation(team=tenant.team, agent=tenant.agent, person=bob)
        message_id = record_message(conversation=foreign, role="user", content="Hi").pk
    else:
        message_id = 987_654

    response = call(
        tenant, "remember", key="home-city", description="Home", content="Lives in Oslo.",
        source_messages=[mine.pk, message_id],
    )  # fmt: skip

    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "unknown_source"
    assert error["field"] == "source_messages[1]"
    assert str(message_id) in error["message"]
    assert not Note.objects.exists()
    assert Revision.objects.filter(action=Revision.Action.REFUSED).count() == 1


def test_a_tool_write_naming_a_turn_not_its_own_is_refused(tenant, person):
    response = call(tenant, "remember", key="home-city", description="Home", content="Oslo", turn=123_456)
    assert response.status_code == 422
    assert response.json()["error"]["field"] == "turn"


def test_the_tool_schemas_offer_source_messages_and_turn():
    for name in ("remember", "remember_about_user", "remember_about_project", "edit_note"):
        properties = REGISTRY[name].json_schema()["parameters"]["properties"]
        assert "source_messages" in properties
        assert "turn" in properties
    assert "source_messages" not in REGISTRY["forget_memory"].json_schema()["parameters"]["properties"]
