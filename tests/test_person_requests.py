"""Whole-person requests: one service exports and one erases everything held about a person in a team
(their banks, what shared banks say of them, revisions, mutes, conversations with messages,
summaries and turns). After an erasure, a unique canary is nowhere: not in a later turn, a tool, an
export, the revision log, nor any column of any table. Another person's and another team's data stay."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from uuid import uuid4

import pytest
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from accounts.models import Person
from accounts.services import issue_api_key
from conversations.models import Conversation, Message, Turn
from conversations.services import start_conversation, update_summary
from memory.exceptions import TooLong
from memory.models import Bank, Mute, Note, Revision
from memory.packages import export_person, import_package
from memory.services import Actor, append_observation, edit_note, erase_person, mute_category, remember
from tests.support.canary import find_text, probing
from tests.support.factories import AgentFactory, PersonFactory, chat, note_fields
from tests.support.fixtures import Tenant, make_tenant

pytestmark = pytest.mark.django_db


def new_canary() -> str:
    return f"cnry{uuid4().hex[:10]}"


@dataclass
class World:
    tenant: Tenant
    ada: Person
    bob: Person
    other: Tenant
    canary: str
    actor: Actor
    conversation: Conversation


def build_world(tenant: Tenant, canary: str) -> World:
    """Ada said the canary everywhere Mnemo keeps things; Bob and another team's Ada did not."""
    team, agent = tenant.team, tenant.agent
    ada = PersonFactory.create(team=team, external_id="ada", display_name=f"Ada {canary}")
    bob = PersonFactory.create(team=team, external_id="bob", display_name="Bob")
    actor = Actor(Revision.Actor.AGENT, agent.slug, "req-1")
    remember(team=team, person=ada, actor=actor, **note_fields(
        key=f"preference-{canary}-pastries", description=f"Loves {canary}", content=f"Ada loves {canary} pastries.",
    ))  # fmt: skip
    remember(team=team, person=ada, actor=actor, scope="project:apollo", **note_fields(content=f"In {canary}town"))
    append_observation(team=team, person=ada, actor=actor, category="food", observation=f"Eats {canary} daily.")
    with pytest.raises(TooLong):  # a refused write keeps what was attempted
        remember(team=team, person=ada, actor=actor, **note_fields(key="essay", content=f"{canary} " * 500))
    # Shared banks: a note only Ada was the subject of, and one Bob's observations share.
    append_observation(
        team=team, person=ada, actor=actor, category="team-lore", observation=f"Ada brought {canary} cake.",
        summary=f"{canary} lore", bank="shared", scope="project:apollo",
    )  # fmt: skip
    append_observation(
        team=team, person=bob, actor=actor, category="standup", observation="Bob runs the standup.",
        bank="shared", scope="project:apollo",
    )  # fmt: skip
    append_observation(
        team=team, person=ada, actor=actor, category="standup", observation=f"Ada skips it for {canary}.",
        bank="shared", scope="project:apollo",
    )  # fmt: skip
    append_observation(
        team=team, person=bob, actor=actor, category="standup", observation="Bob moved it to ten.",
        bank="shared", scope="project:apollo",
    )  # fmt: skip
    remember(team=team, person=bob, actor=actor, **note_fields(content="Bob lives in Paris."))
    mute_category(person=ada, agent=agent, category="health")
    conversation = start_conversation(team=team, agent=agent, person=ada)
    chat(conversation, [(f"I just moved to {canary}town.", "Welcome!"), ("I love pastries.", f"{canary} ones?")])
    update_summary(conversation=conversation, summary=f"Lives in {canary}town.", through_order=4)
    bob_conversation = start_conversation(team=team, agent=agent, person=bob)
    chat(bob_conversation, [("Hello from Paris.", "Bonjour!")])
    other = make_tenant()
    other_ada = PersonFactory.create(team=other.team, external_id="ada")
    other_actor = Actor(Revision.Actor.AGENT, other.agent.slug)
    remember(team=other.team, person=other_ada, actor=other_actor, **note_fields(content=f"Other {canary}"))
    chat(start_conversation(team=other.team, agent=other.agent, person=other_ada), [(f"Other {canary}", "Ok")])
    return World(tenant, ada, bob, other, canary, actor, conversation)


