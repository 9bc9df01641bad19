"""A kept pair's sync outside a transaction block (conversations.kept_pairs._SYNC): a conversation
whose row is still the version kept is not probed, so every way a conversation changes must reach
the next search through its row. These tests commit (the rest of the kept-pair tests run inside the
test's transaction, where every conversation is probed)."""

from __future__ import annotations

import pytest
from django.db import transaction

from conversations import kept_pairs
from conversations.history_import import import_conversations
from conversations.queries import search_messages
from conversations.services import end_conversation, erase_message, record_message, start_conversation
from memory.indexing import IndexedModel

pytestmark = pytest.mark.django_db(transaction=True)

LINES = [
    ("user", "We sailed to the island on Saturday and the ferry was late"),
    ("assistant", "How was the weather on the island?"),
    ("user", "Max the greyhound hates boats, he stayed home with my sister"),
]


@pytest.fixture(autouse=True)
def no_embedding_tasks(monkeypatch):
    # Committed messages would queue embedding tasks in Redis for the tests after these.
    monkeypatch.setattr(IndexedModel, "schedule", lambda self, *args, **kwargs: None)
    monkeypatch.setattr(IndexedModel, "schedule_many", lambda self, *args, **kwargs: None)


@pytest.fixture
def three(tenant, person):
    conversations = [start_conversation(team=tenant.team, agent=tenant.agent, person=person) for _ in range(3)]
    for conversation in conversations:
        for role, text in LINES:
            record_message(conversation=conversation, role=role, content=text)
    return conversations


@pytest.fixture
def reads(monkeypatch):
    """The conversations each sync brought back (kind 0 rows), one list per read."""
    seen: list[list[int]] = []
    real = kept_pairs._read

    def read(*args, **kwargs):
        rows = real(*args, **kwargs)
        seen.append(sorted(row[1] for row in rows if row[0] == 0))
        return rows

    monkeypatch.setattr(kept_pairs, "_read", read)
    return seen


def kept_pair(agent, person):
    return kept_pairs._pairs.get((agent.team_id, agent.pk, person.pk))


def found(tenant, person, query):
    return [hit.message.content for hit in search_messages(agent=tenant.agent, person=person, query=query)]


def test_only_the_conversations_written_since_come_back_and_what_was_said_is_found(tenant, person, three, reads):
    assert found(tenant, person, "kayak paddle") == []
    assert reads[-1] == sorted(conversation.pk for conversation in three)  # the first read: all of them
    kept = kept_pair(tenant.agent, person)
    found(tenant, person, "island ferry")
    assert reads[-1] == []  # nothing changed: no conversation comes back
    record_message(conversation=three[1], role="user", content="I bought a kayak and a paddle")
    newer = start_conversation(team=tenant.team, agent=tenant.agent, person=person)
    record_message(conversation=newer, role="user", content="The kayak tipped over in the fjord")
    assert sorted(found(tenant, person, "kayak paddle")) == [
        "I bought a kayak and a paddle",
        "The kayak tipped over in the fjord",
    ]
    assert reads[-1] == sorted([three[1].pk, newer.pk])
    assert kept_pair(tenant.agent, person) is kept  # appended to, not read again
    assert len(kept) == 3 * len(LINES) + 2


def test_a_write_to_a_conversation_that_adds_nothing_keeps_its_rows(tenant, person, three, reads):
    found(tenant, person, "island")
    kept = kept_pair(tenant.agent, person)
    end_conversation(conversation=three[0])  # its row changes, its messages do not
    assert found(tenant, person, "greyhound boats")
    assert reads[-1] == [three[0].pk]
    assert kept_pair(tenant.agent, person) is kept
    assert kept.dead == 0  # nothing read again


def test_an_erasure_committed_by_another_process_is_found_out(tenant, person, three, monkeypatch):
    found(tenant, person, "greyhound")
    kept = kept_pair(tenant.agent, person)
    secret = record_message(conversation=three[2], role="user", content="My locker code is zebra")
    assert found(tenant, person, "locker zebra") == ["My locker code is zebra"]
    monkeypatch.setattr(kept_pairs, "forget_conversations", lambda ids: None)  # this process is not told
    erase_message(message=secret)
    assert found(tenant, person, "locker zebra") == []
    assert kept_pair(tenant.agent, person) is kept
    assert "zebra" not in kept.holding
    assert not kept.alive.view()[kept.ids.view() == secret.pk].any()


def test_a_message_kept_inside_a_transaction_that_rolled_back_is_found_out(tenant, person, three):
    found(tenant, person, "island")

    def kept_then_rolled_back() -> None:
        with transaction.atomic():
            record_message(conversation=three[0], role="user", content="We paddled a kayak across the lake")
            assert found(tenant, person, "kayak lake")  # kept meanwhile
            raise RuntimeError("rolled back")

    with pytest.raises(RuntimeError):
        kept_then_rolled_back()
    assert found(tenant, person, "kayak lake") == []  # nothing written since: the row's version tells
    kept = kept_pair(tenant.agent, person)
    assert "kayak" not in kept.holding
    with pytest.raises(RuntimeError):
        kept_then_rolled_back()
    real = record_message(conversation=three[0], role="user", content="We paddled a canoe across the river")
    assert real.order == len(LINES) + 1  # the order the rolled-back message had
    assert found(tenant, person, "canoe river lake") == ["We paddled a canoe across the river"]
    kept = kept_pair(tenant.agent, person)
    assert "kayak" not in kept.holding
    assert "river" in kept.holding


@pytest.mark.parametrize("searched_again_inside", [True, False])
def test_writes_and_searches_in_one_transaction_see_each_other_and_are_found_once_it_commits(
    tenant, person, three, searched_again_inside
):
    found(tenant, person, "island")
    both = ["The kayak was bright orange", "We rented a kayak in Tromso"]
    with transaction.atomic():
        record_message(conversation=three[0], role="user", content="We rented a kayak in Tromso")
        assert found(tenant, person, "kayak") == ["We rented a kayak in Tromso"]
        # Written after that search, under the same row version as the one it saw.
        record_message(conversation=three[0], role="user", content="The kayak was bright orange")
        if searched_again_inside:
            assert sorted(found(tenant, person, "kayak")) == both
    assert sorted(found(tenant, person, "kayak")) == both


def imported(tenant, person, *said: tuple[str, str, str]) -> None:
    """(content, created_at, external_id) messages imported into one conversation, "old-chat"."""
    messages = [
        {"role": "user", "content": content, "created_at": created_at, "external_id": external_id}
        for content, created_at, external_id in said
    ]
    line = {"person": person.external_id, "external_id": "old-chat", "messages": messages}
    import_conversations(team=tenant.team, agent=tenant.agent, items=[line])


def test_an_import_into_a_kept_pair_is_read_by_the_next_search(tenant, person, three):
    found(tenant, person, "island")
    kept = kept_pair(tenant.agent, person)
    imported(
        tenant,
        person,
        ("We rented a kayak in Tromso", "2024-05-08T13:56:00+00:00", "m1"),
        ("The fjord was frozen", "2024-05-09T13:56:00+00:00", "m2"),
    )
    assert found(tenant, person, "kayak Tromso") == ["We rented a kayak in Tromso"]
    imported(tenant, person, ("The fjord thawed in May", "2024-05-10T13:56:00+00:00", "m3"))
    # A conversation matched this time: its row is written again with its new messages.
    assert sorted(found(tenant, person, "fjord")) == ["The fjord thawed in May", "The fjord was frozen"]
    assert kept_pair(tenant.agent, person) is kept
