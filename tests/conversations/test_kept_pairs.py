"""What the conversation search keeps of each pair (conversations.kept_pairs): the same answers as
the search in SQL, brought up to date by every search, and nothing of an erased message kept."""

from __future__ import annotations

import numpy as np
import pytest

from conversations import kept_pairs
from conversations.indexing import MESSAGES
from conversations.models import Conversation, MessageVector
from conversations.queries import rank_candidates, search_messages
from conversations.services import delete_conversation, erase_message, record_message, start_conversation
from memory.indexing import IndexedModel
from memory.vectors import forget_query_vectors
from tests.support.factories import AgentFactory, PersonFactory

pytestmark = pytest.mark.django_db

SAID = [
    ("user", "We sailed to the island on Saturday and the ferry was late"),
    ("assistant", "How was the weather on the island?"),
    ("user", "Rain all morning, then sun over the harbour"),
    ("assistant", "Did you take the dog sailing?"),
    ("user", "Max the greyhound hates boats, he stayed home with my sister"),
    ("assistant", "Your sister lives in Bergen, right?"),
    ("user", "Yes, Bergen, near the fish market and the harbour"),
    ("assistant", "Any plans for the island again?"),
    ("user", "Next month, if the weather holds and the ferry runs"),
]
QUERIES = [
    "island ferry",
    "what did the weather do on the island",
    "sister Bergen harbour",
    "greyhound boats",
    "sun rain harbour ferry island weather",
    "nothing matches zebra",
]


def said(conversation, lines=SAID):
    return [record_message(conversation=conversation, role=role, content=text) for role, text in lines]


def ranked(agent, person, query):
    found = rank_candidates(agent=agent, person=person, query=query)
    return found.best_first, found.totals


def kept_pair(agent, person):
    return kept_pairs._pairs.get((agent.team_id, agent.pk, person.pk))


@pytest.fixture
def embedded(tenant, person, conversation, index_inline):
    with index_inline():
        messages = said(conversation)
    return messages


def test_the_kept_pair_ranks_exactly_as_the_search_in_sql(tenant, person, embedded, settings):
    in_process = {query: ranked(tenant.agent, person, query) for query in QUERIES}
    assert kept_pair(tenant.agent, person) is not None
    assert kept_pair(tenant.agent, person).vectors_kind == "exact"  # both halves ran here
    settings.SEARCH_KEPT_MESSAGES = 0
    kept_pairs.forget_kept_pairs()
    for query in QUERIES:
        best_first, totals = ranked(tenant.agent, person, query)
        assert in_process[query][0] == best_first, query
        assert in_process[query][1] == pytest.approx(totals, abs=1e-5), query
    assert kept_pair(tenant.agent, person) is None  # nothing kept at 0
    assert any(in_process[query][0] for query in QUERIES)


def test_each_search_reads_what_was_said_since(tenant, person, conversation, embedded, index_inline):
    assert search_messages(agent=tenant.agent, person=person, query="kayak paddle") == []
    kept = kept_pair(tenant.agent, person)
    with index_inline():
        late = record_message(conversation=conversation, role="user", content="I bought a kayak and a paddle")
        other = start_conversation(team=tenant.team, agent=tenant.agent, person=person)
        newer = record_message(conversation=other, role="user", content="The kayak tipped over in the fjord")
    found = search_messages(agent=tenant.agent, person=person, query="kayak paddle")
    assert [hit.message.pk for hit in found] == [late.pk, newer.pk]
    assert kept_pair(tenant.agent, person) is kept  # appended to, not read again
    assert len(kept) == len(SAID) + 2
    assert kept.conversations.keys() == {conversation.pk, other.pk}


def test_a_vector_stored_after_its_message_was_kept_is_found_by_meaning(
    tenant, person, conversation, index_inline, mocker
):
    message = said(conversation, [("user", "We talked about the weather")])[0]
    query = "anything at all in other words"  # shares no word: only the vector can find it
    assert search_messages(agent=tenant.agent, person=person, query=query) == []
    kept = kept_pair(tenant.agent, person)
    assert kept is not None
    assert kept.missing == [0]
    assert MESSAGES.index([message.pk]) == 1  # the embedding task, after the search kept the message
    stored = np.array(MessageVector.objects.get(message=message).embedding, dtype=np.float32)
    mocker.patch("memory.vectors.embed_query", return_value=(stored, ""))
    forget_query_vectors()  # the first search's own vector of the query is kept
    assert [hit.message.pk for hit in search_messages(agent=tenant.agent, person=person, query=query)] == [message.pk]
    assert kept_pair(tenant.agent, person) is kept
    assert kept.missing == []


