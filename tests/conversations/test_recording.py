"""Recording a message in one round trip (the conversation found and locked, the message appended
after the last one), and the embedding tasks the writes ask for, queued once the response is sent."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from django.db import DatabaseError

from conversations.exceptions import ConversationNotFound, TurnAlreadyAnswered
from conversations.indexing import MESSAGES
from conversations.models import Conversation, Message, MessageVector, Turn
from conversations.services import (
    record_agent_message,
    record_message,
    record_reply,
    record_turn_message,
    start_conversation,
    take_turn,
)
from memory.embedders import get_embedder
from memory.indexing import IndexedModel, defer_dispatch, send_outbox, waiting_in_outbox
from tests.support.concurrency import OpenTransaction, commit_once_blocked
from tests.support.factories import AgentFactory, PersonFactory


def counts(conversation: Conversation) -> tuple[int, int]:
    conversation.refresh_from_db()
    return conversation.chars_since_curation, conversation.exchanges_since_curation


@pytest.mark.django_db
def test_an_agent_records_in_its_own_conversations_only(tenant, person, conversation, no_broker):
    first = record_agent_message(
        team=tenant.team, agent=tenant.agent, conversation_id=conversation.pk, role="user", content="Hello there"
    )
    reply = record_agent_message(
        team=tenant.team, agent=tenant.agent, conversation_id=conversation.pk, role="assistant", content="Hi!",
        external_id="reply-1",
    )  # fmt: skip
    assert first is not None
    assert reply is not None
    assert [(m.pk, m.order, m.role, m.content, m.external_id) for m in Message.objects.order_by("order")] == [
        (first.pk, 1, "user", "Hello there", ""),
        (reply.pk, 2, "assistant", "Hi!", "reply-1"),
    ]
    assert (reply.conversation.chars_since_curation, reply.conversation.exchanges_since_curation) == (14, 1)
    assert counts(conversation) == (14, 1)

    other_agent = AgentFactory(team=tenant.team)
    assert record_agent_message(
        team=tenant.team, agent=other_agent, conversation_id=conversation.pk, role="user", content="Not mine"
    ) is None  # fmt: skip
    assert record_agent_message(
        team=tenant.team, agent=tenant.agent, conversation_id=conversation.pk + 1000, role="user", content="Nowhere"
    ) is None  # fmt: skip
    assert Message.objects.count() == 2
    assert counts(conversation) == (14, 1)  # nothing counted for a message that was not recorded


@pytest.mark.django_db
def test_a_turn_records_in_the_named_conversation_of_its_agent_and_person_only(tenant, person, conversation, no_broker):
    found, message = record_turn_message(
        team=tenant.team, agent=tenant.agent, person=person, conversation_id=conversation.pk, content="Morning!"
    )
    assert found.pk == conversation.pk
    assert found.person_id == person.pk
    assert (found.chars_since_curation, message.order, message.conversation_id) == (8, 1, conversation.pk)

    someone_else = PersonFactory(team=tenant.team)
    with pytest.raises(ConversationNotFound):
        record_turn_message(
            team=tenant.team, agent=tenant.agent, person=someone_else, conversation_id=conversation.pk, content="Hi"
        )
    assert Message.objects.count() == 1
    assert counts(conversation) == (8, 0)

    # No conversation named: the latest open one, else a new one.
    again, _ = record_turn_message(
        team=tenant.team, agent=tenant.agent, person=person, conversation_id=None, content="Still here"
    )
    assert again.pk == conversation.pk
    fresh, first = record_turn_message(
        team=tenant.team, agent=tenant.agent, person=someone_else, conversation_id=None, content="New here"
    )
    assert fresh.person_id == someone_else.pk
    assert first.order == 1


@pytest.mark.django_db
def test_posting_to_a_conversation_the_agent_does_not_have_is_404_even_with_a_bad_body(tenant, person, conversation):
    other_agent = AgentFactory(team=tenant.team)
    theirs = start_conversation(team=tenant.team, agent=other_agent, person=person)
    url = f"/api/v1/conversations/{theirs.pk}/messages"
    assert tenant.client.post(url, {"role": "user", "content": "Hi"}, format="json").status_code == 404
    assert tenant.client.post(url, {"role": "robot", "content": "Hi"}, format="json").status_code == 404
    assert tenant.client.post(url, {"role": "user", "content": "x" * 16_001}, format="json").status_code == 404
    mine = f"/api/v1/conversations/{conversation.pk}/messages"
    assert tenant.client.post(mine, {"role": "user", "content": "x" * 16_001}, format="json").status_code == 422
    assert Message.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_a_message_recorded_while_another_waits_to_commit_goes_after_it(tenant, person, conversation, no_broker):
    # The other connection records and holds its transaction (and the conversation's lock) open;
    # ours blocks on the lock, and once the other commits, must append after its message.
    held = OpenTransaction(lambda: record_message(conversation=conversation, role="user", content="First").order)
    releasing = commit_once_blocked(held)
    second = record_message(conversation=conversation, role="assistant", content="Second")
    assert releasing.result() == 1
    assert second.order == 2
    assert list(Message.objects.order_by("order").values_list("order", "content")) == [(1, "First"), (2, "Second")]
    assert counts(conversation) == (len("First") + len("Second"), 1)


@pytest.mark.django_db(transaction=True)
def test_a_reply_waits_for_another_reply_to_the_same_turn_and_is_refused(tenant, person, conversation, no_broker):
    # The turn's row is locked by the first reply until it commits; the second blocks on that
    # lock, then finds the turn answered.
    turn = take_turn(
        team=tenant.team, agent=tenant.agent, person=person, message="Hello", conversation_id=conversation.pk
    ).turn
    held = OpenTransaction(lambda: record_reply(turn=turn, content="First").pk)
    releasing = commit_once_blocked(held)
    with pytest.raises(TurnAlreadyAnswered):
        record_reply(turn=turn, content="Second")
    first = releasing.result()
    assert Turn.objects.get(pk=turn.pk).reply_id == first
    assert list(Message.objects.filter(role="assistant").values_list("content", flat=True)) == ["First"]
    with pytest.raises(Turn.DoesNotExist):
        record_reply(turn=Turn(pk=turn.pk + 1000), content="Nowhere")


@pytest.mark.django_db(transaction=True)
def test_a_request_queues_its_embedding_after_the_response_in_one_task(tenant, conversation, mocker):
    dispatch = mocker.patch("memory.indexing.dispatch")
    url = f"/api/v1/conversations/{conversation.pk}/messages"
    answer = tenant.client.post(url, {"role": "user", "content": "Hello"}, format="json")
    assert answer.status_code == 201
    dispatch.assert_called_once_with(MESSAGES, [answer.json()["id"]])  # request_finished sent it
    assert waiting_in_outbox() == 0

    # Rows committed while requests are served wait together, and go in one task per model.
    dispatch.reset_mock()
    defer_dispatch()
    try:
        ids = [record_message(conversation=conversation, role="user", content=f"Line {n}").pk for n in range(3)]
        dispatch.assert_not_called()
        assert waiting_in_outbox() == 3
    finally:  # this thread serves no request after the test, whatever it asserted
        sent = send_outbox()
    assert sent == 3
    dispatch.assert_called_once_with(MESSAGES, ids)


@pytest.mark.django_db(transaction=True)
def test_with_the_broker_down_a_message_is_recorded_and_embedded_by_the_reconciler(
    tenant, conversation, mocker, caplog
):
    mocker.patch("config.celery.app.send_task", side_effect=ConnectionError("redis is down"))
    url = f"/api/v1/conversations/{conversation.pk}/messages"
    with caplog.at_level(logging.ERROR, logger="memory.indexing"):
        answer = tenant.client.post(url, {"role": "user", "content": "Remember the lighthouse"}, format="json")
    assert answer.status_code == 201
    assert "1 messages were not queued for embedding" in caplog.text
    assert waiting_in_outbox() == 0  # logged, not kept: the reconciler is what repairs
    message = Message.objects.get(pk=answer.json()["id"])
    assert not MessageVector.objects.filter(message=message).exists()
    assert MESSAGES.reconcile().indexed == 1
    assert MessageVector.objects.filter(message=message).exists()


def take_a_turn(tenant, conversation, message: str) -> Message:
    answer = tenant.client.post(
        "/api/v1/turns", {"person": "ada", "conversation": conversation.pk, "message": message}, format="json"
    )
    assert answer.status_code == 201, answer.json()
    return Turn.objects.select_related("message").get(pk=answer.json()["turn"]).message


@pytest.mark.django_db(transaction=True)
def test_a_turn_s_message_keeps_the_vector_its_composer_computed_and_queues_no_task(tenant, conversation, mocker):
    dispatch = mocker.patch("memory.indexing.dispatch")
    message = take_a_turn(tenant, conversation, "Where did I leave the lighthouse keys?")

    # Stored after the response (request_finished), from the vector the turn embedded its message
    # with: the worker is not asked to embed the same text again.
    dispatch.assert_not_called()
    assert waiting_in_outbox() == 0
    stored = MessageVector.objects.get(message=message)
    expected = get_embedder().embed([message.content])[0]
    assert stored.model == get_embedder().model
    np.testing.assert_allclose(np.asarray(stored.embedding), expected, atol=1e-6)
    assert MESSAGES.stale(rows=Message.objects.filter(pk=message.pk)).count() == 0


@pytest.mark.django_db(transaction=True)
def test_with_an_embedder_that_embeds_queries_its_own_way_a_turn_s_message_is_queued(tenant, conversation, mocker):
    mocker.patch.object(get_embedder(), "symmetric", False)  # as multilingual-e5's "query: " prefix
    dispatch = mocker.patch("memory.indexing.dispatch")
    message = take_a_turn(tenant, conversation, "Where did I leave the lighthouse keys?")

    dispatch.assert_called_once_with(MESSAGES, [message.pk])
    assert not MessageVector.objects.filter(message=message).exists()


@pytest.mark.django_db(transaction=True)
def test_a_turn_s_message_whose_vector_cannot_be_stored_is_queued_and_logged(tenant, conversation, mocker, caplog):
    mocker.patch.object(IndexedModel, "store_all_if_current", side_effect=DatabaseError("connection lost"))
    dispatch = mocker.patch("memory.indexing.dispatch")
    with caplog.at_level(logging.ERROR, logger="memory.indexing"):
        message = take_a_turn(tenant, conversation, "Where did I leave the lighthouse keys?")

    assert "1 messages' vectors could not be stored; they are queued for embedding" in caplog.text
    dispatch.assert_called_once_with(MESSAGES, [message.pk])
    assert not MessageVector.objects.filter(message=message).exists()


@pytest.mark.django_db(transaction=True)
def test_a_turn_that_fails_to_compose_leaves_its_message_queued_for_embedding(tenant, person, conversation, mocker):
    mocker.patch("conversations.services.compose", side_effect=RuntimeError("the composer broke"))
    dispatch = mocker.patch("memory.indexing.dispatch")
    with pytest.raises(RuntimeError, match="the composer broke"):
        take_turn(
            team=tenant.team, agent=tenant.agent, person=person, message="Hello?", conversation_id=conversation.pk
        )

    message = Message.objects.get(conversation=conversation)  # recorded before composing, and kept
    dispatch.assert_called_once_with(MESSAGES, [message.pk])