def texts(response: Any) -> str:
    assert response.status_code in (200, 201), response.content
    return json.dumps(response.json())


def test_erasing_a_person_leaves_their_canary_nowhere_and_others_untouched(tenant: Tenant) -> None:
    world = build_world(tenant, new_canary())
    canary, team = world.canary, tenant.team
    bob_before = export_person(team=team, person=world.bob)
    other_notes = list(Note.objects.filter(team=world.other.team).values_list("content", flat=True))

    report = erase_person(team=team, person=world.ada, actor=Actor(Revision.Actor.ADMIN, "test"))

    counts = report.as_dict()["erased"]
    assert counts["notes"] == 4  # private, project-private, global food, the shared lore note
    assert counts["shared_notes_redacted"] == 1  # the standup note Bob wrote to as well
    assert counts["conversations"] == 1
    assert counts["messages"] == 4
    assert counts["mutes"] == 1
    assert counts["revisions"] >= 6
    # Only the other team still holds the canary.
    assert {(s.table, s.column) for s in find_text(canary)} == {
        ("memory_note", "content"), ("memory_revision", "after"), ("conversations_message", "content"),
    }  # fmt: skip
    assert all(canary not in text for text in Note.objects.filter(team=team).values_list("content", flat=True))
    assert list(Note.objects.filter(team=world.other.team).values_list("content", flat=True)) == other_notes
    Note.objects.filter(team=world.other.team).delete()
    Revision.objects.filter(team=world.other.team).delete()
    Conversation.objects.filter(team=world.other.team).delete()
    assert find_text(canary) == []

    # Bob is untouched, his standup lines too; the events of Ada's log stay, blank.
    standup = Note.objects.get(team=team, key="standup")
    assert standup.content == "Bob runs the standup.\nBob moved it to ten."
    bob_after = export_person(team=team, person=world.bob)
    for package in (bob_before, bob_after):
        package.pop("exported_at")
    assert bob_after["conversations"] == bob_before["conversations"]
    assert [b["notes"] for b in bob_after["banks"] if b["kind"] != "shared"] == [
        b["notes"] for b in bob_before["banks"] if b["kind"] != "shared"
    ]
    ada = Person.objects.get(pk=world.ada.pk)
    assert ada.erased_at is not None
    assert ada.display_name == ""
    assert not Bank.objects.filter(person=ada).exists()
    assert not Mute.objects.filter(person=ada).exists()
    events = Revision.objects.filter(team=team, person=ada)
    assert events.filter(action="delete").count() == 3  # their own notes; the shared note's is the bank's
    assert all(r.before is None and r.after is None and r.erased for r in events)
    assert not Turn.objects.filter(conversation__person=ada).exists()


def test_after_erasure_no_turn_tool_export_or_revision_carries_the_canary(tenant: Tenant) -> None:
    world = build_world(tenant, new_canary())
    canary = world.canary
    erase_person(team=tenant.team, person=world.ada, actor=Actor(Revision.Actor.ADMIN, "test"))
    client = tenant.client
    turn = client.post(
        "/api/v1/turns", {"person": "ada", "message": "Where do I live and which pastries do I love?"}, format="json"
    )
    assert canary not in json.dumps([b for b in turn.json()["blocks"] if b["layer"] != "persona"])
    assert canary not in json.dumps(turn.json()["messages"])
    with probing():  # the probe's queries hold the canary; they leave no audit row
        for tool, args in [
            ("search_conversation", {"query": f"{canary}town pastries"}),
            ("recent_messages", {}),
            ("recall_memories", {"query": f"{canary} pastries"}),
            ("search", {"query": f"{canary} pastries"}),
            ("recall", {"query": f"{canary} pastries"}),
        ]:
            body = texts(client.post(f"/api/v1/tools/{tool}", {"person": "ada", **args}, format="json"))
            assert canary not in body, tool
    assert canary not in texts(client.get("/api/v1/exports", {"person": "ada"}))
    assert canary not in texts(client.get("/api/v1/revisions", {"person": "ada"}))
    assert canary not in texts(client.get("/api/v1/revisions"))
    assert canary not in texts(client.get("/api/v1/notes"))