def test_a_backlog_of_vectors_is_caught_up_a_share_at_a_time(tenant, person, conversation, settings, monkeypatch):
    monkeypatch.setattr(kept_pairs, "PROBE", 4)
    settings.EMBEDDER = "none"
    messages = said(conversation)
    settings.EMBEDDER = "hashing"
    search_messages(agent=tenant.agent, person=person, query="island")
    kept = kept_pair(tenant.agent, person)
    assert len(kept.missing) == len(SAID)
    assert MESSAGES.index([m.pk for m in messages]) == len(SAID)
    searches = 0
    while kept.missing:
        search_messages(agent=tenant.agent, person=person, query="island")
        searches += 1
        assert searches <= len(SAID)  # every search finds some, newest and oldest alike
    assert bool(kept.present.view().all())
    assert searches > 1  # a few at a time: never the whole backlog at once


def test_an_erasure_elsewhere_makes_the_next_search_read_that_conversation_again(
    tenant, person, conversation, embedded, settings
):
    other = start_conversation(team=tenant.team, agent=tenant.agent, person=person)
    said(other, SAID + SAID[:3])  # more than the erased conversation: its rows dying leave most alive
    assert search_messages(agent=tenant.agent, person=person, query="greyhound boats")
    kept = kept_pair(tenant.agent, person)
    assert "boat" in kept.holding
    # Erased in another process: this one's commit hook does not run here (no on_commit in a test
    # transaction), so only Conversation.erasures tells the search.
    erase_message(message=embedded[4])
    assert Conversation.objects.get(pk=conversation.pk).erasures == 1
    after = {query: ranked(tenant.agent, person, query) for query in QUERIES}
    assert kept_pair(tenant.agent, person) is kept  # the erased conversation read again, not the pair
    assert "boat" in kept.holding  # said in the other conversation too
    assert len(kept.holding["boat"].read()) == 1  # the erased message's is gone from memory
    assert embedded[4].pk not in kept.ids.view()[kept.alive.view()]
    assert not kept.present.view()[kept.ids.view() == embedded[4].pk].any()
    # ... and the pair ranks as the search in SQL does, the tombstone counted as SQL counts it.
    settings.SEARCH_KEPT_MESSAGES = 0
    for query in QUERIES:
        best_first, totals = ranked(tenant.agent, person, query)
        assert after[query][0] == best_first, query
        assert after[query][1] == pytest.approx(totals, abs=1e-5), query


def test_a_message_rolled_back_after_a_search_kept_it_is_found_out(tenant, person, conversation, embedded):
    from django.db import transaction

    def kept_then_rolled_back() -> None:
        with transaction.atomic():
            record_message(conversation=conversation, role="user", content="We paddled a kayak across the lake")
            assert search_messages(agent=tenant.agent, person=person, query="kayak lake")  # kept meanwhile
            raise RuntimeError("rolled back")

    with pytest.raises(RuntimeError):
        kept_then_rolled_back()
    real = record_message(conversation=conversation, role="user", content="We paddled a canoe across the river")
    assert real.order == len(SAID) + 1  # the order the rolled-back message had
    found = search_messages(agent=tenant.agent, person=person, query="canoe river")
    assert [hit.message.pk for hit in found][:1] == [real.pk]
    kept = kept_pair(tenant.agent, person)
    assert "kayak" not in kept.holding
    assert "lake" not in kept.holding
    assert "river" in kept.holding


def test_an_import_into_a_kept_pair_is_read_by_the_next_search(tenant, person, conversation, embedded):
    from conversations.history_import import import_conversations

    search_messages(agent=tenant.agent, person=person, query="island")
    kept = kept_pair(tenant.agent, person)
    import_conversations(
        team=tenant.team,
        agent=tenant.agent,
        items=[
            {"person": person.external_id, "external_id": "old-chat", "messages": [
                {"role": "user", "content": "We rented a kayak in Tromso", "created_at": "2024-05-08T13:56:00+00:00", "external_id": "m1"},
                {"role": "assistant", "content": "How cold was the water?", "created_at": "2024-05-08T13:57:00+00:00", "external_id": "m2"},
            ]},
        ],
    )  # fmt: skip
    found = search_messages(agent=tenant.agent, person=person, query="kayak Tromso")
    assert [hit.message.content for hit in found][:1] == ["We rented a kayak in Tromso"]
    assert kept_pair(tenant.agent, person) is kept
    assert len(kept) == len(SAID) + 2


