"""A person's mute holds in every read made with the muted agent's credentials, and only there.

Ada muted "health" for one agent (Coach). Each read surface an agent has is asked twice, with
Coach's key and with the key of another agent of the same team (Scribe): Coach never meets a
health note about Ada, Scribe does, and both still see the unmuted note (so an empty answer
cannot pass for a working mute).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest
from rest_framework.test import APIClient

from accounts.models import ApiKey, Person
from accounts.services import issue_api_key
from config.mcp import call_tool
from memory.models import Note
from memory.queries import build_digest
from memory.services import mute_category, remember
from tests.support.factories import AgentFactory, PersonFactory, written

pytestmark = pytest.mark.django_db

APOLLO = "project:apollo"


@dataclass
class Reader:
    client: APIClient
    api_key: ApiKey


@dataclass
class World:
    ada: Person
    coach: Reader  # health is muted for this one
    scribe: Reader
    allergy: Note  # Ada's global bank, category health: muted for Coach
    city: Note  # Ada's global bank, no category: never muted
    snacks: Note  # the shared bank of project:apollo, category health


def reader(agent) -> Reader:
    key = issue_api_key(agent=agent, name="test")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key.plaintext}")
    return Reader(client=client, api_key=key.api_key)


@pytest.fixture
def world(tenant, person, actor) -> World:
    team, ada = tenant.team, person
    allergy = written(remember(
        team=team, person=ada, actor=actor, bank="global", category="health", key="allergy",
        description="What Ada is allergic to", content="Ada is allergic to peanuts.",
    ))  # fmt: skip
    city = written(remember(
        team=team, person=ada, actor=actor, bank="global", key="city",
        description="Where Ada lives", content="Ada lives in Oslo and eats no peanuts.",
    ))  # fmt: skip
    snacks = written(remember(
        team=team, person=ada, actor=actor, scope=APOLLO, bank="shared", category="health", key="team-snacks",
        description="Snacks at Apollo stand-ups", content="The Apollo team orders peanut-free snacks.",
    ))  # fmt: skip
    coach = AgentFactory.create(team=team, name="Coach")
    mute_category(person=ada, agent=coach, category="health")
    return World(
        ada=ada,
        coach=reader(coach),
        scribe=reader(AgentFactory.create(team=team, name="Scribe")),
        allergy=allergy,
        city=city,
        snacks=snacks,
    )


def ok(response) -> dict:
    assert response.status_code == 200, response.content
    return response.json()


def tool(reader: Reader, name: str, **arguments) -> dict:
    return ok(reader.client.post(f"/api/v1/tools/{name}", {"person": "ada", **arguments}, format="json"))


def notes_list(reader: Reader, world: World) -> set[str]:
    return {note["key"] for note in ok(reader.client.get("/api/v1/notes", {"person": "ada"}))["results"]}


def notes_list_unfiltered(reader: Reader, world: World) -> set[str]:
    return {note["key"] for note in ok(reader.client.get("/api/v1/notes"))["results"]}


def notes_list_by_category(reader: Reader, world: World) -> set[str]:
    listed = ok(reader.client.get("/api/v1/notes", {"person": "ada", "category": "health"}))["results"]
    return {note["key"] for note in listed} | notes_list(reader, world)


def note_detail(reader: Reader, world: World) -> set[str]:
    seen = set()
    for note in [world.allergy, world.city]:
        response = reader.client.get(f"/api/v1/notes/{note.pk}")
        if response.status_code == 404:
            assert response.json()["error"]["code"] == "not_found"
            continue
        seen.add(ok(response)["key"])
    return seen


def export(reader: Reader, world: World) -> set[str]:
    package = ok(reader.client.get("/api/v1/exports", {"person": "ada"}))
    in_banks = {note["key"] for bank in package["banks"] for note in bank["notes"]}
    in_log = {revision["note_key"] for revision in package["revisions"]}
    return in_banks | in_log


def revisions(reader: Reader, world: World) -> set[str]:
    by_person = {r["note_key"] for r in ok(reader.client.get("/api/v1/revisions", {"person": "ada"}))["results"]}
    by_note = {r["note_key"] for r in ok(reader.client.get("/api/v1/revisions", {"note": world.allergy.pk}))["results"]}
    return by_person | by_note


def recall_memories(reader: Reader, world: World) -> set[str]:
    return {hit["key"] for hit in tool(reader, "recall_memories", scope=APOLLO, query="peanuts", limit=10)["results"]}


def search(reader: Reader, world: World) -> set[str]:
    return {hit["key"] for hit in tool(reader, "search", scope=APOLLO, query="peanuts")["results"]}


def recall(reader: Reader, world: World) -> set[str]:
    return {item["key"] for item in tool(reader, "recall", scope=APOLLO, query="peanuts")["items"]}


def mcp_recall_memories(reader: Reader, world: World) -> set[str]:
    body, is_error = call_tool(
        api_key=reader.api_key, name="recall_memories", arguments={"person": "ada", "scope": APOLLO, "query": "peanuts"}
    )
    assert not is_error, body
    return {hit["key"] for hit in body["results"]}


def turn(reader: Reader, world: World) -> set[str]:
    """The composer: the digest and the full notes a turn is given."""
    body = ok_created(
        reader.client.post(
            "/api/v1/turns", {"person": "ada", "scope": APOLLO, "message": "What about peanuts?"}, format="json"
        )
    )
    notes = next(block["text"] for block in body["blocks"] if block["layer"] == "notes")
    return {note.key for note in [world.allergy, world.city, world.snacks] if f'"key": "{note.key}"' in notes}


def ok_created(response) -> dict:
    assert response.status_code in (200, 201), response.content
    return response.json()


SURFACES: list[Callable[[Reader, World], set[str]]] = [
    notes_list,
    notes_list_unfiltered,
    notes_list_by_category,
    note_detail,
    export,
    revisions,
    recall_memories,
    search,
    recall,
    mcp_recall_memories,
    turn,
]


@pytest.mark.parametrize("read", SURFACES, ids=[surface.__name__ for surface in SURFACES])
def test_a_muted_category_is_absent_for_the_muted_agent_and_present_for_another(world, read):
    muted, other = read(world.coach, world), read(world.scribe, world)
    assert "allergy" not in muted
    assert "city" in muted  # the read works; only the muted category is gone
    assert {"allergy", "city"} <= other


@pytest.mark.parametrize("read", [recall_memories, search, recall, turn], ids=lambda read: read.__name__)
def test_a_persons_mute_reaches_the_shared_bank_in_their_reads_only(world, read, tenant):
    assert "team-snacks" not in read(world.coach, world)
    assert "team-snacks" in read(world.scribe, world)
    # Bob works on Apollo too: Ada's mute is hers, so Coach still gets the shared note in Bob's turns.
    bob = PersonFactory.create(team=tenant.team, external_id="bob")
    hits = tool(world.coach, "recall_memories", person=bob.external_id, scope=APOLLO, query="peanut snacks")
    assert "team-snacks" in {hit["key"] for hit in hits["results"]}


def test_the_digest_leaves_out_a_muted_category_in_the_shared_bank_too(world, tenant):
    digest = build_digest(team=tenant.team, person=world.ada, agent=world.coach.api_key.agent, scope=APOLLO)
    assert [note.key for note in digest.entries] == ["city"]
    other = build_digest(team=tenant.team, person=world.ada, agent=world.scribe.api_key.agent, scope=APOLLO)
    assert {note.key for note in other.entries} == {"allergy", "city", "team-snacks"}


def test_an_export_made_with_a_muted_agents_key_says_what_it_withheld(world):
    package = ok(world.coach.client.get("/api/v1/exports", {"person": "ada"}))
    assert package["withheld"]["agent"] == world.coach.api_key.agent.slug
    assert package["withheld"]["categories"] == ["health"]
    assert "Ada is allergic" not in str(package)
    assert ok(world.scribe.client.get("/api/v1/exports", {"person": "ada"}))["withheld"]["categories"] == []


def test_the_persons_own_export_keeps_everything(world, tenant):
    from memory.packages import export_person

    package = export_person(team=tenant.team, person=world.ada)
    assert "withheld" not in package
    # team-snacks is in a shared bank, written about her.
    assert {note["key"] for bank in package["banks"] for note in bank["notes"]} == {"allergy", "city", "team-snacks"}


def test_the_muted_agent_cannot_edit_or_delete_what_it_cannot_see(world):
    probe = {"person": "ada", "id": world.allergy.pk, "mode": "find_replace", "find": "peanuts", "content": "nuts"}
    refused = world.coach.client.post("/api/v1/tools/edit_note", probe, format="json")
    assert refused.status_code == 404
    assert refused.json()["error"] == {
        "code": "not_found",
        "message": f"No note {world.allergy.pk} is reachable for this person and scope.",
        "field": "id",
    }
    assert world.coach.client.delete(f"/api/v1/notes/{world.allergy.pk}").status_code == 404
    world.allergy.refresh_from_db()
    assert world.allergy.content == "Ada is allergic to peanuts."
    assert ok(world.scribe.client.post("/api/v1/tools/edit_note", probe, format="json"))["action"] == "updated"


def test_unmuting_gives_the_agent_its_reads_back(world):
    from memory.services import unmute_category

    unmute_category(person=world.ada, agent=world.coach.api_key.agent, category="health")
    for read in SURFACES:
        assert "allergy" in read(world.coach, world), read.__name__
