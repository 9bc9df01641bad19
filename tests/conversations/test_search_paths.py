"""How the conversation search keeps its two halves bounded (conversations/retrieval.py): the
pair's size, the approximate (HNSW) path for meaning and when it is not taken, and common words
that score without finding."""

from __future__ import annotations

import numpy as np
import pytest
from django.db import connection

from conversations.history_import import import_conversations
from conversations.models import MessageVector
from conversations.retrieval import (
    STATISTICS,
    Scope,
    approximate_depth,
    keyword_matches,
    keyword_statement,
    run_together,
    similar_messages,
    similar_statement,
)
from conversations.services import record_message, start_conversation
from memory.indexing import namespace_for
from tests.support.factories import PersonFactory

pytestmark = pytest.mark.django_db

MODEL = "test-model-384"


@pytest.fixture(autouse=True)
def fresh_statistics():
    STATISTICS.forget()
    yield
    STATISTICS.forget()


def analyse() -> None:
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE conversations_message; ANALYZE conversations_messagevector")
    STATISTICS.forget()


def unit(vector: np.ndarray) -> np.ndarray:
    return (vector / np.linalg.norm(vector)).astype(np.float32)


def messages_with_vectors(team, agent, person, vectors: list[np.ndarray], model: str = MODEL):
    conversation = start_conversation(team=team, agent=agent, person=person)
    messages = [
        record_message(conversation=conversation, role="user", content=f"message number {i}")
        for i in range(len(vectors))
    ]
    MessageVector.objects.bulk_create(
        MessageVector(
            team_id=team.pk,
            message=message,
            namespace=namespace_for(team.pk),
            model=model,
            dim=len(vector),
            embedding=vector,
        )
        for message, vector in zip(messages, vectors, strict=True)
    )
    return messages


def clustered(rng: np.random.Generator, count: int, centres: np.ndarray) -> list[np.ndarray]:
    return [unit(centres[i % len(centres)] + 0.3 * rng.standard_normal(384)) for i in range(count)]


def test_the_pair_size_counts_every_conversation_recorded_and_imported(tenant, person):
    first = start_conversation(team=tenant.team, agent=tenant.agent, person=person)
    for i in range(3):
        record_message(conversation=first, role="user", content=f"hello {i}")
    import_conversations(
        team=tenant.team,
        agent=tenant.agent,
        items=[
            {
                "person": person.external_id,
                "external_id": "old",
                "messages": [
                    {
                        "role": "user",
                        "content": f"old {i}",
                        "external_id": f"old-{i}",
                        "created_at": f"2024-01-0{i + 1}T10:00:00+00:00",
                    }
                    for i in range(5)
                ],
            }
        ],
    )
    other = start_conversation(team=tenant.team, agent=tenant.agent, person=PersonFactory(team=tenant.team))
    record_message(conversation=other, role="user", content="someone else")
    assert Scope.of(tenant.agent, person).messages == 8


def test_a_large_pair_is_searched_through_the_index_and_finds_what_the_exact_scan_finds(
    tenant, other_tenant, person, settings
):
    rng = np.random.default_rng(7)
    centres = rng.standard_normal((12, 384))
    messages = messages_with_vectors(tenant.team, tenant.agent, person, clustered(rng, 240, centres))
    # Another team's vectors, the closest of all to the query, are in the same index.
    stranger = PersonFactory(team=other_tenant.team)
    query = unit(centres[3])
    messages_with_vectors(other_tenant.team, other_tenant.agent, stranger, [query] * 20)
    analyse()
    scope = Scope.of(tenant.agent, person)

    settings.SEARCH_EXACT_UP_TO = 1_000_000
    exact, exact_path = similar_messages(scope, query, model=MODEL, width=384, limit=20)
    settings.SEARCH_EXACT_UP_TO = 100
    approximate, path = similar_messages(scope, query, model=MODEL, width=384, limit=20)

    assert (exact_path, path) == ("exact", "approximate")
    mine = {m.pk for m in messages}
    assert {row[0] for row in approximate} <= mine
    assert len(approximate) == 20
    found = {row[0] for row in approximate} & {row[0] for row in exact}
    assert len(found) >= 18  # approximate, but close to exact on clustered vectors
    assert approximate[0][0] == exact[0][0]
    assert [row[6] for row in approximate] == sorted((row[6] for row in approximate), reverse=True)


def ef_search() -> str | None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('hnsw.ef_search', true)")
        return cursor.fetchone()[0]


