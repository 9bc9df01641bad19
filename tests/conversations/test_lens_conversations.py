"""Conversations in the Memory lens, and erasing a note with the messages it was learned from.

A person reads their conversations with each agent (newest first, paginated), deletes one message
or a whole conversation (erasure: tombstones stay), sees where each note was learned from, and
deleting a note there erases its source messages too, so nothing of it is left anywhere.
"""

from __future__ import annotations

import re

import pytest

from accounts.services import get_or_create_person
from conversations.models import Conversation, Message
from conversations.services import start_conversation
from conversations.views import CONVERSATIONS_PER_PAGE
from curator.providers import RulesProvider
from curator.services import curate_conversation
from memory.models import Note
from tests.conversations.test_erasure import canary, seen_everywhere
from tests.support.canary import find_text
from tests.support.factories import chat

pytestmark = pytest.mark.django_db


def test_a_person_sees_their_conversations_newest_first_and_paginated(lens_client, tenant, person):
    for _ in range(CONVERSATIONS_PER_PAGE + 1):
        chat(start_conversation(team=tenant.team, agent=tenant.agent, person=person), [("Hi", "Hello")])
    newest_first = list(Conversation.objects.order_by("-started_at", "-pk").values_list("pk", flat=True))
    bob = get_or_create_person(team=tenant.team, external_id="bob")
    not_hers = start_conversation(team=tenant.team, agent=tenant.agent, person=bob)

    first = lens_client.get("/lens/conversations/").content.decode()
    listed = [int(pk) for pk in re.findall(r'href="/lens/conversations/(\d+)"', first)]
    assert listed == newest_first[:CONVERSATIONS_PER_PAGE]
    assert f"/lens/conversations/{not_hers.pk}" not in first
    second = lens_client.get("/lens/conversations/", {"page": 2}).content.decode()
    assert [int(pk) for pk in re.findall(r'href="/lens/conversations/(\d+)"', second)] == newest_first[-1:]
    assert lens_client.get(f"/lens/conversations/{not_hers.pk}").status_code == 404
    assert lens_client.post(f"/lens/conversations/{not_hers.pk}/delete").status_code == 404


def test_deleting_a_message_in_the_lens_leaves_a_tombstone(lens_client, tenant, person, conversation):
    word = canary()
    said = chat(conversation, [(f"My bike lock code is {word}.", "Noted."), ("I like tea.", "Good choice.")])
    url = f"/lens/conversations/{conversation.pk}"
    confirm = lens_client.get(f"{url}/messages/{said[0].pk}/delete")
    assert word in confirm.content.decode()  # the person sees what they are about to delete

    response = lens_client.post(f"{url}/messages/{said[0].pk}/delete")
    assert response.status_code == 302

    page = lens_client.get(url).content.decode()
    assert "Message erased" in page
    assert word not in page
    assert "I like tea." in page
    assert Message.objects.get(pk=said[0].pk).content == ""
    assert find_text(word) == []


def test_deleting_a_conversation_in_the_lens_erases_every_message(lens_client, tenant, person, conversation):
    word = canary()
    chat(conversation, [(f"My nickname is {word}.", f"Hi {word}!")])
    assert "All 2 messages" in lens_client.get(f"/lens/conversations/{conversation.pk}/delete").content.decode()
    assert lens_client.post(f"/lens/conversations/{conversation.pk}/delete").status_code == 302
    page = lens_client.get(f"/lens/conversations/{conversation.pk}").content.decode()
    assert page.count("Message erased") == 2
    assert seen_everywhere(tenant, word) == []
    assert find_text(word) == []


def test_a_curated_note_shows_where_it_was_learned_from_and_its_deletion_erases_them(
    lens_client, tenant, person, conversation
):
    word = canary()
    said = chat(conversation, [(f"I just moved to {word.title()}town. I really love tea.", "Welcome!")])
    curate_conversation(conversation_id=conversation.pk, provider=RulesProvider())
    home = Note.objects.get(key="home-city")
    assert word in home.content.lower()

    page = lens_client.get(f"/m/{home.pk}").content.decode()
    assert "Learned from" in page
    assert f"/lens/conversations/{conversation.pk}#message-{said[0].pk}" in page
    confirm = lens_client.get(f"/m/{home.pk}/delete").content.decode()
    assert "and the 1 message it was learned from" in confirm

    assert lens_client.post(f"/m/{home.pk}/delete").status_code == 302

    assert Message.objects.get(pk=said[0].pk).is_erased
    # The other note learned from the same message stays, pointing at the tombstone.
    tea = lens_client.get(f"/m/{Note.objects.get(key='preference-tea').pk}").content.decode()
    assert "message erased" in tea
    assert seen_everywhere(tenant, word) == []
    assert find_text(word) == []


def test_the_lens_conversation_pages_take_as_many_queries_for_many_rows_as_for_one(
    lens_client, tenant, person, django_assert_max_num_queries
):
    conversation = start_conversation(team=tenant.team, agent=tenant.agent, person=person)
    chat(conversation, [("Hi", "Hello")])
    with django_assert_max_num_queries(12) as few:
        lens_client.get("/lens/conversations/")
        lens_client.get(f"/lens/conversations/{conversation.pk}")
    for _ in range(8):
        chat(start_conversation(team=tenant.team, agent=tenant.agent, person=person), [("Hi", "Hello")] * 5)
    chat(conversation, [("More", "Yes")] * 10)
    with django_assert_max_num_queries(len(few.captured_queries)):
        lens_client.get("/lens/conversations/")
        lens_client.get(f"/lens/conversations/{conversation.pk}")
