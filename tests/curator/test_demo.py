"""The demo (seed 001): the four things to try, with the offline rules provider."""

from __future__ import annotations

import pytest

from memory.models import Note, Revision
from tests.support.fixtures import HTMX

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("demo_on")]


def say(client, text):
    response = client.post("/demo/say", {"message": text}, headers=HTMX)
    assert response.status_code == 200
    return response.content.decode()


def test_the_page_says_when_no_model_is_configured(client):
    page = client.get("/demo/").content.decode()
    assert 'What it knows, <span id="known-count">0</span> of 8' in page
    assert "No language model is configured" in page
    assert "Nothing yet." in page


def test_the_four_things_to_try(client):
    # 01: name and where you live, then a new conversation.
    panel = say(client, "Hi, I'm Ada and I live in Oslo.")
    assert 'id="known-count">2</span> of 8' in panel
    assert "Their name is Ada." in panel
    client.post("/demo/new", headers=HTMX)
    fresh = client.get("/demo/").content.decode()
    assert "I live in Oslo" not in fresh.split('class="transcript"')[1].split("</ol>")[0]  # a new conversation
    assert 'id="known-count">2</span>' in fresh

    # 02: ask where you live: the model is given the memories and nothing of the conversation.
    answer = say(client, "Where do I live?")
    given = answer.split('class="given"')[1]
    assert "Lives in Oslo." in given
    assert "I&#x27;m Ada and I live in Oslo" not in given

    # 03: say you moved: the row changes rather than a second one appear.
    moved = say(client, "I moved to Bergen.")
    assert 'id="known-count">2</span>' in moved
    assert "Corrected <strong>home-city</strong>" in moved
    assert Note.objects.filter(key="home-city").count() == 1

    # 04: nine unrelated things: what it decides to lose is on the screen.
    for text in [
        "I'm allergic to peanuts", "I work at Acme", "I have a dog named Pixel", "I love sailing",
        "I hate mornings", "I enjoy jazz", "I like tea", "I'm vegetarian", "I'm on the train",
    ]:  # fmt: skip
        panel = say(client, text)
    assert 'id="known-count">8</span> of 8' in panel
    # The train, refused: the allergy stays.
    assert "Did not keep a new passing state (current-state): it keeps at most 8 things" in panel
    assert Note.objects.filter(key="allergy-peanuts").exists()
    assert Revision.objects.filter(action="evict").count() >= 1


def test_visitors_do_not_see_each_others_memories(client, django_user_model):
    from django.test import Client

    say(client, "Hi, I'm Ada and I live in Oslo.")
    other = Client().get("/demo/").content.decode()
    assert "Ada" not in other.split('class="known"')[1]


def test_the_page_works_without_javascript(client):
    response = client.post("/demo/say", {"message": "Hi, I'm Ada."})
    assert response.status_code == 200
    assert "<h1>Close the conversation" in response.content.decode()
    assert client.post("/demo/new").status_code == 302
