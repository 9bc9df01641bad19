"""The retrieval audit: every read about a person leaves one row of ids, counts and the query, and
never a copy of what the notes or messages say; the API shows a team's reads to an admin key only;
erasure and retention remove them."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any
from unittest import mock

import pytest
from django.utils import timezone

from conversations.models import Message
from conversations.services import erase_message, start_conversation
from memory.models import Note, Read
from memory.services import erase_note, erase_person, remember
from memory.services.reads import delete_old_reads, flush_reads, pending_reads, record_read
from memory.tasks import delete_old_reads as delete_old_reads_task
from tests.support.canary import find_text
from tests.support.factories import AgentFactory, PersonFactory, chat, note_fields, written
from tests.support.fixtures import WORKER_DEADLINE, make_tenant, run_async
from tests.test_mcp import http_session, structured

# Words that only the notes and messages hold: the audit must never copy them.
NOTE_SECRET = "quokkanote"
MESSAGE_SECRET = "wombatmessage"


def audit_tables(needle: str) -> list[str]:
    return [sighting.table for sighting in find_text(needle) if sighting.table == Read._meta.db_table]


@pytest.fixture
def memories(tenant, person, actor) -> list[Note]:
    return [
        written(remember(
            team=tenant.team, person=person, actor=actor,
            **note_fields(key="home-city", description="Where Ada lives", content=f"Ada lives in Oslo {NOTE_SECRET}."),
        )),
        written(remember(
            team=tenant.team, person=person, actor=actor,
            **note_fields(key="pet", description="Ada's pet", content=f"Ada's cat Miso is from Oslo {NOTE_SECRET}."),
        )),
    ]  # fmt: skip


@pytest.fixture
def talk(conversation) -> list[Message]:
    return chat(
        conversation,
        [
            (f"I moved to Oslo last spring {MESSAGE_SECRET}", "Welcome to Oslo!"),
            ("My cat Miso sleeps a lot", "Cats do."),
        ],
    )


READ_CALLS: dict[str, dict[str, Any]] = {
    "recall_memories": {"person": "ada", "query": "Oslo"},
    "search": {"person": "ada", "query": "Oslo"},
    "recall": {"person": "ada", "query": "Oslo"},
    "recent_messages": {"person": "ada", "limit": 3},
    "search_conversation": {"person": "ada", "query": "Oslo"},
}


def returned_ids(tool: str, body: dict[str, Any]) -> tuple[list[int], list[int], list[int]]:
    """(note ids, message ids, their conversations) in the order the tool returned them."""
    if tool in ("recall_memories", "search"):
        return [r["id"] for r in body["results"]], [], []
    if tool == "recall":
        return [i["id"] for i in body["items"]], [], []
    if tool == "recent_messages":
        return [], [m["id"] for m in body["messages"]], [m["conversation"] for m in body["messages"]]
    return [], [r["message_id"] for r in body["results"]], [r["conversation"] for r in body["results"]]


def assert_one_read_of(tenant, person, tool: str, body: dict[str, Any], query: str) -> Read:
    notes, messages, conversations = returned_ids(tool, body)
    assert notes or messages, f"{tool} found nothing to audit"
    (read,) = Read.objects.filter(team=tenant.team)
    assert (read.tool, read.agent_id, read.person_id, read.query) == (tool, tenant.agent.pk, person.pk, query)
    assert (read.notes, read.messages, read.conversations) == (notes, messages, conversations)
    assert (read.note_count, read.message_count) == (len(notes), len(messages))
    assert read.latency_ms > 0
    assert audit_tables(NOTE_SECRET) == []
    assert audit_tables(MESSAGE_SECRET) == []
    return read


@pytest.mark.parametrize("tool", list(READ_CALLS))
def test_each_read_tool_over_rest_leaves_one_read_of_ids_and_no_content(tenant, person, memories, talk, tool):
    response = tenant.client.post(f"/api/v1/tools/{tool}", READ_CALLS[tool], format="json")
    assert response.status_code == 200, response.content
    assert pending_reads() == 0  # written once the response was sent
    assert_one_read_of(tenant, person, tool, response.json(), READ_CALLS[tool].get("query", ""))
    assert find_text(NOTE_SECRET)
    assert find_text(MESSAGE_SECRET)


def test_a_write_tool_or_a_refused_read_leaves_no_read(tenant, person, memories):
    written_ok = tenant.client.post("/api/v1/tools/remember", {"person": "ada", **note_fields()}, format="json")
    assert written_ok.status_code == 200
    assert tenant.client.post("/api/v1/tools/search", {"person": "ada"}, format="json").status_code == 400
    assert not Read.objects.exists()


def test_a_turn_leaves_one_read_with_its_notes_passages_and_degraded_layers(tenant, person, memories, talk):
    # A new conversation: the earlier one's messages are out of its window, so its search finds them.
    new = start_conversation(team=tenant.team, agent=tenant.agent, person=person)
    response = tenant.client.post(
        "/api/v1/turns",
        {"person": "ada", "conversation": new.pk, "message": "Is Miso still happy in Oslo these days?"},
        format="json",
    )
    assert response.status_code == 201, response.content
    composed = response.json()
    (read,) = Read.objects.filter(team=tenant.team)
    turn = composed["turn"]
    passages = list(
        Message.objects.filter(pk__in=read.messages).values_list("pk", "conversation_id").order_by()
    )  # fmt: skip
    assert (read.tool, read.turn_id, read.query, read.agent_id, read.person_id) == (
        "turn", turn, "", tenant.agent.pk, person.pk
    )  # fmt: skip
    assert read.notes == composed["notes_used"]
    assert read.notes
    assert read.messages, "the turn's own search found the earlier conversation"
    assert dict(passages) == dict(zip(read.messages, read.conversations, strict=True))
    assert read.degraded == composed["degraded"]
    assert audit_tables(NOTE_SECRET) == []
    assert audit_tables(MESSAGE_SECRET) == []
    # The message the turn answers is the query: kept by reference, never copied.
    assert audit_tables("still happy in Oslo") == []


# --- GET /api/v1/reads ------------------------------------------------------------------------


def audit(team, agent, person, tool="search", *, query="q", notes=(), messages=(), at=None) -> None:
    """A read, as the tools record it, written at once."""
    record_read(
        team=team, agent=agent, person=person, tool=tool, started=0.0, query=query, notes=notes, messages=messages,
        conversations=[7] * len(messages),
    )  # fmt: skip
    flush_reads()
    if at is not None:
        Read.objects.filter(pk=Read.objects.latest("id").pk).update(created_at=at)


def test_reads_need_an_admin_key(tenant, person):
    response = tenant.client.get("/api/v1/reads")
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "permission_denied"
    assert "admin-capable API key" in response.json()["error"]["message"]


def test_reads_list_filters_by_person_agent_tool_and_time_and_never_shows_another_team(admin_tenant):
    team, agent = admin_tenant.team, admin_tenant.agent
    ada, bob = PersonFactory.create(team=team, external_id="ada"), PersonFactory.create(team=team, external_id="bob")
    coach = AgentFactory.create(team=team, slug="coach")
    now = timezone.now()
    audit(team, agent, ada, "search", query="first", notes=[3, 1], at=now - timedelta(hours=3))
    audit(team, coach, ada, "recall", query="second", at=now - timedelta(hours=2))
    audit(team, agent, bob, "search_conversation", query="third", messages=[9], at=now - timedelta(hours=1))
    audit(team, agent, ada, "turn", query="", notes=[5], at=now)
    other = make_tenant(can_admin=True)
    audit(other.team, other.agent, PersonFactory.create(team=other.team, external_id="ada"), query="theirs")

    def queries(**params: str) -> list[str]:
        response = admin_tenant.client.get("/api/v1/reads", params)
        assert response.status_code == 200, response.content
        return [read["query"] for read in response.json()["results"]]

    assert queries() == ["", "third", "second", "first"]  # newest first, this team's only
    assert queries(person="ada") == ["", "second", "first"]
    assert queries(agent="coach") == ["second"]
    assert queries(tool="search") == ["first"]
    assert queries(since=(now - timedelta(hours=2)).isoformat(), until=now.isoformat()) == ["third", "second"]
    page = admin_tenant.client.get("/api/v1/reads", {"limit": 1, "offset": 3}).json()
    assert page["count"] == 4
    (first,) = page["results"]
    assert first["notes"] == [{"id": 3, "rank": 1}, {"id": 1, "rank": 2}]
    assert (first["agent"], first["person"], first["tool"], first["note_count"]) == (agent.slug, "ada", "search", 2)
    third = admin_tenant.client.get("/api/v1/reads", {"person": "bob"}).json()["results"][0]
    assert third["messages"] == [{"id": 9, "conversation": 7, "rank": 1}]

    for params, status, field in [
        ({"person": "nobody"}, 404, None),
        ({"agent": "nobody"}, 404, None),
        ({"tool": "remember"}, 400, "tool"),
        ({"since": "yesterday"}, 400, "since"),
        ({"limit": "100000"}, 400, "limit"),
    ]:
        response = admin_tenant.client.get("/api/v1/reads", params)
        assert response.status_code == status, (params, response.content)
        if field:
            assert response.json()["error"]["field"] == field


# --- erasure, export and retention ------------------------------------------------------------


def test_erasing_a_note_blanks_the_queries_that_found_it_and_only_those(tenant, person, memories, actor):
    home, pet = memories
    audit(tenant.team, tenant.agent, person, query="where in Oslo does Ada live", notes=[home.pk, pet.pk])
    audit(tenant.team, tenant.agent, person, query="the cat", notes=[pet.pk])
    record_read(team=tenant.team, agent=tenant.agent, person=person, tool="search", started=0.0,
                query="not written yet", notes=[home.pk])  # fmt: skip
    other = make_tenant()
    other_person = PersonFactory.create(team=other.team, external_id="ada")
    audit(other.team, other.agent, other_person, query="same id, other team", notes=[home.pk])

    erase_note(note=home, actor=actor)
    flush_reads()

    kept = dict(Read.objects.filter(team=tenant.team).values_list("query", "query_erased"))
    assert kept == {"": True, "the cat": False}
    assert Read.objects.filter(team=tenant.team, query="", query_erased=True).count() == 2
    assert audit_tables("where in Oslo") == []
    assert audit_tables("not written yet") == []
    assert Read.objects.get(team=other.team).query == "same id, other team"


def test_erasing_a_message_blanks_the_queries_that_found_it(tenant, person, talk):
    said = talk[0]
    audit(tenant.team, tenant.agent, person, "search_conversation", query="when did Ada move", messages=[said.pk])
    audit(tenant.team, tenant.agent, person, "search_conversation", query="cats", messages=[talk[2].pk])
    erase_message(message=said)
    assert sorted(Read.objects.values_list("query", flat=True)) == ["", "cats"]


def test_erasing_a_person_erases_the_reads_about_them(tenant, person, memories, actor):
    bob = PersonFactory.create(team=tenant.team, external_id="bob")
    audit(tenant.team, tenant.agent, person, query="about ada", notes=[memories[0].pk])
    audit(tenant.team, tenant.agent, bob, query="about bob")
    record_read(team=tenant.team, agent=tenant.agent, person=person, tool="search", started=0.0, query="pending ada")
    erase_person(team=tenant.team, person=person, actor=actor)
    flush_reads()
    assert list(Read.objects.values_list("query", flat=True)) == ["about bob"]


def test_a_persons_export_holds_the_reads_about_them(admin_tenant):
    team, agent = admin_tenant.team, admin_tenant.agent
    ada, bob = PersonFactory.create(team=team, external_id="ada"), PersonFactory.create(team=team, external_id="bob")
    audit(team, agent, ada, query="about ada", notes=[4])
    audit(team, agent, bob, query="about bob")
    exported = admin_tenant.client.get("/api/v1/exports", {"person": "ada"}).json()
    (read,) = exported["reads"]
    assert (read["query"], read["person"], read["agent"], read["notes"]) == (
        "about ada", "ada", agent.slug, [{"id": 4, "rank": 1}]
    )  # fmt: skip


def test_retention_deletes_reads_older_than_read_audit_days(tenant, person, settings):
    settings.READ_AUDIT_DAYS = 30
    now = timezone.now()
    audit(tenant.team, tenant.agent, person, query="old", at=now - timedelta(days=31))
    audit(tenant.team, tenant.agent, person, query="recent", at=now - timedelta(days=29))
    assert delete_old_reads_task() == 1
    assert list(Read.objects.values_list("query", flat=True)) == ["recent"]
    assert delete_old_reads(now=now + timedelta(days=2)) == 1
    assert not Read.objects.exists()


def test_retention_runs_on_the_beat_schedule():
    from config.celery import app

    assert {"task": "memory.tasks.delete_old_reads", "schedule": 3600.0} in app.conf.beat_schedule.values()


# --- over MCP (the live ASGI server) ----------------------------------------------------------


def wait_for_reads(team, count: int) -> list[Read]:
    """The team's reads once `count` are written (the server writes them after sending the result)."""
    deadline = time.monotonic() + WORKER_DEADLINE
    while len(found := list(Read.objects.filter(team=team).order_by("id"))) < count:
        assert time.monotonic() < deadline, f"{len(found)} of {count} reads written within {WORKER_DEADLINE:.0f}s"
        time.sleep(0.05)
    return found