def test_words_alone_and_then_both_halves_keep_the_same_pair(tenant, person, embedded):
    from dataclasses import replace

    from conversations.queries import DEFAULT_RANKING

    search_messages(agent=tenant.agent, person=person, query="island")
    kept = kept_pair(tenant.agent, person)
    rank_candidates(agent=tenant.agent, person=person, query="island", ranking=replace(DEFAULT_RANKING, meaning=False))
    search_messages(agent=tenant.agent, person=person, query="island")
    assert kept_pair(tenant.agent, person) is kept
    assert kept.vectors_kind == "exact"


def test_a_pair_that_outgrows_its_vectors_keeps_its_words(tenant, person, conversation, embedded, settings):
    search_messages(agent=tenant.agent, person=person, query="island")
    kept = kept_pair(tenant.agent, person)
    assert kept.vectors_kind == "exact"
    settings.SEARCH_KEPT_VECTORS = len(SAID)
    record_message(conversation=conversation, role="user", content="One message too many for the vectors")
    search_messages(agent=tenant.agent, person=person, query="island")
    assert kept_pair(tenant.agent, person) is kept  # not read again
    assert kept.vectors_kind is None
    assert len(kept) == len(SAID) + 1


def test_an_erasure_drops_this_process_copy_once_it_commits(
    tenant, person, embedded, django_capture_on_commit_callbacks
):
    search_messages(agent=tenant.agent, person=person, query="greyhound")
    assert kept_pair(tenant.agent, person) is not None
    with django_capture_on_commit_callbacks(execute=True):
        erase_message(message=embedded[0])
    assert kept_pair(tenant.agent, person) is None  # nothing of the pair stays in memory


def test_a_deleted_conversation_leaves_the_kept_pair(tenant, person, conversation, embedded, index_inline):
    other = start_conversation(team=tenant.team, agent=tenant.agent, person=person)
    with index_inline():
        record_message(conversation=other, role="user", content="A secret about the kayak")
    assert search_messages(agent=tenant.agent, person=person, query="kayak secret")
    kept = kept_pair(tenant.agent, person)
    delete_conversation(conversation=other)
    assert search_messages(agent=tenant.agent, person=person, query="kayak secret") == []
    assert kept_pair(tenant.agent, person) is kept
    assert "kayak" not in kept.holding
    assert "secret" not in kept.holding
    assert other.pk not in kept.conversations


def test_a_pair_too_large_to_keep_is_searched_in_sql(tenant, person, embedded, settings):
    expected = [hit.message.pk for hit in search_messages(agent=tenant.agent, person=person, query="island ferry")]
    kept_pairs.forget_kept_pairs()
    settings.SEARCH_KEPT_MESSAGES = len(SAID) - 1
    assert [hit.message.pk for hit in search_messages(agent=tenant.agent, person=person, query="island ferry")] == (
        expected
    )
    assert kept_pair(tenant.agent, person) is None


def test_a_pair_with_more_messages_than_vectors_kept_keeps_its_words_and_asks_sql_for_meaning(
    tenant, person, embedded, settings, mocker
):
    settings.SEARCH_KEPT_VECTORS = len(SAID) - 1
    stored = np.array(MessageVector.objects.get(message=embedded[2]).embedding, dtype=np.float32)
    mocker.patch("memory.vectors.embed_query", return_value=(stored, ""))
    forget_query_vectors()
    found = search_messages(agent=tenant.agent, person=person, query="anything at all in other words")
    assert found
    assert found[0].message.pk == embedded[2].pk
    kept = kept_pair(tenant.agent, person)
    assert kept is not None
    assert kept.vectors_kind is None
    assert len(kept) == len(SAID)


def test_the_least_recently_searched_pair_is_dropped_first(tenant, person, conversation, embedded, settings):
    other_person = PersonFactory(team=tenant.team)
    other_conversation = start_conversation(team=tenant.team, agent=tenant.agent, person=other_person)
    said(other_conversation)
    search_messages(agent=tenant.agent, person=person, query="island")
    search_messages(agent=tenant.agent, person=other_person, query="island")
    assert kept_pairs.kept_counts()[0] == 2 * len(SAID)
    settings.SEARCH_KEPT_MESSAGES = len(SAID) + 1
    search_messages(agent=tenant.agent, person=other_person, query="ferry")
    assert kept_pair(tenant.agent, person) is None
    assert kept_pair(tenant.agent, other_person) is not None