def comparable(package: dict[str, Any]) -> dict[str, Any]:
    """What a round trip must keep: notes and conversations, not ids, times of writing or the log."""
    informational_note = {"id", "source", "repetitions", "created_at", "updated_at"}
    return {
        "person": package["person"]["id"],
        "banks": [
            {**{k: v for k, v in bank.items() if k != "notes"},
             "notes": [{k: v for k, v in note.items() if k not in informational_note} for note in bank["notes"]]}
            for bank in package["banks"]
        ],
        "conversations": [
            {k: v for k, v in conversation.items() if k not in {"turns", "ended_at"}}
            for conversation in package["conversations"]
        ],
    }  # fmt: skip


def test_an_exported_person_imports_into_a_fresh_team_and_exports_again_to_the_same_content(tenant: Tenant) -> None:
    world = build_world(tenant, new_canary())
    package = export_person(team=tenant.team, person=world.ada)
    assert package["version"] == 2
    assert {bank["id"] for bank in package["banks"]} == {
        "user:ada", "user:ada:project:apollo", "scope:project:apollo",
    }  # fmt: skip
    shared = next(bank for bank in package["banks"] if bank["kind"] == "shared")
    assert shared["about"] == "ada"
    assert {note["key"] for note in shared["notes"]} == {"team-lore", "standup"}
    assert package["conversations"][0]["messages"][0]["content"] == f"I just moved to {world.canary}town."
    assert package["conversations"][0]["summary"] == f"Lives in {world.canary}town."

    fresh = make_tenant()
    AgentFactory.create(team=fresh.team, slug=tenant.agent.slug)
    report = import_package(
        team=fresh.team,
        data=json.loads(json.dumps(package)),
        actor=Actor(Revision.Actor.IMPORT, "test"),
        agent=None,
    )
    assert report.refused == 0, report.refusals
    assert report.sections["conversations"]["messages"] == 4
    again = export_person(team=fresh.team, person=Person.objects.get(team=fresh.team, external_id="ada"))
    assert comparable(again) == comparable(package)
    # Importing the same package again adds nothing.
    twice = import_package(
        team=fresh.team, data=json.loads(json.dumps(package)), actor=Actor("import", "test"), agent=None
    )
    assert twice.created == 0
    assert twice.sections["conversations"]["messages"] == 0
    assert Message.objects.filter(team=fresh.team).count() == 4


def test_a_version_1_package_still_imports(tenant: Tenant) -> None:
    package = {
        "format": "mnemo.memory-package", "version": 1,
        "banks": [{"kind": "global", "person": "ada", "notes": [note_fields()]}],
    }  # fmt: skip
    report = import_package(team=tenant.team, data=package, actor=Actor("import", "test"), agent=None)
    assert report.created == 1


def test_erase_person_command_asks_first_and_prints_counts(tenant: Tenant, capsys: Any, monkeypatch: Any) -> None:
    world = build_world(tenant, new_canary())
    monkeypatch.setattr("builtins.input", lambda prompt: "bob")
    with pytest.raises(CommandError, match="Not confirmed"):
        call_command("erase_person", "--team", tenant.team.slug, "--person", "ada")
    assert Note.objects.filter(team=tenant.team, bank__person=world.ada).exists()
    call_command("erase_person", "--team", tenant.team.slug, "--person", "ada", "--yes")
    out = capsys.readouterr().out
    assert "1 conversations" in out
    assert "tombstone" in out
    assert not Note.objects.filter(team=tenant.team, bank__person=world.ada).exists()
    assert {s.table for s in find_text(world.canary)} == {"memory_note", "memory_revision", "conversations_message"}
    assert Note.objects.filter(team=world.other.team).exists()  # another team's Ada is someone else
    call_command("erase_person", "--team", tenant.team.slug, "--person", "bob", "--yes", "--hard")
    assert not Person.objects.filter(pk=world.bob.pk).exists()
    assert Revision.objects.filter(team=tenant.team, bank_ref__startswith=f"user:erased-person-{world.bob.pk}").exists()