def check_the_approximate_depth_lasts_one_search(tenant, person, settings) -> None:
    rng = np.random.default_rng(5)
    centre = rng.standard_normal((1, 384))
    messages_with_vectors(tenant.team, tenant.agent, person, clustered(rng, 240, centre))
    analyse()
    settings.SEARCH_EXACT_UP_TO = 100
    scope = Scope.of(tenant.agent, person)
    assert approximate_depth(scope, 384) == 120  # the pair is the whole index: 100 wanted, and a fifth more
    before = ef_search()
    rows, path = similar_messages(scope, unit(centre[0]), model=MODEL, width=384, limit=100)
    # hnsw.ef_search is 40 unless set: 100 rows from one index scan mean the depth was in force.
    assert (path, len(rows)) == ("approximate", 100)
    assert ef_search() == before  # and it was put back once the search was done


def test_the_approximate_depth_lasts_one_search_inside_a_transaction(tenant, person, settings):
    check_the_approximate_depth_lasts_one_search(tenant, person, settings)


@pytest.mark.django_db(transaction=True)
def test_the_approximate_depth_lasts_one_search_outside_a_transaction(tenant, person, settings):
    check_the_approximate_depth_lasts_one_search(tenant, person, settings)


@pytest.mark.parametrize("exact_up_to", [1_000_000, 100])
def test_both_halves_sent_together_find_what_each_finds_alone(tenant, person, settings, exact_up_to):
    rng = np.random.default_rng(13)
    centres = rng.standard_normal((3, 384))
    messages_with_vectors(tenant.team, tenant.agent, person, clustered(rng, 240, centres))
    analyse()
    settings.SEARCH_EXACT_UP_TO = exact_up_to
    scope = Scope.of(tenant.agent, person, words="number 7 12", config="english")
    query = unit(centres[1])
    before = ef_search()

    words = keyword_statement(scope)
    assert words is not None
    meaning, path = similar_statement(scope, query, model=MODEL, width=384)
    keyword, similar = run_together([words, meaning])

    assert path == ("exact" if exact_up_to > 240 else "approximate")
    assert keyword == keyword_matches(scope)
    assert similar == similar_messages(scope, query, model=MODEL, width=384)[0]
    assert len(keyword) == 240  # "number" is in every message
    assert {row[2] for row in keyword[:2]} == {8, 13}  # and "7" and "12" in the 8th and the 13th
    assert similar
    assert ef_search() == before


def test_the_approximate_path_reads_the_hnsw_index(tenant, person, settings):
    rng = np.random.default_rng(3)
    messages_with_vectors(tenant.team, tenant.agent, person, clustered(rng, 60, rng.standard_normal((4, 384))))
    analyse()
    vector = "[" + ",".join(["0.05"] * 384) + "]"
    with connection.cursor() as cursor:
        # 60 rows are cheaper read in full and sorted; 100,000 are not (bench locomo).
        cursor.execute("SET enable_seqscan = off; SET enable_bitmapscan = off; SET enable_sort = off")
        cursor.execute(
            "EXPLAIN SELECT message_id FROM conversations_messagevector v WHERE v.dim = 384 "
            "ORDER BY v.embedding::vector(384) <=> %s::vector(384) LIMIT 100",
            [vector],
        )
        plan = "\n".join(row[0] for row in cursor.fetchall())
        cursor.execute("RESET enable_seqscan; RESET enable_bitmapscan; RESET enable_sort")
    assert "messagevector_embedding_384_hnsw" in plan


def test_a_pair_holding_little_of_the_index_and_a_width_without_one_are_scanned_exactly(tenant, person, settings):
    rng = np.random.default_rng(11)
    centres = rng.standard_normal((6, 384))
    pair = clustered(rng, 30, centres)
    messages_with_vectors(tenant.team, tenant.agent, person, pair)
    crowd = PersonFactory(team=tenant.team)
    messages_with_vectors(tenant.team, tenant.agent, crowd, clustered(rng, 400, centres))
    analyse()
    settings.SEARCH_EXACT_UP_TO = 10
    scope = Scope.of(tenant.agent, person)
    query = unit(centres[0])
    rows, path = similar_messages(scope, query, model=MODEL, width=384, limit=50)
    assert path == "exact"  # 30 of 430 vectors: the index could not give 100 of the pair's in one scan
    above_floor = sum(float(vector @ query) > settings.VECTOR_FLOOR for vector in pair)
    assert 0 < len(rows) == above_floor  # every one of the pair's above the floor, none of the crowd's
    _, wide = similar_messages(Scope.of(tenant.agent, crowd), unit(rng.standard_normal(512)), model="other", width=512)
    assert wide == "exact"


