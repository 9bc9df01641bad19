"""Query-count pins: every list endpoint, the composer (and the turn around it) and the digest make
exactly as many queries for 3 rows as for 30, so a read that starts querying once per row (an N+1)
fails here.

Each pin is the sum of the queries listed beside it. A change that adds a query on purpose updates
the number and the list; one that adds a query per row cannot pass both row counts.

The API calls are made after a first call with the same key, so the key's `last_used_at` (written
at most once a minute, accounts.services.authenticate_key) is fresh and not rewritten. The tests
run inside the test's transaction: each atomic block a read opens is a SAVEPOINT and a RELEASE
there (in production, BEGIN and COMMIT, which Django does not count).
"""

from __future__ import annotations

import pytest

from conversations.composer import compose
from conversations.models import Conversation
from conversations.services import record_message, start_conversation
from memory.models import Bank
from memory.queries import build_digest
from memory.services import latch_full, mute_category, remember
from memory.vectors import embed_query
from tests.support.factories import AgentFactory, PersonFactory, chat, note_fields

pytestmark = pytest.mark.django_db

ROWS = [3, 30]
APOLLO = "project:apollo"

# The API key: none, because the /api/v1/me call before each count verified it and this process
# remembers it (accounts.keycache); with KEY_CACHE_SECONDS=0 it is one (the key with its agent and team).
AUTH = 0
PAGE = 2  # COUNT(*) for the page's "count", then the page itself


def people_with_memories(tenant, actor, rows: int) -> Conversation:
    """`rows` people, each with a note in their global bank (a muted category for some), one in
    their private bank of project:apollo, a note in the shared bank of project:apollo, and a
    conversation with the tenant's agent. Returns the last conversation, of `rows` exchanges."""
    muted_for = AgentFactory.create(team=tenant.team)  # a mute of another agent's: filtered in SQL, never per row
    conversation = None
    for i in range(rows):
        person = PersonFactory.create(team=tenant.team, external_id=f"person-{i}")
        category = "health" if i % 2 else "home"
        remember(team=tenant.team, person=person, actor=actor, category=category, **note_fields())
        remember(team=tenant.team, person=person, actor=actor, scope=APOLLO, **note_fields(key="deadline"))
        remember(
            team=tenant.team, person=person, actor=actor, scope=APOLLO, bank="shared",
            **note_fields(key=f"standup-{i}"),
        )  # fmt: skip
        mute_category(person=person, agent=muted_for, category="health")
        conversation = start_conversation(team=tenant.team, agent=tenant.agent, person=person)
        chat(conversation, [(f"Hello {i}", "Hi")])
    assert conversation is not None
    chat(conversation, [(f"Question {i}", f"Answer {i}") for i in range(rows - 1)])
    return conversation


# --- the list endpoints ----------------------------------------------------------------------


@pytest.mark.parametrize("rows", ROWS)
@pytest.mark.parametrize(
    ("url", "queries", "expected"),
    [
        # notes with their bank and its person (select_related; the mute filter is a subquery)
        pytest.param("/api/v1/notes", AUTH + PAGE, lambda rows: 3 * rows, id="notes"),
        # banks with their person and their note count (an annotation)
        pytest.param("/api/v1/banks", AUTH + PAGE, lambda rows: 2 * rows + 1, id="banks"),
        # revisions carry their bank and note as plain values: nothing to join
        pytest.param("/api/v1/revisions", AUTH + PAGE, lambda rows: 3 * rows, id="revisions"),
        # conversations with their person and agent (select_related)
        pytest.param("/api/v1/conversations", AUTH + PAGE, lambda rows: rows, id="conversations"),
        # the conversation (scoped to the calling agent), then the page of its messages
        pytest.param(
            "/api/v1/conversations/{conversation}/messages", AUTH + 1 + PAGE, lambda rows: 2 * rows, id="messages"
        ),
        # the person named in ?person=, then the page
        pytest.param("/api/v1/notes?person=person-1", AUTH + 1 + PAGE, lambda rows: 2, id="notes-of-a-person"),
    ],
)
def test_a_list_endpoint_makes_as_many_queries_for_30_rows_as_for_3(
    tenant, actor, rows, url, queries, expected, django_assert_num_queries
):
    conversation = people_with_memories(tenant, actor, rows)
    url = url.format(conversation=conversation.pk)
    assert tenant.client.get("/api/v1/me").status_code == 200  # last_used_at is fresh from here on

    with django_assert_num_queries(queries):
        page = tenant.client.get(url, {"limit": 200} if "?" not in url else None)

    assert page.status_code == 200, page.json()
    assert page.json()["count"] == len(page.json()["results"]) == expected(rows)


# --- the composer, the turn and the digest ---------------------------------------------------