@pytest.mark.django_db(transaction=True)
def test_each_read_tool_over_mcp_leaves_one_read_of_ids_and_no_content(web_server, tenant, person, memories, talk):
    bodies: dict[str, dict[str, Any]] = {}

    async def scenario() -> None:
        async with http_session(web_server, tenant.key.plaintext) as session:
            for tool, arguments in READ_CALLS.items():
                result = await session.call_tool(tool, arguments)
                assert not result.isError, result.content
                bodies[tool] = structured(result)
            refused = await session.call_tool("search", {"person": "ada"})
            assert refused.isError

    run_async(scenario)
    reads = wait_for_reads(tenant.team, len(READ_CALLS))
    assert [read.tool for read in reads] == list(READ_CALLS)  # one each, none for the refused call
    for read in reads:
        notes, messages, conversations = returned_ids(read.tool, bodies[read.tool])
        assert notes or messages, f"{read.tool} found nothing to audit"
        assert (read.agent_id, read.person_id, read.query) == (
            tenant.agent.pk, person.pk, READ_CALLS[read.tool].get("query", "")
        )  # fmt: skip
        assert (read.notes, read.messages, read.conversations) == (notes, messages, conversations)
        assert read.request_id  # the MCP call's own id
    assert audit_tables(NOTE_SECRET) == []
    assert audit_tables(MESSAGE_SECRET) == []


