"""Review: with it on for a person, what agents and the curator learn about them waits as proposals;
keeping one runs the one write path, not keeping one leaves its words nowhere."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any
from uuid import uuid4

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.models import Person
from accounts.services import issue_api_key
from config.celery import app
from config.mcp import call_tool
from conversations.models import Message, NoteSource
from conversations.services import start_conversation
from curator.providers import RulesProvider, ScriptedProvider
from curator.schemas import AppendDailyOp, CuratorPlan, EditOp
from curator.services import curate_conversation
from memory.models import Bank, Note, Proposal, Revision
from memory.queries import build_digest
from memory.services import (
    Actor,
    erase_person,
    expire_proposals,
    get_or_create_bank,
    latch_full,
    remember,
    set_review_writes,
)
from tests.support.canary import find_text, probing
from tests.support.factories import AgentFactory, PersonFactory, chat, note_fields
from tests.support.fixtures import Tenant, make_tenant

pytestmark = pytest.mark.django_db

EXCHANGES = [
    ("Hi, I'm Ada. I live in Oslo.", "Nice to meet you!"),
    ("I'm allergic to peanuts", "Noted."),
    ("I'm vegetarian.", "Good to know."),
    ("I like tea.", "Lovely."),
]


@pytest.fixture
def ada(admin_tenant: Tenant) -> Person:
    return PersonFactory.create(team=admin_tenant.team, external_id="ada")


@pytest.fixture
def reviewing(admin_tenant: Tenant, ada: Person) -> Person:
    """Ada, who asked (through an admin-capable key) to review what agents keep about her."""
    answer = admin_tenant.client.patch("/api/v1/people/ada", {"review_writes": True}, format="json")
    assert answer.status_code == 200, answer.content
    assert answer.json()["review_writes"] is True
    ada.refresh_from_db()
    return ada


def plain_client(tenant: Tenant) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {issue_api_key(agent=tenant.agent).plaintext}")
    return client


def remember_call(client: APIClient, **fields: object) -> dict[str, Any]:
    answer = client.post(
        "/api/v1/tools/remember",
        {"person": "ada", "key": "favourite-colour", "description": "Favourite colour", "content": "Green.", **fields},
        format="json",
    )
    assert answer.status_code == 202, answer.content
    body: dict[str, Any] = answer.json()
    return body


def found(client: APIClient, query: str) -> str:
    """Everything the read tools answer for this query, as one text."""
    answers = []
    with probing():
        for tool in ("recall_memories", "search", "recall"):
            answer = client.post(f"/api/v1/tools/{tool}", {"person": "ada", "query": query}, format="json")
            assert answer.status_code == 200, answer.content
            answers.append(answer.json())
    return json.dumps(answers)


def test_with_review_on_curated_exchanges_and_a_remember_call_make_proposals_and_no_notes(
    admin_tenant: Tenant, reviewing: Person
) -> None:
    owner = Actor(Revision.Actor.OWNER, "user:ada")  # the person's own words are never reviewed
    remember(team=admin_tenant.team, person=reviewing, actor=owner, **note_fields(key="pet", content="A cat."))
    conversation = start_conversation(team=admin_tenant.team, agent=admin_tenant.agent, person=reviewing)
    said = chat(conversation, EXCHANGES)
    outcome = curate_conversation(conversation_id=conversation.pk, provider=RulesProvider())
    body = remember_call(admin_tenant.client, source_messages=[said[0].pk])

    assert list(Note.objects.values_list("key", flat=True)) == ["pet"]
    assert (body["status"], body["action"], body["id"], body["bank"]) == ("proposed", "proposed", None, "user:ada")
    curated = list(Proposal.objects.filter(actor="curator").order_by("id"))
    assert len(curated) >= 4, outcome
    assert {p.key for p in curated} >= {"name", "home-city", "allergy-peanuts", "diet"}
    person_said = {m.pk: m.content for m in said}
    for proposal in curated:
        assert (proposal.status, proposal.agent, proposal.person) == ("pending", admin_tenant.agent, reviewing)
        assert proposal.source_messages
        assert set(proposal.source_messages) <= set(person_said)
    home = next(p for p in curated if p.key == "home-city")
    assert any("Oslo" in person_said[pk] for pk in home.source_messages)
    tool_proposal = Proposal.objects.get(pk=body["proposal"])
    assert (tool_proposal.actor, tool_proposal.source_messages, tool_proposal.content) == (
        "agent",
        [said[0].pk],
        "Green.",
    )
    assert Revision.objects.filter(action="propose").count() == len(curated) + 1
    assert not Revision.objects.filter(action__in=["create", "append", "update"]).exclude(actor="owner").exists()

    # Nothing proposed is read as a note: not in a turn, the read tools, the digest or an export.
    turn = admin_tenant.client.post(
        "/api/v1/turns", {"person": "ada", "conversation": conversation.pk, "message": "What colour do I like?"},
        format="json",
    )  # fmt: skip
    assert turn.status_code == 201, turn.content
    # The messages themselves are the conversation (passages, windows, the summary); notes are not.
    note_blocks = json.dumps([b for b in turn.json()["blocks"] if b["layer"] == "notes"])
    assert "A cat." in note_blocks  # the notes the turn reads: the kept one only
    for word in ("Green", "favourite-colour", "home-city", "Oslo", "peanuts"):
        assert word not in note_blocks
    assert '"results": []' in found(admin_tenant.client, "favourite colour green")
    assert "Green" not in found(admin_tenant.client, "favourite colour green")
    assert "Oslo" not in found(admin_tenant.client, "where does Ada live Oslo")
    digest = build_digest(team=admin_tenant.team, person=reviewing, agent=admin_tenant.agent)
    assert [note.key for note in digest.entries] == ["pet"]
    exported = admin_tenant.client.get("/api/v1/exports", {"person": "ada"}).json()
    assert "Green" not in json.dumps(exported)
    assert [note["key"] for bank in exported["banks"] for note in bank["notes"]] == ["pet"]


def test_keeping_a_proposal_writes_it_through_the_write_path_and_recall_finds_it(
    admin_tenant: Tenant, reviewing: Person
) -> None:
    conversation = start_conversation(team=admin_tenant.team, agent=admin_tenant.agent, person=reviewing)
    said = chat(conversation, [("My favourite colour is green.", "Noted.")])
    proposal = remember_call(admin_tenant.client, source_messages=[said[0].pk])["proposal"]
    listed = admin_tenant.client.get("/api/v1/proposals", {"person": "ada", "status": "pending"}).json()
    assert [(p["id"], p["content"], p["agent"], p["source_messages"]) for p in listed["results"]] == [
        (proposal, "Green.", admin_tenant.agent.slug, [said[0].pk])
    ]
    assert listed["count"] == 1
    assert listed["results"][0]["expires_at"] is not None

    kept = admin_tenant.client.post(f"/api/v1/proposals/{proposal}/approve", {}, format="json")

    assert kept.status_code == 200, kept.content
    note = Note.objects.get(pk=kept.json()["note"])
    assert (note.key, note.content, note.source) == ("favourite-colour", "Green.", "remember")
    assert list(NoteSource.objects.filter(note=note).values_list("message_id", flat=True)) == [said[0].pk]
    create = Revision.objects.get(note_id=note.pk, action="create")
    assert (create.actor, create.actor_ref) == ("agent", admin_tenant.agent.slug)  # as its original writer
    decision = Revision.objects.get(action="keep")
    assert (decision.actor, decision.note_id) == ("admin", note.pk)
    assert kept.json()["proposal"]["status"] == "kept"
    decided = Proposal.objects.get(pk=proposal)
    assert (decided.content, decided.key, decided.note_id) == ("", "", note.pk)  # its words live in the note now
    assert "Green" in found(admin_tenant.client, "favourite colour green")
    again = admin_tenant.client.post(f"/api/v1/proposals/{proposal}/approve", {}, format="json")
    assert again.status_code == 409
    assert again.json()["error"]["code"] == "conflict"
    assert admin_tenant.client.get("/api/v1/proposals", {"status": "pending"}).json()["count"] == 0


def test_keeping_with_the_persons_edit_writes_their_words(admin_tenant: Tenant, reviewing: Person) -> None:
    proposal = remember_call(admin_tenant.client)["proposal"]
    kept = admin_tenant.client.post(f"/api/v1/proposals/{proposal}/approve", {"content": "Dark green."}, format="json")
    assert kept.status_code == 200, kept.content
    assert Note.objects.get().content == "Dark green."
    assert "with the person's changes" in Revision.objects.get(action="keep").reason


def test_declining_a_proposal_leaves_its_words_nowhere(admin_tenant: Tenant, reviewing: Person) -> None:
    canary = f"cnry{uuid4().hex[:10]}"
    proposal = remember_call(admin_tenant.client, key=f"likes-{canary}", content=f"Loves {canary} cake.")["proposal"]
    assert {(s.table, s.column) for s in find_text(canary)} == {
        ("memory_proposal", "key"),
        ("memory_proposal", "content"),
    }

    declined = admin_tenant.client.post(f"/api/v1/proposals/{proposal}/reject")

    assert declined.status_code == 200, declined.content
    assert (declined.json()["status"], declined.json()["content"]) == ("rejected", "")
    assert find_text(canary) == []
    assert Proposal.objects.get(pk=proposal).status == "rejected"  # the decision stays, without words
    assert list(Revision.objects.order_by("id").values_list("action", flat=True)) == ["propose", "reject"]
    assert not Note.objects.exists()
    assert canary not in found(admin_tenant.client, f"{canary} cake")
    assert admin_tenant.client.post(f"/api/v1/proposals/{proposal}/approve").status_code == 409


def test_the_latch_and_the_caps_apply_when_a_proposal_is_kept(admin_tenant: Tenant, reviewing: Person) -> None:
    canary = f"cnry{uuid4().hex[:10]}"
    bank = get_or_create_bank(team=admin_tenant.team, person=reviewing, scope="", kind=Bank.Kind.GLOBAL)
    proposal = remember_call(admin_tenant.client, content=f"Green, like {canary}.")["proposal"]
    latch_full(bank=bank, actor=Actor(Revision.Actor.ADMIN, "test"), reason="full for the test")

    full = admin_tenant.client.post(f"/api/v1/proposals/{proposal}/approve", {}, format="json")
    assert full.status_code == 409, full.content
    assert full.json()["error"]["code"] == "bank_full"
    over = admin_tenant.client.post(f"/api/v1/proposals/{proposal}/approve", {"content": "x" * 2001}, format="json")
    assert over.status_code == 422, over.content
    assert over.json()["error"]["code"] == "too_long"
    assert not Note.objects.exists()
    assert Proposal.objects.get(pk=proposal).status == "pending"  # refused: it still waits
    refused = Revision.objects.filter(action="refused", request_id=f"proposal-{proposal}")
    assert refused.count() == 2
    assert canary in json.dumps(list(refused.values_list("after", flat=True)))

    assert admin_tenant.client.post(f"/api/v1/proposals/{proposal}/reject").status_code == 200
    assert find_text(canary) == []  # the refused attempts to keep it are blanked too


def test_edits_under_review_wait_and_change_the_note_once_kept(admin_tenant: Tenant, ada: Person, actor) -> None:
    note = remember(team=admin_tenant.team, person=ada, actor=actor, **note_fields()).note
    assert note is not None
    set_review_writes(person=ada, review=True)
    answer = admin_tenant.client.post(
        "/api/v1/tools/edit_note",
        {"person": "ada", "id": note.pk, "mode": "find_replace", "find": "Oslo", "content": "Bergen"},
        format="json",
    )
    assert answer.status_code == 202, answer.content
    assert Note.objects.get(pk=note.pk).content == "Ada lives in Oslo."
    proposal = Proposal.objects.get(pk=answer.json()["proposal"])
    assert (proposal.operation, proposal.note_id, proposal.find, proposal.content) == (
        "edit",
        note.pk,
        "Oslo",
        "Bergen",
    )
    kept = admin_tenant.client.post(f"/api/v1/proposals/{proposal.pk}/approve")
    assert kept.status_code == 200, kept.content
    assert Note.objects.get(pk=note.pk).content == "Ada lives in Bergen."


def test_remember_about_user_and_mcp_answer_proposed_in_the_same_shape(admin_tenant: Tenant, reviewing: Person) -> None:
    answer = admin_tenant.client.post(
        "/api/v1/tools/remember_about_user", {"person": "ada", "category": "food", "observation": "Likes figs."},
        format="json",
    )  # fmt: skip
    assert answer.status_code == 202, answer.content
    assert answer.json()["status"] == "proposed"
    result, is_error = call_tool(
        api_key=admin_tenant.key.api_key, name="remember",
        arguments={"person": "ada", "key": "pet", "description": "Pet", "content": "A cat."},
    )  # fmt: skip
    assert not is_error
    assert (result["status"], result["action"], result["id"]) == ("proposed", "proposed", None)
    assert Proposal.objects.filter(pk=result["proposal"], operation="remember").exists()
    assert not Note.objects.exists()


def test_review_off_writes_as_before_and_the_persons_own_writes_never_wait(admin_tenant: Tenant, ada: Person) -> None:
    answer = admin_tenant.client.post("/api/v1/tools/remember", {"person": "ada", **note_fields()}, format="json")
    assert answer.status_code == 200
    assert "status" not in answer.json()
    set_review_writes(person=ada, review=True)
    ada.refresh_from_db()
    owner = Actor(Revision.Actor.OWNER, "user:ada")
    remember(team=admin_tenant.team, person=ada, actor=owner, **note_fields(key="pet", content="A cat."))
    assert set(Note.objects.values_list("key", flat=True)) == {"home-city", "pet"}
    assert not Proposal.objects.exists()


@pytest.mark.parametrize(("age_days", "expired"), [(29, 0), (31, 1)])
def test_proposals_expire_unkept_after_proposal_days(
    admin_tenant: Tenant, reviewing: Person, age_days: int, expired: int
) -> None:
    proposal = remember_call(admin_tenant.client)["proposal"]
    Proposal.objects.filter(pk=proposal).update(created_at=timezone.now() - timedelta(days=age_days))
    assert expire_proposals() == expired
    assert expire_proposals() == 0  # safe to run twice
    left = Proposal.objects.get(pk=proposal)
    if expired:
        assert (left.status, left.content, left.key) == ("expired", "", "")
        assert Revision.objects.get(action="reject").actor == "expiry"
    else:
        assert left.status == "pending"


def test_proposal_days_comes_from_the_setting(admin_tenant: Tenant, reviewing: Person, settings) -> None:
    settings.PROPOSAL_DAYS = 2
    proposal = remember_call(admin_tenant.client)["proposal"]
    Proposal.objects.filter(pk=proposal).update(created_at=timezone.now() - timedelta(days=3))
    assert expire_proposals() == 1


def test_erasing_a_person_erases_their_proposals(admin_tenant: Tenant, reviewing: Person) -> None:
    canary = f"cnry{uuid4().hex[:10]}"
    remember_call(admin_tenant.client, content=f"Likes {canary}.")
    report = erase_person(team=admin_tenant.team, person=reviewing, actor=Actor(Revision.Actor.ADMIN, "test"))
    assert report.as_dict()["erased"]["proposals"] == 1
    assert not Proposal.objects.exists()
    assert find_text(canary) == []


# --- the API's refusals ------------------------------------------------------------------------


def test_a_plain_key_may_not_list_decide_or_turn_on_review(admin_tenant: Tenant, reviewing: Person) -> None:
    proposal = remember_call(admin_tenant.client)["proposal"]
    plain = plain_client(admin_tenant)
    for answer in [
        plain.get("/api/v1/proposals"),
        plain.post(f"/api/v1/proposals/{proposal}/approve"),
        plain.post(f"/api/v1/proposals/{proposal}/reject"),
        plain.patch("/api/v1/people/ada", {"review_writes": False}, format="json"),
    ]:
        assert answer.status_code == 403, answer.content
        assert answer.json()["error"]["code"] == "permission_denied"
    assert Proposal.objects.get(pk=proposal).status == "pending"
    assert Person.objects.get(pk=reviewing.pk).review_writes is True


def test_another_teams_proposals_are_not_found(admin_tenant: Tenant, reviewing: Person) -> None:
    proposal = remember_call(admin_tenant.client)["proposal"]
    other = make_tenant(can_admin=True)
    PersonFactory.create(team=other.team, external_id="ada")
    assert other.client.post(f"/api/v1/proposals/{proposal}/approve").status_code == 404
    assert other.client.post(f"/api/v1/proposals/{proposal}/reject").status_code == 404
    assert other.client.get("/api/v1/proposals", {"person": "ada"}).json()["count"] == 0
    assert Proposal.objects.get(pk=proposal).status == "pending"


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "field"),
    [
        ("get", "/api/v1/proposals?status=maybe", None, 400, "status"),
        ("get", "/api/v1/proposals?person=nobody", None, 404, None),
        ("post", "/api/v1/proposals/999999/approve", {}, 404, None),
        ("post", "/api/v1/proposals/999999/reject", None, 404, None),
        ("post", "/api/v1/proposals/{proposal}/approve", {"content": ""}, 400, "content"),
        ("post", "/api/v1/proposals/{proposal}/approve", {"content": ["Green."]}, 400, "content"),
        ("patch", "/api/v1/people/ada", {"review_writes": "perhaps"}, 400, "review_writes"),
        ("patch", "/api/v1/people/ada", {}, 400, "review_writes"),
        ("patch", "/api/v1/people/nobody", {"review_writes": True}, 404, None),
    ],
)
def test_bad_requests_are_refused_with_the_error_shape(
    admin_tenant: Tenant, reviewing: Person, method: str, path: str, body: object, status: int, field: str | None
) -> None:
    proposal = remember_call(admin_tenant.client)["proposal"]
    answer = getattr(admin_tenant.client, method)(path.format(proposal=proposal), body, format="json")
    assert answer.status_code == status, answer.content
    error = answer.json()["error"]
    assert error["message"]
    assert error.get("field") == field
    assert Proposal.objects.get(pk=proposal).status == "pending"


def test_the_list_is_paginated_and_filtered_by_person_and_status(admin_tenant: Tenant, reviewing: Person) -> None:
    for n in range(3):
        remember_call(admin_tenant.client, key=f"fact-{n}")
    bob = PersonFactory.create(team=admin_tenant.team, external_id="bob", review_writes=True)
    AgentFactory.create(team=admin_tenant.team)
    admin_tenant.client.post("/api/v1/tools/remember", {"person": "bob", **note_fields()}, format="json")
    first = Proposal.objects.filter(person=reviewing).order_by("id").first()
    assert first is not None
    admin_tenant.client.post(f"/api/v1/proposals/{first.pk}/reject")
    page = admin_tenant.client.get("/api/v1/proposals", {"person": "ada", "limit": "1"}).json()
    assert (page["count"], len(page["results"]), page["next"] is not None) == (3, 1, True)
    pending = admin_tenant.client.get("/api/v1/proposals", {"person": "ada", "status": "pending"}).json()
    assert [p["key"] for p in pending["results"]] == ["fact-1", "fact-2"]
    assert admin_tenant.client.get("/api/v1/proposals", {"person": "bob"}).json()["count"] == 1
    assert bob.proposals.count() == 1
    assert Message.objects.count() == 0


def test_the_curators_edits_and_day_notes_wait_too(admin_tenant: Tenant, ada: Person, actor) -> None:
    note = remember(team=admin_tenant.team, person=ada, actor=actor, **note_fields()).note
    assert note is not None
    set_review_writes(person=ada, review=True)
    conversation = start_conversation(team=admin_tenant.team, agent=admin_tenant.agent, person=ada)
    said = chat(conversation, [("I moved to Bergen.", "Oh!")])
    plan = CuratorPlan(
        operations=[
            EditOp(op="edit", key="home-city", find="Oslo", content="Bergen", sources=[said[0].pk]),
            AppendDailyOp(op="append_daily", text="Ada moved to Bergen."),
        ]
    )
    curate_conversation(conversation_id=conversation.pk, provider=ScriptedProvider(curations=[plan]))
    assert Note.objects.get(pk=note.pk).content == "Ada lives in Oslo."
    assert Note.objects.count() == 1
    edit, daily = Proposal.objects.order_by("id")
    assert (edit.operation, edit.note_id, edit.source_messages) == ("edit", note.pk, [said[0].pk])
    assert (daily.operation, daily.content, daily.bank_ref) == ("daily", "Ada moved to Bergen.", "user:ada")
    for proposal in (edit, daily):
        answer = admin_tenant.client.post(f"/api/v1/proposals/{proposal.pk}/approve")
        assert answer.status_code == 200, answer.content
    assert Note.objects.get(pk=note.pk).content == "Ada lives in Bergen."
    assert Note.objects.filter(kind="daily", content="Ada moved to Bergen.").exists()


def test_expiry_runs_on_the_beat_schedule() -> None:
    assert {"task": "memory.tasks.expire_old_proposals", "schedule": 3600.0} in app.conf.beat_schedule.values()


def test_erasing_a_note_declines_the_edits_of_it_waiting_for_review(admin_tenant: Tenant, ada: Person, actor) -> None:
    canary = f"cnry{uuid4().hex[:10]}"
    note = remember(team=admin_tenant.team, person=ada, actor=actor, **note_fields(content=f"Lives by {canary}.")).note
    assert note is not None
    set_review_writes(person=ada, review=True)
    answer = admin_tenant.client.post(
        "/api/v1/tools/edit_note",
        {"person": "ada", "id": note.pk, "mode": "find_replace", "find": canary, "content": "the sea"},
        format="json",
    )
    assert answer.status_code == 202, answer.content
    assert admin_tenant.client.delete(f"/api/v1/notes/{note.pk}?erase=true").status_code == 200
    assert Proposal.objects.get(pk=answer.json()["proposal"]).status == "rejected"
    assert find_text(canary) == []