# What the digest reads: the applicable banks (the team's ontology only for a context with tags),
# then the first DIGEST_LIMIT applicable, unmuted, unshadowed notes in digest order, without their
# content, each carrying the count of all of them (a window), so the rest are counted, not read.
VISIBLE_NOTES = 2
# One turn's composition, when its passages are all outside the window (one search, no retry):
COMPOSE = (
    5  # one round trip (config.prepared.run_together), each statement counted: enable_sort off,
    #    the newest messages of the conversation for the window, enable_sort back, the messages a
    #    mute withholds from the agent (conversations.mutes), and the applicable banks with their
    #    versions (the context has no tags: no ontology read)
    + 2  # SAVEPOINT / RELEASE: the memory read is atomic, so a failing one cannot poison the turn
    + 1  # every applicable note in one read (memory.queries.turn_notes), without its content:
    #      shadowed, each with its description, its place in the digest's order, the length of its
    #      line and the hash of its text; kept by the process for these bank versions (see below)
    # The banks as recall keeps them (memory.kept_banks), for the vectors of the notes' present
    # text; kept per bank version, so only a first turn (or one after a write) reads them:
    + 3  # each of the three banks: its notes' row versions with their light rows, in one statement
    + 1  # the vectors of those notes' present text, all in one read
    + 1  # the content of the notes that fit, and only theirs
    + 1  # passages: the pair's conversations, with the messages and vectors new to this process
    #      and the query's lexemes (conversations.kept_pairs); both halves of the search then run
    #      over what the process keeps of the pair
    + 1  # passages: the messages found (in_bulk)
)


def long_memory(tenant, person, actor, conversation, index_inline, rows: int):
    """`rows` notes in each of Ada's banks of project:apollo (with vectors), `rows` old exchanges
    about a lighthouse, then more recent filler than the ceiling holds, so the passages the
    turn's search finds are all outside the window. Returns the turn's message."""
    with index_inline():
        for i in range(rows):
            for bank in ("private", "shared", "global"):
                remember(
                    team=tenant.team, person=person, actor=actor, scope=APOLLO, bank=bank,
                    **note_fields(key=f"{bank}-{i}", content=f"Ada's lighthouse fact number {i}."),
                )  # fmt: skip
        chat(conversation, [(f"The lighthouse keeper story, part {i}", f"A lighthouse, {i}") for i in range(rows)], days_ago=30)  # fmt: skip
        chat(conversation, [("Filler " + "f" * 700, "Noted " + "n" * 700) for _ in range(15)])
    latch_full(
        bank=Bank.objects.get(team=tenant.team, address="user:ada"), actor=actor, reason="a notice in the digest"
    )
    message = record_message(
        conversation=conversation, role="user", content="Tell me the lighthouse keeper story again"
    )
    embed_query(message.content)  # its vector kept, so the passages' two halves always go together (COMPOSE)
    return message


@pytest.mark.parametrize("rows", ROWS)
def test_composing_a_turn_makes_as_many_queries_for_30_rows_as_for_3(
    tenant, person, actor, conversation, index_inline, rows, django_assert_num_queries
):
    message = long_memory(tenant, person, actor, conversation, index_inline, rows)

    with django_assert_num_queries(COMPOSE):
        composition = compose(
            team=tenant.team, agent=tenant.agent, person=person, conversation=conversation, message=message,
            scope=APOLLO,
        )  # fmt: skip

    assert composition.degraded == []
    assert len(composition.notes_used) >= min(3 * rows, 30)
    assert composition.passages_used  # the search found old passages, and fetched them
    assert {b.layer for b in composition.blocks} >= {"notes", "passages", "deeper_window"}


@pytest.mark.parametrize("rows", ROWS)
def test_the_next_turn_reads_no_note_kept_for_the_same_bank_versions(
    tenant, person, actor, conversation, index_inline, rows, django_assert_num_queries
):
    message = long_memory(tenant, person, actor, conversation, index_inline, rows)

    def turn():
        return compose(
            team=tenant.team, agent=tenant.agent, person=person, conversation=conversation, message=message,
            scope=APOLLO,
        )  # fmt: skip

    first = turn()
    # No read of the applicable notes, their banks' rows, their vectors or the content of the notes
    # that fit: all were kept for these versions of the banks.
    with django_assert_num_queries(COMPOSE - 1 - 3 - 1 - 1):
        second = turn()

    assert second.blocks == first.blocks
    assert second.notes_used == first.notes_used