# --- how rows are written ----------------------------------------------------------------------


def test_a_failed_write_is_logged_with_what_was_lost_and_the_read_still_answers(tenant, person, memories, caplog):
    from django.db import DatabaseError

    with mock.patch.object(Read.objects, "bulk_create", side_effect=DatabaseError("disk full")):
        response = tenant.client.post("/api/v1/tools/search", READ_CALLS["search"], format="json")
    assert response.status_code == 200
    assert response.json()["results"]
    assert not Read.objects.exists()
    assert pending_reads() == 0
    assert "The retrieval audit lost 1 reads: writing them failed" in caplog.text


def test_reads_are_written_at_once_when_too_many_wait(tenant, person, settings):
    from memory.services import reads

    with mock.patch.object(reads, "PENDING_MAX", 3):
        for i in range(2):
            record_read(team=tenant.team, agent=tenant.agent, person=person, tool="search", started=0.0, query=f"{i}")
        assert pending_reads() == 2
        assert not Read.objects.exists()
        record_read(team=tenant.team, agent=tenant.agent, person=person, tool="search", started=0.0, query="2")
    assert pending_reads() == 0
    assert sorted(Read.objects.values_list("query", flat=True)) == ["0", "1", "2"]


@pytest.mark.parametrize("rows", [3, 30])
def test_the_reads_list_makes_as_many_queries_for_30_rows_as_for_3(admin_tenant, rows, django_assert_num_queries):
    team = admin_tenant.team
    for i in range(rows):
        person = PersonFactory.create(team=team, external_id=f"person-{i}")
        audit(team, AgentFactory.create(team=team), person, query=f"q{i}", notes=[1, 2], messages=[3])
    assert admin_tenant.client.get("/api/v1/me").status_code == 200  # the key is remembered from here on
    # the person named, the count, the page with agent and person (select_related)
    with django_assert_num_queries(3):
        page = admin_tenant.client.get("/api/v1/reads", {"person": "person-1"})
    assert page.json()["count"] == 1
    with django_assert_num_queries(2):
        page = admin_tenant.client.get("/api/v1/reads")
    assert page.json()["count"] == len(page.json()["results"]) == rows