def test_pairs_are_kept_apart(tenant, person, conversation, embedded):
    other_agent = AgentFactory(team=tenant.team)
    conversation_of_other = start_conversation(team=tenant.team, agent=other_agent, person=person)
    record_message(conversation=conversation_of_other, role="user", content="The kayak is for the other agent")
    assert search_messages(agent=tenant.agent, person=person, query="kayak") == []
    found = search_messages(agent=other_agent, person=person, query="kayak")
    assert [hit.message.conversation_id for hit in found] == [conversation_of_other.pk]


def test_another_embedder_s_vectors_are_never_mixed_in(tenant, person, embedded, settings, index_inline):
    search_messages(agent=tenant.agent, person=person, query="island")
    assert kept_pair(tenant.agent, person).where == ("hashing-v1-256", 256)
    settings.EMBEDDING_DIM = 64
    search_messages(agent=tenant.agent, person=person, query="island")
    kept = kept_pair(tenant.agent, person)
    assert kept.where == ("hashing-v1-64", 64)
    assert len(kept.missing) == len(SAID)  # none of this model's yet


def test_an_erasure_between_the_two_reads_of_one_search_is_found_out(
    tenant, person, conversation, embedded, monkeypatch
):
    most = start_conversation(team=tenant.team, agent=tenant.agent, person=person)
    said(most, SAID * 3)  # most of the pair: the two conversations read again leave it kept
    other = start_conversation(team=tenant.team, agent=tenant.agent, person=person)
    secret = record_message(conversation=other, role="user", content="My locker code is zebra")
    assert search_messages(agent=tenant.agent, person=person, query="locker code zebra")
    kept = kept_pair(tenant.agent, person)
    erase_message(message=embedded[0])  # the first read finds this conversation stale...
    reads = []
    real_read = kept_pairs._read

    def read_then_erase(*args, **kwargs):
        rows = real_read(*args, **kwargs)
        reads.append(len(rows))
        if len(reads) == 1:  # ... and another erasure commits before the second read
            erase_message(message=secret)
        return rows

    monkeypatch.setattr(kept_pairs, "_read", read_then_erase)
    assert search_messages(agent=tenant.agent, person=person, query="locker code zebra") == []
    assert len(reads) == 3  # the second read found the other conversation stale in turn
    assert kept_pair(tenant.agent, person) is kept
    assert "zebra" not in kept.holding
    assert "locker" not in kept.holding
    assert not kept.alive.view()[kept.ids.view() == secret.pk].any()


def test_a_message_rolled_back_in_one_conversation_leaves_the_others_kept(tenant, person, conversation, embedded):
    from django.db import transaction

    other = start_conversation(team=tenant.team, agent=tenant.agent, person=person)
    said(other, SAID + SAID[:3])

    def kept_then_rolled_back() -> None:
        with transaction.atomic():
            record_message(conversation=conversation, role="user", content="We paddled a kayak across the lake")
            assert search_messages(agent=tenant.agent, person=person, query="kayak lake")
            raise RuntimeError("rolled back")

    with pytest.raises(RuntimeError):
        kept_then_rolled_back()
    kept = kept_pair(tenant.agent, person)
    record_message(conversation=conversation, role="user", content="We paddled a canoe across the river")
    search_messages(agent=tenant.agent, person=person, query="canoe river")
    assert kept_pair(tenant.agent, person) is kept  # only the conversation rolled back was read again
    assert "kayak" not in kept.holding
    assert "river" in kept.holding
    assert kept.dead == len(SAID) + 1  # its rows as first kept (the rolled-back one among them)


@pytest.mark.django_db(transaction=True)
def test_a_large_pair_is_read_on_a_thread_while_the_database_answers(tenant, person, conversation, monkeypatch):
    import time

    monkeypatch.setattr(kept_pairs, "READ_INLINE_UP_TO", len(SAID) - 1)
    threads = []
    read_soon = kept_pairs._read_soon
    monkeypatch.setattr(kept_pairs, "_read_soon", lambda *args: threads.append(args) or read_soon(*args))
    # Committed (the reading thread has a connection of its own) and embedded here: no task is
    # queued, so no wake marker is left in Redis for the tests after this one.
    monkeypatch.setattr(IndexedModel, "schedule", lambda self, pk: None)
    messages = said(conversation)
    assert MESSAGES.index([message.pk for message in messages]) == len(SAID)
    first = search_messages(agent=tenant.agent, person=person, query="island ferry")
    assert first  # answered in SQL, the pair too large to read with the search
    assert len(threads) == 1
    deadline = time.monotonic() + 30
    while kept_pair(tenant.agent, person) is None or kept_pairs.reading():
        assert time.monotonic() < deadline, "the pair was not read"
        time.sleep(0.01)
    kept = kept_pair(tenant.agent, person)
    assert len(kept) == len(SAID)
    assert kept.vectors_kind == "exact"  # small enough for its vectors
    assert bool(kept.present.view().all())
    again = search_messages(agent=tenant.agent, person=person, query="island ferry")
    assert [hit.message.pk for hit in again] == [hit.message.pk for hit in first]
    assert kept_pair(tenant.agent, person) is kept  # searched as kept, not read again


