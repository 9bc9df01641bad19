"""Erasing a message or a conversation: a tombstone keeps order and role, and the text is gone from
every later turn, search, recall, export and revision, and from every column of every table.

Each case plants its own canary. The summary case runs with the broker unreachable: the summary is
cleared in the erasure's own transaction, so no rebuild has to run before the next turn is safe.
"""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from conversations.models import Conversation, Message, MessageVector
from conversations.services import erase_conversation, erase_message, record_message, take_turn
from curator.providers import ScriptedProvider
from curator.schemas import CuratorPlan
from curator.services import claim_stale_summaries, curate_conversation, rebuild_summary
from tests.support.canary import find_text, probing
from tests.support.factories import chat


def canary() -> str:
    return f"cnry{uuid.uuid4().hex[:10]}"


def seen_everywhere(tenant: Any, needle: str, *, person: str = "ada") -> list[str]:
    """Where an agent's reads still show the needle: a turn's blocks (persona aside) and messages,
    both conversation tools, the memory tools, exports and the revision log. The probe's own reads
    (queries holding the needle) leave no row in the retrieval audit."""
    with probing():
        return _seen_everywhere(tenant, needle, person=person)


def _seen_everywhere(tenant: Any, needle: str, *, person: str) -> list[str]:
    api = tenant.client
    places = []
    # Exports and the log first: they list reads, and the probe's own reads come after.
    for url in ("/api/v1/exports", "/api/v1/revisions"):
        answer = api.get(url, {"person": person})
        assert answer.status_code == 200, answer.content
        if needle.lower() in answer.content.decode().lower():
            places.append(url)
    turn = api.post(
        "/api/v1/turns", {"person": person, "message": "Where did I say I moved, and what pastries?"}, format="json"
    )
    assert turn.status_code == 201, turn.content
    body = turn.json()
    blocks = [b for b in body["blocks"] if b["layer"] != "persona"]
    if needle.lower() in json.dumps([blocks, body["messages"]]).lower():
        places.append("turn")
    calls: dict[str, dict[str, object]] = {
        "search_conversation": {"query": f"moved pastries {needle}"},
        "recent_messages": {"limit": 200},
        "recall_memories": {"query": f"moved pastries {needle}"},
        "search": {"query": f"moved pastries {needle}"},
        "recall": {"query": f"moved pastries {needle}"},
    }
    for tool, arguments in calls.items():
        answer = api.post(f"/api/v1/tools/{tool}", {"person": person, **arguments}, format="json")
        assert answer.status_code == 200, answer.content
        if needle.lower() in answer.content.decode().lower():
            places.append(tool)
    return places


@pytest.fixture
def broker_down(mocker):
    return mocker.patch("config.celery.app.send_task", side_effect=ConnectionError("redis is down"))


def curated_with_summary(conversation: Conversation, summary: str) -> None:
    provider = ScriptedProvider(curations=[CuratorPlan(summary=summary)])
    curate_conversation(conversation_id=conversation.pk, provider=provider)


def test_an_erased_message_leaves_a_tombstone_and_no_trace_even_with_the_broker_down(
    tenant, person, conversation, index_inline, broker_down, django_capture_on_commit_callbacks
):
    word = canary()
    with index_inline():
        said = chat(
            conversation,
            [(f"I just moved to {word}ville, I love the pastries there.", "Welcome to your new home!"),
             ("The weather is grey today.", "Bring an umbrella.")],
        )  # fmt: skip
    curated_with_summary(conversation, f"Ada moved to {word}ville and likes its pastries.")
    doomed = said[0]
    assert MessageVector.objects.filter(message=doomed).exists()
    assert "turn" in seen_everywhere(tenant, word)  # the test can see it before the erasure

    with django_capture_on_commit_callbacks(execute=True):
        erase_message(message=doomed)
    assert "curator.tasks.rebuild_summary" in [call.args[0] for call in broker_down.call_args_list]

    tombstone = Message.objects.get(pk=doomed.pk)
    assert (tombstone.order, tombstone.role, tombstone.content) == (doomed.order, "user", "")
    assert tombstone.erased_at is not None
    assert not MessageVector.objects.filter(message=doomed).exists()
    conversation.refresh_from_db()
    assert (conversation.summary, conversation.summary_stale) == ("", True)
    assert seen_everywhere(tenant, word) == []
    assert find_text(word) == []


def test_an_erased_conversation_keeps_only_tombstones_and_ends(tenant, person, conversation, index_inline, broker_down):
    word = canary()
    with index_inline():
        chat(conversation, [(f"My pastry shop is called {word}.", f"{word} sounds lovely!")])
    curated_with_summary(conversation, f"Ada runs {word}.")

    assert erase_conversation(conversation=conversation) == 2

    conversation.refresh_from_db()
    assert conversation.summary == ""
    assert conversation.ended_at is not None  # the next turn starts a new conversation
    rows = list(Message.objects.filter(conversation=conversation).values_list("order", "role", "content"))
    assert rows == [(1, "user", ""), (2, "assistant", "")]
    assert not MessageVector.objects.filter(message__conversation=conversation).exists()
    assert seen_everywhere(tenant, word) == []
    assert find_text(word) == []


