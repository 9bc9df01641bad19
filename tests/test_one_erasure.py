"""One erasure: every path that erases a note (the API, the lens, the admin action, the command, the
Python client) runs the same service, and takes the messages the note was learned from and the
summaries they fed with it. After each, a unique canary the person said is nowhere: not in the next
turn, not in a read tool, not in any text or JSON column of any table."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from io import StringIO
from typing import Any
from uuid import uuid4

import pytest
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.test import Client
from mnemo_client import Mnemo
from rest_framework.test import APIClient

from accounts.models import Person
from accounts.services import issue_api_key
from conversations.models import Conversation, Message
from conversations.services import start_conversation
from curator.providers import RulesProvider
from curator.services import curate_conversation
from memory.models import Note, Revision
from tests.support.canary import find_text, probing
from tests.support.factories import chat
from tests.support.fixtures import Tenant

pytestmark = pytest.mark.django_db


@dataclass
class Said:
    canary: str
    note: Note  # the note learned from the canary's message
    source: Message  # that message
    conversation: Conversation
    others: list[Note]  # learned from other messages: they stay


def say_the_canary(tenant: Tenant, person: Person) -> Said:
    """Ada says three things; the curator learns a note from each and builds the summary from them.
    Only the second message, its note and the summary hold the canary."""
    canary = f"cnry{uuid4().hex[:10]}"
    conversation = start_conversation(team=tenant.team, agent=tenant.agent, person=person)
    said = chat(
        conversation,
        [("I'm vegetarian.", "Noted."), (f"I really love {canary} pastries.", "Lovely!"), ("I like tea.", "Good.")],
    )
    curate_conversation(conversation_id=conversation.pk, provider=RulesProvider())
    note = Note.objects.select_related("bank").get(team=tenant.team, key=f"preference-{canary}-pastries")
    others = list(Note.objects.filter(team=tenant.team).exclude(pk=note.pk).order_by("key"))
    assert [other.key for other in others] == ["diet", "preference-tea"]
    assert {(s.table, s.column) for s in find_text(canary)} >= {
        ("memory_note", "key"), ("memory_note", "content"), ("memory_revision", "after"),
        ("conversations_message", "content"), ("conversations_conversation", "summary"),
    }  # fmt: skip
    return Said(canary, note, said[2], conversation, others)


def admin_api_key(tenant: Tenant) -> str:
    return issue_api_key(agent=tenant.agent, name="admin", can_admin=True).plaintext


# Each path erases the note and returns the counts it answered with, when it answers with any.
Eraser = Callable[[pytest.FixtureRequest, Tenant, Said], dict[str, Any] | None]


def through_the_api(request: pytest.FixtureRequest, tenant: Tenant, said: Said) -> dict[str, Any]:
    admin = APIClient()
    admin.credentials(HTTP_AUTHORIZATION=f"Bearer {admin_api_key(tenant)}")
    response = admin.delete(f"/api/v1/notes/{said.note.pk}?erase=true")
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["id"], body["bank"], body["action"]) == (said.note.pk, "user:ada", "erased")
    return body["erased"]


def through_the_lens(request: pytest.FixtureRequest, tenant: Tenant, said: Said) -> None:
    lens: Client = request.getfixturevalue("lens_client")
    asked = lens.get(f"/m/{said.note.pk}/delete").content.decode()
    assert "The 1 message it was learned from is erased with it" in asked
    done = lens.post(f"/m/{said.note.pk}/delete", follow=True)
    assert done.status_code == 200
    assert any("and the 1 message it was learned from" in str(m) for m in done.context["messages"])


def through_the_admin(request: pytest.FixtureRequest, tenant: Tenant, said: Said) -> None:
    client: Client = request.getfixturevalue("client")
    client.force_login(get_user_model().objects.create_superuser("root", "root@example.com", "a-long-password-1"))
    chosen = {"action": "erase_selected", ACTION_CHECKBOX_NAME: [said.note.pk]}
    asked = client.post("/admin/memory/note/", chosen)
    assert asked.status_code == 200
    assert "Yes, erase these notes" in asked.content.decode()
    assert said.canary not in asked.content.decode()  # the page names the note by id, not by its key
    assert Note.objects.filter(pk=said.note.pk).exists()
    done = client.post("/admin/memory/note/", {**chosen, "confirm": "yes"}, follow=True)
    assert done.status_code == 200
    (message,) = [str(m) for m in done.context["messages"]]
    assert "erased 1 message it was learned from and cleared 1 conversation summary" in message


def through_the_command(request: pytest.FixtureRequest, tenant: Tenant, said: Said) -> None:
    out = StringIO()
    call_command("erase_note", str(said.note.pk), "--team", tenant.team.slug, "--yes", stdout=out)
    assert f"Erased note {said.note.pk} of bank user:ada in team {tenant.team.slug}" in out.getvalue()
    assert "erased 1 message it was learned from and cleared 1 conversation summary" in out.getvalue()
    assert said.canary not in out.getvalue()


def through_the_client(request: pytest.FixtureRequest, tenant: Tenant, said: Said) -> dict[str, Any]:
    web_server: str = request.getfixturevalue("web_server")
    with Mnemo(web_server, api_key=admin_api_key(tenant)) as admin:
        erased = admin.delete_note(said.note.pk, erase=True)
    assert erased["action"] == "erased"
    return dict(erased["erased"])


PATHS: dict[str, Eraser] = {
    "api": through_the_api,
    "lens": through_the_lens,
    "admin": through_the_admin,
    "command": through_the_command,
    "client": through_the_client,
}
# The client reaches the live server, another process: what the test wrote must be committed.
LIVE = {"client"}


def texts(response: Any) -> str:
    assert response.status_code in (200, 201), response.content
    return json.dumps(response.json())


def assert_the_canary_is_nowhere(tenant: Tenant, said: Said) -> None:
    canary, client = said.canary, tenant.client
    turn = client.post(
        "/api/v1/turns",
        {"person": "ada", "conversation": said.conversation.pk, "message": "Which pastries do I love, and what else?"},
        format="json",
    )
    body = turn.json()
    assert turn.status_code == 201, body
    layers = {block["layer"] for block in body["blocks"]}
    assert "summary" not in layers  # cleared before this turn, whether or not its rebuild ran yet
    assert canary not in json.dumps(body["blocks"])
    assert canary not in json.dumps(body["messages"])
    with probing():  # the probes' queries hold the canary; they leave no audit row
        for tool, args in [
            ("search_conversation", {"query": f"{canary} pastries"}),
            ("recent_messages", {}),
            ("recall_memories", {"query": f"{canary} pastries"}),
            ("search", {"query": f"{canary} pastries"}),
            ("recall", {"query": f"{canary} pastries"}),
        ]:
            assert canary not in texts(client.post(f"/api/v1/tools/{tool}", {"person": "ada", **args}, format="json"))
    assert find_text(canary) == []


def assert_only_the_note_and_its_sources_went(said: Said) -> None:
    assert not Note.objects.filter(pk=said.note.pk).exists()
    assert list(Note.objects.filter(pk__in=[n.pk for n in said.others]).order_by("key")) == said.others
    source = Message.objects.get(pk=said.source.pk)
    assert source.is_erased  # a tombstone: its place and role stay
    assert (source.order, source.role) == (said.source.order, said.source.role)
    assert Message.objects.filter(conversation=said.conversation, erased_at__isnull=False).count() == 1
    conversation = Conversation.objects.get(pk=said.conversation.pk)
    assert conversation.summary_stale or said.canary not in conversation.summary
    events = Revision.objects.filter(note_id=said.note.pk).order_by("id")
    assert list(events.values_list("action", flat=True)) == ["create", "delete"]  # the events stay, blank
    assert all(event.erased and event.before is None and event.after is None for event in events)


@pytest.mark.parametrize(
    "path", [pytest.param(p, marks=[pytest.mark.django_db(transaction=True)] if p in LIVE else []) for p in PATHS]
)
def test_every_path_erases_the_note_its_messages_and_their_summary_and_the_canary_is_nowhere(
    request: pytest.FixtureRequest, tenant: Tenant, person: Person, path: str
) -> None:
    said = say_the_canary(tenant, person)
    # A turn before the erasure: its read of the note is in the audit, and the pair's messages are kept.
    assert said.canary in texts(
        tenant.client.post(
            "/api/v1/turns", {"person": "ada", "conversation": said.conversation.pk, "message": "Hi."}, format="json"
        )
    )

    counts = PATHS[path](request, tenant, said)

    if counts is not None:
        assert counts["messages"] == 1
        assert counts["summaries"] == 1
        assert counts["revisions"] == 2
    assert_only_the_note_and_its_sources_went(said)
    assert_the_canary_is_nowhere(tenant, said)


def test_the_erase_note_command_asks_first_and_finds_the_note_only_in_the_named_team(
    tenant: Tenant, person: Person, admin_tenant: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    said = say_the_canary(tenant, person)
    with pytest.raises(CommandError, match="No note"):
        call_command("erase_note", str(said.note.pk), "--team", admin_tenant.team.slug, "--yes")
    with pytest.raises(CommandError, match="No team"):
        call_command("erase_note", str(said.note.pk), "--team", "no-such-team", "--yes")
    monkeypatch.setattr("builtins.input", lambda prompt: "no")
    with pytest.raises(CommandError, match="Not confirmed"):
        call_command("erase_note", str(said.note.pk), "--team", tenant.team.slug)
    assert Note.objects.filter(pk=said.note.pk).exists()
    monkeypatch.setattr("builtins.input", lambda prompt: str(said.note.pk))
    call_command("erase_note", str(said.note.pk), "--team", tenant.team.slug, stdout=StringIO())
    assert not Note.objects.filter(pk=said.note.pk).exists()
    assert Message.objects.get(pk=said.source.pk).is_erased


def test_a_plain_delete_through_the_api_keeps_the_messages_and_answers_without_counts(
    tenant: Tenant, person: Person
) -> None:
    said = say_the_canary(tenant, person)
    response = tenant.client.delete(f"/api/v1/notes/{said.note.pk}")
    assert response.status_code == 200
    assert "erased" not in response.json()
    assert not Message.objects.get(pk=said.source.pk).is_erased