@pytest.mark.django_db(transaction=True)
def test_a_read_about_someone_deleted_before_it_was_written_costs_only_itself(caplog):
    tenant = make_tenant()
    ada, bob = (PersonFactory.create(team=tenant.team, external_id=name) for name in ("ada", "bob"))
    for person, query in ((ada, "kept"), (bob, "orphan"), (ada, "kept too")):
        record_read(team=tenant.team, agent=tenant.agent, person=person, tool="search", started=0.0, query=query)
    bob.delete()  # as another process might, between the read and its write

    assert flush_reads() == 2
    assert sorted(Read.objects.values_list("query", flat=True)) == ["kept", "kept too"]
    assert "The retrieval audit lost 1 reads: their team, agent or person was deleted" in caplog.text


@pytest.mark.django_db(transaction=True)
def test_reads_written_outside_a_transaction_take_one_statement_and_no_transaction_of_their_own():
    """One INSERT for every pending read, run in autocommit: no BEGIN and COMMIT (a round trip
    each) around it, after every audited request."""
    from django.db import connection

    tenant = make_tenant()
    ada = PersonFactory.create(team=tenant.team, external_id="ada")
    for query in ("one", "two"):
        record_read(team=tenant.team, agent=tenant.agent, person=ada, tool="search", started=0.0, query=query)
    ran = []

    def spy(execute, sql, params, many, context):
        ran.append((sql.split()[0].upper(), connection.in_atomic_block, connection.get_autocommit()))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(spy):
        assert flush_reads() == 2
    assert ran == [("INSERT", False, True)]
    assert sorted(Read.objects.values_list("query", flat=True)) == ["one", "two"]


def test_erasure_blanks_the_queries_about_that_person_that_quote_what_was_erased(tenant, person, talk, memories, actor):
    """A search for the erased fact that found nothing still wrote the fact down in its query."""
    bob = PersonFactory.create(team=tenant.team, external_id="bob")
    audit(tenant.team, tenant.agent, person, "recall_memories", query="anything about oslo spring?")
    audit(tenant.team, tenant.agent, person, "search_conversation", query="the cat")
    audit(tenant.team, tenant.agent, bob, "search_conversation", query="oslo spring")  # another person
    erase_message(message=talk[0])  # "I moved to Oslo last spring ..."
    assert sorted(Read.objects.filter(person=person).values_list("query", flat=True)) == ["", "the cat"]
    assert Read.objects.get(person=bob).query == "oslo spring"

    audit(tenant.team, tenant.agent, person, "search", query="Miso?")
    erase_note(note=memories[1], actor=actor)  # "Ada's cat Miso is from Oslo ..."
    assert sorted(Read.objects.filter(person=person).values_list("query", flat=True)) == ["", "", ""]
    assert Read.objects.get(person=bob).query == "oslo spring"