def test_the_curator_never_reads_an_erased_message(tenant, person, conversation):
    word = canary()
    kept = record_message(conversation=conversation, role="user", content="I like tea.")
    doomed = record_message(conversation=conversation, role="user", content=f"My code word is {word}.")
    erase_message(message=doomed)
    provider = ScriptedProvider()

    curate_conversation(conversation_id=conversation.pk, provider=provider)

    assert [line.text for request in provider.seen for line in request.messages] == [kept.content]
    conversation.refresh_from_db()
    assert conversation.curated_through == doomed.order  # the tombstone counts as read


def test_a_pass_whose_messages_are_erased_meanwhile_applies_nothing_and_curates_again(
    tenant, person, conversation, mocker
):
    word = canary()
    doomed = record_message(conversation=conversation, role="user", content=f"I love {word} pastries.")
    schedule = mocker.patch("curator.services.schedule_curation")

    class ErasingProvider(ScriptedProvider):
        def curate(self, request):  # the person erases the message while the provider thinks
            erase_message(message=Message.objects.get(pk=doomed.pk))
            return super().curate(request)

    plan = CuratorPlan.model_validate(
        {"operations": [{"op": "remember", "key": "pastries", "description": "Pastries", "content": f"Likes {word}"}],
         "summary": f"Ada likes {word}."}
    )  # fmt: skip
    outcome = curate_conversation(conversation_id=conversation.pk, provider=ErasingProvider(curations=[plan]))

    assert outcome.startswith("discarded")
    schedule.assert_called_once()
    assert find_text(word) == []


def test_a_cleared_summary_is_rebuilt_from_what_is_left_and_only_the_summary(tenant, person, conversation):
    word = canary()
    said = chat(conversation, [(f"I love {word} pastries.", "Yum."), ("I live in Oslo.", "Nice.")])
    curated_with_summary(conversation, f"Ada loves {word}; lives in Oslo.")
    erase_message(message=said[0])
    provider = ScriptedProvider(
        curations=[
            CuratorPlan.model_validate(
                {"operations": [{"op": "remember", "key": "home", "description": "Home", "content": "Oslo"}],
                 "summary": "Ada lives in Oslo."}
            )
        ]
    )  # fmt: skip

    assert rebuild_summary(conversation_id=conversation.pk, provider=provider).startswith("rebuilt")

    conversation.refresh_from_db()
    assert (conversation.summary, conversation.summary_stale) == ("Ada lives in Oslo.", False)
    read = [line.text for request in provider.seen for line in request.messages]
    assert read == ["Yum.", "I live in Oslo.", "Nice."]
    assert not person.banks.exists()  # a rebuild learns no notes
    assert find_text(word) == []


def test_the_catch_up_asks_again_for_summaries_left_stale(tenant, person, conversation, mocker):
    said = chat(conversation, [("I live in Oslo.", "Nice.")])
    curated_with_summary(conversation, "Ada lives in Oslo.")
    erase_message(message=said[0])
    assert claim_stale_summaries() == []  # the rebuild asked for may still be on its way
    Conversation.objects.update(summary_updated_at=timezone.now() - timedelta(minutes=11))
    assert claim_stale_summaries() == [conversation.pk]
    assert claim_stale_summaries() == []


def test_a_turn_after_erasure_in_the_same_conversation_does_not_see_the_erased_message(tenant, person, conversation):
    word = canary()
    said = chat(conversation, [("I like tea.", "Noted."), (f"My locker code is {word}.", "Got it.")])
    erase_message(message=said[2])
    result = take_turn(
        team=tenant.team, agent=tenant.agent, person=person, message="What is my locker code?",
        conversation_id=conversation.pk,
    )  # fmt: skip
    text = json.dumps([[b.text for b in result.composition.blocks], result.composition.messages])
    assert word not in text
    assert "I like tea." in text  # the rest of the window is still there
    assert "Got it." in text


def test_a_pass_that_read_a_summary_erased_meanwhile_applies_nothing(tenant, person, conversation, mocker):
    word = canary()
    said = chat(conversation, [(f"I love {word} pastries.", "Yum.")])
    curated_with_summary(conversation, f"Ada loves {word} pastries.")
    record_message(conversation=conversation, role="user", content="The weather is fine.")
    schedule = mocker.patch("curator.services.schedule_curation")

    class ErasingProvider(ScriptedProvider):
        def curate(self, request):  # the erasure clears the summary this pass was given, and a rebuild runs
            erase_message(message=Message.objects.get(pk=said[0].pk))
            rebuild_summary(conversation_id=conversation.pk, provider=ScriptedProvider())
            return super().curate(request)

    carried = CuratorPlan(summary=f"Ada loves {word} pastries; the weather is fine.")
    outcome = curate_conversation(conversation_id=conversation.pk, provider=ErasingProvider(curations=[carried]))

    assert outcome.startswith("discarded")
    schedule.assert_called_once()
    assert find_text(word) == []


@pytest.mark.django_db
def test_an_erased_message_is_no_longer_a_kept_query_text(
    tenant, person, conversation, django_capture_on_commit_callbacks
):
    from memory.vectors import embed_query, kept_query_vector

    said = "My secret plan for the tunnel under the garden"
    message = record_message(conversation=conversation, role="user", content=said)
    embed_query(said)  # a turn embeds its message as the passages' and the notes' query
    assert kept_query_vector(said) is not None
    with django_capture_on_commit_callbacks(execute=True):
        erase_message(message=message)
    assert kept_query_vector(said) is None