def admin_client(tenant: Tenant) -> APIClient:
    key = issue_api_key(agent=tenant.agent, name="admin", can_admin=True)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key.plaintext}")
    return client


def test_the_people_api_erases_with_an_admin_key_only(tenant: Tenant) -> None:
    world = build_world(tenant, new_canary())
    refused = tenant.client.delete("/api/v1/people/ada")
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "permission_denied"
    assert "admin-capable" in refused.json()["error"]["message"]
    assert Note.objects.filter(team=tenant.team, bank__person=world.ada).exists()
    admin = admin_client(tenant)
    assert admin.delete("/api/v1/people/ada", {"hard": "maybe"}, QUERY_STRING="hard=maybe").status_code == 400
    assert admin_client(world.other).delete("/api/v1/people/bob").status_code == 404  # another team's: not found

    erased = admin.delete("/api/v1/people/ada")

    assert erased.status_code == 200
    body = erased.json()
    assert body["person"] == "ada"
    assert body["person_row"] == "tombstone"
    assert body["erased"]["conversations"] == 1
    assert body["erased"]["messages"] == 4
    assert body["erased"]["notes"] == 4
    assert admin.get("/api/v1/people/ada").status_code == 200  # the tombstone
    assert {s.table for s in find_text(world.canary)} == {"memory_note", "memory_revision", "conversations_message"}
    assert world.canary not in texts(admin.get("/api/v1/exports", {"person": "ada"}))

    hard = admin.delete("/api/v1/people/bob?hard=true")
    assert hard.json()["person_row"] == "deleted"
    assert admin.get("/api/v1/people/bob").status_code == 404


def test_an_admin_export_holds_every_agents_conversations_and_an_agents_export_its_own(tenant: Tenant) -> None:
    world = build_world(tenant, new_canary())
    other_agent = AgentFactory.create(team=tenant.team)
    chat(start_conversation(team=tenant.team, agent=other_agent, person=world.ada), [("Hi other.", "Hello.")])
    own = tenant.client.get("/api/v1/exports", {"person": "ada"}).json()
    assert {c["agent"] for c in own["conversations"]} == {tenant.agent.slug}
    everything = admin_client(tenant).get("/api/v1/exports", {"person": "ada"}).json()
    assert {c["agent"] for c in everything["conversations"]} == {tenant.agent.slug, other_agent.slug}
    assert "withheld" not in everything


def test_the_notes_api_erases_with_an_admin_key_and_deletes_otherwise(tenant: Tenant) -> None:
    world = build_world(tenant, new_canary())
    key = f"preference-{world.canary}-pastries"
    note = Note.objects.get(team=tenant.team, key=key)
    with pytest.raises(TooLong):  # a refused edit of that note: its attempted text is in the log
        edit_note(note=note, actor=world.actor, mode="replace", content=f"{world.canary}! " * 300)
    refused = tenant.client.delete(f"/api/v1/notes/{note.pk}?erase=true")
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "permission_denied"
    assert Note.objects.filter(pk=note.pk).exists()

    erased = admin_client(tenant).delete(f"/api/v1/notes/{note.pk}?erase=true")

    assert erased.status_code == 200
    assert erased.json()["action"] == "erased"
    log = texts(tenant.client.get("/api/v1/revisions", {"bank": "user:ada"}))
    assert key not in log
    assert f"erased-{note.pk}" in log
    assert not Revision.objects.filter(team=tenant.team, reason__contains=world.canary + " pastries").exists()
    assert not Revision.objects.filter(team=tenant.team, note_key=key).exists()
    # An ordinary delete stays a logged delete: the log keeps what the note said.
    food = Note.objects.get(team=tenant.team, key="food", bank__person=world.ada)
    deleted = tenant.client.delete(f"/api/v1/notes/{food.pk}")
    assert deleted.json()["action"] == "deleted"
    logged = Revision.objects.get(note_id=food.pk, action="delete").before
    assert logged is not None
    assert logged["content"] == f"Eats {world.canary} daily."