@pytest.mark.parametrize("rows", ROWS)
def test_a_turn_through_the_api_makes_as_many_queries_for_30_rows_as_for_3(
    tenant, person, actor, conversation, index_inline, rows, django_assert_num_queries
):
    long_memory(tenant, person, actor, conversation, index_inline, rows)
    assert tenant.client.get("/api/v1/me").status_code == 200
    queries = (
        AUTH
        + 1  # the person, by the id the agent gave
        # The message, in one round trip that also finds the conversation named (this agent's with
        # this person only): UPDATE its counters for the curator, which locks it so orders never
        # collide, then INSERT the message after the last one (INSERT ... SELECT max(order) + 1):
        # two statements, sent together (config.prepared.run_together)
        + 2
        + COMPOSE
        + 1  # INSERT the turn, with its costs and the notes it used
        # After the response is sent (request_finished): the message's vector, the one the
        # composer computed for it, stored in one statement (the worker does not embed it again);
        + 1
        # then the retrieval audit writes its read:
        + 1  # the conversations of the turn's passages
        + 2  # SAVEPOINT / RELEASE: the audit's insert is atomic
        + 1  # INSERT the pending reads, all in one statement
    )

    with django_assert_num_queries(queries):
        answer = tenant.client.post(
            "/api/v1/turns",
            {"person": "ada", "conversation": conversation.pk, "scope": APOLLO,
             "message": "Tell me the lighthouse keeper story again"},
            format="json",
        )  # fmt: skip

    assert answer.status_code == 201, answer.json()
    assert {block["layer"] for block in answer.json()["blocks"]} >= {"notes", "passages", "deeper_window"}


@pytest.mark.parametrize("rows", ROWS)
def test_the_digest_makes_as_many_queries_for_30_rows_as_for_3(
    tenant, person, actor, conversation, index_inline, rows, django_assert_num_queries
):
    long_memory(tenant, person, actor, conversation, index_inline, rows)

    with django_assert_num_queries(VISIBLE_NOTES):
        digest = build_digest(team=tenant.team, person=person, agent=tenant.agent, scope=APOLLO)

    assert len(digest.entries) == min(3 * rows, 40)  # DIGEST_LIMIT
    assert [bank.address for bank in digest.full_banks] == ["user:ada"]


# --- the write path ----------------------------------------------------------------------------

# An upsert of an existing key (memory.services.notes._upsert), in the order the write sends them:
UPSERT = (
    2  # SAVEPOINT / RELEASE: the write's atomic block (BEGIN and COMMIT in production)
    + 1  # the bank, locked (SELECT ... FOR UPDATE of its row only)
    + 1  # the note, by its key
    + 1  # UPDATE of the changed fields, its repetitions and updated_at (with its language)
    + 1  # INSERT of the revision, with the bank's version raised in the same statement
)


@pytest.mark.parametrize("rows", ROWS)
def test_an_upsert_makes_as_many_queries_in_a_bank_of_30_notes_as_of_3(
    tenant, person, actor, rows, django_assert_num_queries
):
    for i in range(rows):
        remember(team=tenant.team, person=person, actor=actor, **note_fields(key=f"fact-{i}"))
    bank = Bank.objects.get(team=tenant.team, address="user:ada")

    with django_assert_num_queries(UPSERT) as captured:
        result = remember(
            team=tenant.team, person=person, actor=actor, **note_fields(key="fact-1", content="Ada moved to Bergen.")
        )

    assert result.action == "updated"
    assert Bank.objects.get(pk=bank.pk).version == bank.version + 1  # what kept the bank's notes is told, once
    revision = bank.revisions.get(note_key="fact-1", action="update")
    assert (revision.before["content"], revision.after["content"]) == ("Ada lives in Oslo.", "Ada moved to Bergen.")
    assert revision.created_at is not None
    assert revision.person_id == person.pk
    update = next(q["sql"] for q in captured.captured_queries if q["sql"].startswith('UPDATE "memory_note"'))
    assert '"content"' in update
    assert '"description"' not in update  # only what changed is written


def test_a_reply_through_the_api_reads_its_turn_s_conversation_with_the_turn(
    tenant, person, conversation, django_assert_num_queries
):
    turn = tenant.client.post("/api/v1/turns", {"person": "ada", "message": "Hello there"}, format="json").json()
    assert tenant.client.get("/api/v1/me").status_code == 200
    queries = (
        AUTH
        + 1  # the turn, this agent's only (a 404 otherwise)
        + 2  # SAVEPOINT / RELEASE: the reply is recorded atomically
        + 1  # the turn locked (its row only), read with its conversation
        + 2  # the message: UPDATE the conversation's counters, INSERT after the last order (one round trip)
        + 1  # UPDATE the turn: its reply
    )
    with django_assert_num_queries(queries):
        answer = tenant.client.post(f"/api/v1/turns/{turn['turn']}/reply", {"content": "Hi!"}, format="json")
    assert answer.status_code == 201, answer.json()
