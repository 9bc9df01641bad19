"""The message index never races deletes: a message deleted while it is embedded gets no vector
(and the task raises nothing), a delete that meets an index write waits for it and takes the
vector with it, and a message whose text changed while it was embedded does not get the vector of
what it used to say. Deterministic races on a second connection, see tests/support/concurrency.py.
"""

from __future__ import annotations

import pytest

from conversations.indexing import MESSAGES
from conversations.models import Conversation, Message, MessageVector
from conversations.services import delete_conversation, erase_message, record_message
from memory.embedders import HashingEmbedder
from tests.support.concurrency import (
    Background,
    MidEmbed,
    OpenTransaction,
    commit_once_blocked,
    on_other_connection,
    wait_until_blocked_on_a_lock,
)

# Writes here commit for real; their after-commit indexing goes nowhere, the tests index themselves.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("no_broker")]


@pytest.fixture
def message(conversation) -> Message:
    return record_message(conversation=conversation, role="user", content="Ada adopted a cat named Miso")


def test_a_message_deleted_while_it_is_embedded_gets_no_vector_and_nothing_raises(message):
    embedder = MidEmbed(lambda: on_other_connection(lambda: erase_message(message=Message.objects.get(pk=message.pk))))

    assert MESSAGES.index([message.pk], embedder) == 0

    assert embedder.during is None
    assert Message.objects.get(pk=message.pk).is_erased
    assert not MessageVector.objects.exists()


def test_a_delete_still_in_progress_when_the_vector_is_stored_wins_and_nothing_raises(message):
    committed = []

    def delete_and_hold_until_the_task_waits() -> None:
        deleting = OpenTransaction(lambda: erase_message(message=Message.objects.get(pk=message.pk)))
        committed.append(commit_once_blocked(deleting))

    assert MESSAGES.index([message.pk], MidEmbed(delete_and_hold_until_the_task_waits)) == 0

    committed[0].result()
    assert Message.objects.get(pk=message.pk).is_erased
    assert not MessageVector.objects.exists()


@pytest.mark.parametrize("path", ["erase_message", "delete_conversation"])
def test_a_delete_that_meets_an_index_write_in_progress_waits_and_takes_the_vector_with_it(message, path):
    embedder = HashingEmbedder()
    vector = embedder.embed([message.content])[0]
    storing = OpenTransaction(lambda: MESSAGES.store_if_current(message, vector=vector, embedder=embedder))

    if path == "erase_message":
        delete = Background(lambda: erase_message(message=Message.objects.get(pk=message.pk)))
    else:
        delete = Background(
            lambda: delete_conversation(conversation=Conversation.objects.get(pk=message.conversation_id))
        )
    wait_until_blocked_on_a_lock()  # the delete waits for the task's lock on the message
    assert storing.commit() is True
    delete.result()

    if path == "erase_message":
        assert Message.objects.get(pk=message.pk).is_erased
    else:
        assert not Message.objects.filter(pk=message.pk).exists()
    assert not MessageVector.objects.exists()


def test_a_message_whose_text_changed_while_it_was_embedded_gets_no_vector_of_the_old_text(message):
    # Messages are not edited today; erasure will blank one and keep a tombstone. Simulated here.
    def blank() -> None:
        Message.objects.filter(pk=message.pk).update(content="[erased]")

    assert MESSAGES.index([message.pk], MidEmbed(lambda: on_other_connection(blank))) == 0
    assert not MessageVector.objects.exists()
    assert list(MESSAGES.stale()) == [Message.objects.get(pk=message.pk)]