def test_the_admin_action_asks_then_erases_the_selected_people(tenant: Tenant, client: Any) -> None:
    world = build_world(tenant, new_canary())
    client.force_login(get_user_model().objects.create_superuser("root", "root@example.com", "a-long-password-1"))
    chosen = {"action": "erase_selected", ACTION_CHECKBOX_NAME: [world.ada.pk]}
    asked = client.post("/admin/accounts/person/", chosen)
    assert asked.status_code == 200
    assert "Yes, erase everything about them" in asked.content.decode()
    assert Note.objects.filter(team=tenant.team, bank__person=world.ada).exists()

    done = client.post("/admin/accounts/person/", {**chosen, "confirm": "yes"}, follow=True)

    assert done.status_code == 200
    assert any("1 conversations" in str(m) for m in done.context["messages"])
    assert not Note.objects.filter(team=tenant.team, bank__person=world.ada).exists()
    assert Person.objects.get(pk=world.ada.pk).erased_at is not None
    assert Note.objects.filter(team=tenant.team, bank__person=world.bob).exists()


def test_the_lens_erases_only_the_logins_own_people_after_the_typed_phrase(
    tenant: Tenant, client: Any, django_user_model: Any
) -> None:
    world = build_world(tenant, new_canary())
    ada_login = django_user_model.objects.create_user("ada-login", password="a-long-password-1")
    Person.objects.filter(pk=world.ada.pk).update(user=ada_login)
    bob_login = django_user_model.objects.create_user("bob-login", password="a-long-password-1")
    Person.objects.filter(pk=world.bob.pk).update(user=bob_login)
    url = f"/lens/people/{world.ada.pk}/erase"
    client.force_login(bob_login)
    assert client.get(url).status_code == 404
    assert client.post(url, {"confirmation": "delete everything"}).status_code == 404
    client.force_login(ada_login)
    assert "Delete everything about me" in client.get("/lens/").content.decode()
    wrong = client.post(url, {"confirmation": "yes"})
    assert wrong.status_code == 422
    assert "nothing was deleted" in wrong.content.decode()
    assert Note.objects.filter(team=tenant.team, bank__person=world.ada).exists()

    done = client.post(url, {"confirmation": "Delete everything"})

    assert done.status_code == 302
    assert not Note.objects.filter(team=tenant.team, bank__person=world.ada).exists()
    assert Note.objects.filter(team=tenant.team, bank__person=world.bob).exists()
    assert world.canary not in client.get("/lens/").content.decode()


def test_an_erased_message_in_a_package_is_not_imported_and_the_rest_is(tenant: Tenant) -> None:
    message = {"role": "user", "content": "Hello.", "created_at": "2026-11-01T10:00:00+00:00", "external_id": "m1"}
    tombstone = {"role": "assistant", "content": "", "created_at": "2026-11-01T10:01:00+00:00", "external_id": "m2",
                 "erased": True}  # fmt: skip
    package = {
        "format": "mnemo.memory-package", "version": 2, "banks": [],
        "conversations": [
            {"agent": tenant.agent.slug, "person": "ada", "external_id": "c1", "messages": [message, tombstone]},
            {"agent": tenant.agent.slug, "person": "ada", "external_id": "c2", "messages": [tombstone]},
        ],
    }  # fmt: skip
    report = import_package(team=tenant.team, data=package, actor=Actor("import", "test"), agent=None)
    assert report.sections["conversations"]["messages"] == 1
    assert list(Message.objects.filter(team=tenant.team).values_list("content", flat=True)) == ["Hello."]
    assert Conversation.objects.filter(team=tenant.team).count() == 1