def test_a_common_word_scores_the_messages_rarer_words_find_but_finds_none_itself(
    tenant, person, settings, django_assert_num_queries
):
    conversation = start_conversation(team=tenant.team, agent=tenant.agent, person=person)
    for i in range(40):
        record_message(conversation=conversation, role="user", content=f"The weather was mild on day {i}")
    both = record_message(conversation=conversation, role="user", content="A zebra stood in the weather")
    zebra = record_message(conversation=conversation, role="user", content="I saw a zebra at the zoo")
    analyse()
    scope = Scope.of(tenant.agent, person, words="weather zebra", config="english")

    settings.SEARCH_COMMON_WORD_MESSAGES = 10  # "weather" is in 41 of 42 messages
    pruned = keyword_matches(scope)
    assert [row[0] for row in pruned] == [both.pk, zebra.pk]
    assert pruned[0][6] > pruned[1][6]  # "weather" still scores
    with django_assert_num_queries(1):  # the statistics and the pair's count of "weather" are kept
        assert keyword_matches(scope) == pruned

    settings.SEARCH_COMMON_WORD_MESSAGES = 1_000
    exact = keyword_matches(scope)
    assert len(exact) == 42
    assert [row[0] for row in exact[:2]] == [both.pk, zebra.pk]
    assert exact[0][6] == pytest.approx(pruned[0][6], rel=0.2)  # the estimate is near the count

    settings.SEARCH_COMMON_WORD_MESSAGES = 10
    only_common = keyword_matches(Scope.of(tenant.agent, person, words="weather", config="english"))
    assert len(only_common) == 41  # every word common: the least common one still finds


def test_a_word_common_in_another_teams_messages_still_finds_in_a_pair_that_rarely_says_it(
    tenant, other_tenant, person, settings
):
    elsewhere = start_conversation(
        team=other_tenant.team, agent=other_tenant.agent, person=PersonFactory(team=other_tenant.team)
    )
    for i in range(60):
        record_message(conversation=elsewhere, role="user", content=f"The lighthouse keeper wrote log {i}")
    conversation = start_conversation(team=tenant.team, agent=tenant.agent, person=person)
    for i in range(20):
        record_message(conversation=conversation, role="user", content=f"Groceries for day {i}")
    lighthouse = record_message(conversation=conversation, role="user", content="We toured a lighthouse once")
    analyse()
    settings.SEARCH_COMMON_WORD_MESSAGES = 10  # "lighthouse" is in most messages of the table, once in this pair
    scope = Scope.of(tenant.agent, person, words="lighthouse groceries", config="english")
    found = [row[0] for row in keyword_matches(scope)]
    # Judged by the whole table "lighthouse" would only score; this pair says it once, so it finds.
    assert found[0] == lighthouse.pk
    assert len(found) == 21  # and the groceries, which the table's statistics call rare, find too


def test_a_pair_the_statistics_do_not_count_yet_is_scanned_exactly(tenant, person, settings):
    analyse()  # counted before any of these vectors existed
    rng = np.random.default_rng(5)
    messages_with_vectors(tenant.team, tenant.agent, person, clustered(rng, 60, rng.standard_normal((3, 384))))
    settings.SEARCH_EXACT_UP_TO = 10
    _, path = similar_messages(Scope.of(tenant.agent, person), unit(rng.standard_normal(384)), model=MODEL, width=384)
    assert path == "exact"
    analyse()
    _, path = similar_messages(Scope.of(tenant.agent, person), unit(rng.standard_normal(384)), model=MODEL, width=384)
    assert path == "approximate"


@pytest.mark.parametrize(("exact_up_to", "expected"), [(1_000_000, "exact"), (100, "approximate")])
def test_the_meaning_half_joins_by_id_for_a_team_the_statistics_do_not_know(
    tenant, other_tenant, person, settings, exact_up_to, expected
):
    """A team newer than Postgres' statistics looks empty to the planner. Each path must still join
    a vector and its message by id, never a row against every message (or vector) of the team by
    the team's index with the message id as a filter: that cost the pair's (or the neighbours')
    count times the team's (20-40 ms a turn for a pair of 640 messages)."""
    rng = np.random.default_rng(7)
    centres = rng.standard_normal((12, 384))
    stranger = PersonFactory(team=other_tenant.team)
    messages_with_vectors(other_tenant.team, other_tenant.agent, stranger, clustered(rng, 600, centres))
    analyse()  # the statistics know the other team only
    mine = messages_with_vectors(tenant.team, tenant.agent, person, clustered(rng, 200, centres))
    settings.SEARCH_EXACT_UP_TO = exact_up_to
    statement, path = similar_statement(Scope.of(tenant.agent, person), unit(centres[3]), model=MODEL, width=384)
    select = next(part for part in statement.sql.split(";") if "SELECT" in part)
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, COSTS OFF) " + select, statement.params)
        plan = [row[0] for row in cursor.fetchall()]
    rows = run_together([statement])[0]

    assert path == expected
    joined_by_filter = [line for line in plan if "Join Filter" in line and "message_id" in line]
    assert not joined_by_filter, "\n".join(plan)
    assert rows  # and it finds the pair's close messages, only theirs
    assert {row[0] for row in rows} <= {message.pk for message in mine}