# --- a pair larger than the exact scan: its vectors kept small (conversations.quantised) ---------


def test_a_pair_larger_than_the_exact_scan_keeps_its_vectors_small_and_ranks_as_kept_whole(
    tenant, person, embedded, settings
):
    whole = {query: ranked(tenant.agent, person, query) for query in QUERIES}
    assert kept_pair(tenant.agent, person).vectors_kind == "exact"
    kept_pairs.forget_kept_pairs()
    settings.SEARCH_EXACT_UP_TO = len(SAID) - 1  # the HNSW index's pairs until now
    small = {query: ranked(tenant.agent, person, query) for query in QUERIES}
    kept = kept_pair(tenant.agent, person)
    assert kept.vectors_kind == "quantised"
    assert 0 < kept.vector_count < len(SAID)  # a third of the room
    for query in QUERIES:  # every row rescored here: only the 8-bit components' error differs
        assert small[query][0] == whole[query][0], query
        assert small[query][1] == pytest.approx(whole[query][1], abs=0.01), query


def test_a_pair_that_outgrows_the_exact_scan_keeps_the_vectors_it_has_small(
    tenant, person, conversation, embedded, settings, index_inline, mocker
):
    search_messages(agent=tenant.agent, person=person, query="island")
    kept = kept_pair(tenant.agent, person)
    assert kept.vectors_kind == "exact"
    settings.SEARCH_EXACT_UP_TO = len(SAID)
    with index_inline():
        late = record_message(conversation=conversation, role="user", content="The lighthouse keeper waved")
    for target in (embedded[2], late):  # one kept before the pair outgrew the scan, one after
        stored = np.array(MessageVector.objects.get(message=target).embedding, dtype=np.float32)
        mocker.patch("memory.vectors.embed_query", return_value=(stored, ""))
        forget_query_vectors()
        found = search_messages(agent=tenant.agent, person=person, query="anything at all in other words")
        assert found[0].message.pk == target.pk
    assert kept_pair(tenant.agent, person) is kept  # not read again
    assert kept.vectors_kind == "quantised"
    assert len(kept) == len(SAID) + 1


def test_a_pair_kept_small_drops_an_erased_conversation_s_vectors(
    tenant, person, conversation, embedded, settings, index_inline, mocker
):
    settings.SEARCH_EXACT_UP_TO = len(SAID)
    other = start_conversation(team=tenant.team, agent=tenant.agent, person=person)
    with index_inline():
        secret = record_message(conversation=other, role="user", content="A secret about the kayak")
    stored = np.array(MessageVector.objects.get(message=secret).embedding, dtype=np.float32)
    mocker.patch("memory.vectors.embed_query", return_value=(stored, ""))
    forget_query_vectors()
    assert (
        search_messages(agent=tenant.agent, person=person, query="anything at all in other words")[0].message == secret
    )
    kept = kept_pair(tenant.agent, person)
    assert kept.vectors_kind == "quantised"
    delete_conversation(conversation=other)
    found = search_messages(agent=tenant.agent, person=person, query="anything at all in other words")
    assert secret.pk not in [hit.message.pk for hit in found]
    assert kept_pair(tenant.agent, person) is kept
    row = int(np.flatnonzero(kept.ids.view() == secret.pk)[0])
    assert not kept.present.view()[row]
    assert not kept.store.codes.view()[row].any()  # its vector is gone from memory, not only hidden


def test_a_pair_too_large_to_keep_small_asks_the_index_for_meaning(tenant, person, embedded, settings):
    settings.SEARCH_EXACT_UP_TO = len(SAID) - 1
    settings.SEARCH_KEPT_VECTORS = 2  # room for 2 vectors kept whole: 7 kept small, not 9
    assert search_messages(agent=tenant.agent, person=person, query="island ferry")
    kept = kept_pair(tenant.agent, person)
    assert kept is not None
    assert kept.vectors_kind is None
    assert len(kept) == len(SAID)
