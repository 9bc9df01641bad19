"""The demo's switch (DEMO_ENABLED), its rate limit per visitor address, and that looking stores nothing."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.sessions.models import Session
from django.db.models import Model
from django.test import Client

from accounts.demo import ensure_demo
from accounts.models import Agent, ApiKey, Person, Team
from conversations.models import Conversation, Message
from memory.models import Bank, Note, Revision
from tests.support.fixtures import HTMX

pytestmark = pytest.mark.django_db

TABLES: list[type[Model]] = [
    Team, Agent, ApiKey, Person, Bank, Note, Revision, Conversation, Message, Session, get_user_model(),
]  # fmt: skip


def row_counts() -> dict[str, int]:
    return {model.__name__: model._default_manager.count() for model in TABLES}


def test_the_demo_is_off_unless_enabled(client, settings):
    settings.DEMO_ENABLED = False
    before = row_counts()
    assert client.get("/demo/").status_code == 404
    assert client.post("/demo/say", {"message": "Hi, I'm Ada."}).status_code == 404
    assert client.post("/demo/new").status_code == 404
    assert row_counts() == before


@pytest.mark.parametrize("demo_tenant_exists", [False, True])
def test_looking_at_the_demo_stores_nothing_until_the_visitor_says_something(client, demo_on, demo_tenant_exists):
    if demo_tenant_exists:
        ensure_demo()
    before = row_counts()
    page = client.get("/demo/")
    assert page.status_code == 200
    assert 'What it knows, <span id="known-count">0</span> of 8' in page.content.decode()
    client.get("/demo/", headers=HTMX)
    client.post("/demo/new")  # nothing to end yet
    assert "Say something first." in client.post("/demo/say", {"message": "   "}, headers=HTMX).content.decode()
    assert row_counts() == before

    client.post("/demo/say", {"message": "Hi, I'm Ada."}, headers=HTMX)
    after = row_counts()
    for table in ["Conversation", "Message", "Session"]:
        assert after[table] == before[table] + 1, table
    visitor = Person.objects.get(external_id__startswith="demo-")
    assert Bank.objects.filter(person=visitor).count() == 1


def test_a_returning_visitor_looking_again_stores_nothing(client, demo_on):
    client.post("/demo/say", {"message": "Hi, I'm Ada and I live in Oslo."}, headers=HTMX)
    client.post("/demo/new", headers=HTMX)  # ends the conversation; the next message starts one
    before = row_counts()
    page = client.get("/demo/").content.decode()
    assert 'id="known-count">2</span> of 8' in page
    assert "Oslo" not in page.split('class="transcript"')[1].split("</ol>")[0]
    assert row_counts() == before
    assert Conversation.objects.filter(ended_at__isnull=True).count() == 0


def test_the_demo_is_limited_per_visitor_address(client, demo_on, settings):
    settings.DEMO_RATE = "3/hour"
    for _ in range(3):
        assert client.get("/demo/").status_code == 200

    refused = client.get("/demo/")
    assert refused.status_code == 429
    assert 1 <= int(refused["Retry-After"]) <= 3600
    assert "The demo takes at most 3 requests per hour from one address" in refused.content.decode()
    assert f"Try again in {refused['Retry-After']} seconds." in refused.content.decode()

    before = row_counts()
    said = client.post("/demo/say", {"message": "Hi, I'm Ada."}, headers=HTMX)
    assert said.status_code == 429
    fragment = said.content.decode()
    assert 'id="demo-body"' in fragment
    assert "<h1>" not in fragment  # the fragment htmx swaps in, not the page
    assert "The demo takes at most 3 requests per hour" in fragment
    assert row_counts() == before  # refused before anything is stored

    elsewhere = Client(REMOTE_ADDR="10.1.2.3")
    assert elsewhere.get("/demo/").status_code == 200


def test_a_message_over_the_forms_limit_is_refused_not_cut(client, demo_on):
    before = row_counts()
    page = client.post("/demo/say", {"message": "x" * 2001}, headers=HTMX).content.decode()
    assert "Keep a message to 2,000 characters; this one has 2,001." in page
    assert row_counts() == before


def test_a_message_postgres_cannot_store_is_refused_with_a_message_not_a_500(client, demo_on):
    before = row_counts()
    said = client.post("/demo/say", {"message": "I live in Oslo\x00"}, headers=HTMX)
    assert said.status_code == 200
    assert "The message contains a NUL character (U+0000)" in said.content.decode()
    assert row_counts() == before
