"""The curator on a real Celery worker process, against the embedded Redis and the test database."""

from __future__ import annotations

import pytest

from conversations.models import Conversation
from curator.models import ProviderCall
from memory.models import Note, Revision
from tests.support.fixtures import wait_for_worker_to_drain, wait_until

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def exchange(client, message, reply="Got it.", **extra):
    turn = client.post("/api/v1/turns", {"person": "ada", "message": message, **extra}, format="json").json()
    assert client.post(f"/api/v1/turns/{turn['turn']}/reply", {"content": reply}, format="json").status_code == 201
    return turn


def test_a_conversation_crossing_the_threshold_is_curated_exactly_once(celery_worker_process, tenant, settings):
    settings.CURATOR_EVERY_EXCHANGES = 3
    settings.CURATOR_EVERY_CHARS = 100_000
    lines = ["Hi, I'm Ada.", "I live in Oslo.", "I work at Acme.", "I love sailing."]
    turn = None
    for line in lines[:3]:
        turn = exchange(tenant.client, line)
    conversation = Conversation.objects.get(pk=turn["conversation"])
    curated = Conversation.objects.filter(pk=conversation.pk, last_curated_at__isnull=False)
    wait_until(curated.exists, worker=celery_worker_process, what="the curator pass")
    exchange(tenant.client, lines[3])  # one more exchange: below the threshold again
    wait_for_worker_to_drain(celery_worker_process)  # a second pass, had one been sent, has run by now
    conversation.refresh_from_db()
    assert ProviderCall.objects.filter(purpose="curate").count() == 1
    assert conversation.curated_through == 6
    assert conversation.exchanges_since_curation == 1
    assert set(Note.objects.values_list("key", flat=True)) == {"name", "home-city", "employer"}
    assert Revision.objects.filter(actor="curator").exclude(request_id="").count() == 3  # the task id is logged


def test_the_seed_script_on_a_worker_with_the_rules_provider(celery_worker_process, tenant):
    first = exchange(tenant.client, "Hi, I'm Ada and I live in Oslo.", "Nice to meet you, Ada!")
    ended = tenant.client.post(f"/api/v1/conversations/{first['conversation']}/end")
    assert ended.status_code == 200
    wait_until(Note.objects.filter(key="home-city").exists, worker=celery_worker_process, what="the home-city note")

    asked = tenant.client.post(
        "/api/v1/turns", {"person": "ada", "message": "Where do I live?", "profile": "memory_only"}, format="json"
    ).json()
    assert asked["conversation"] != first["conversation"]
    notes = next(block["text"] for block in asked["blocks"] if block["layer"] == "notes")
    assert "Ada" in notes
    assert "Oslo" in notes
    assert [m["content"] for m in asked["messages"]] == ["Where do I live?"]

    tenant.client.post(f"/api/v1/turns/{asked['turn']}/reply", {"content": "In Oslo."}, format="json")
    moved = exchange(tenant.client, "I moved to Bergen.", "Exciting!")
    tenant.client.post(f"/api/v1/conversations/{moved['conversation']}/end")
    moved_to_bergen = Note.objects.filter(key="home-city", content__contains="Bergen")
    wait_until(moved_to_bergen.exists, worker=celery_worker_process, what="the move to Bergen")
    assert Note.objects.filter(key="home-city").count() == 1
    assert Revision.objects.get(note_key="home-city", action="update").before["content"] == "Lives in Oslo."


def test_a_bounded_bank_of_eight_on_the_worker(celery_worker_process, tenant, person):
    """Nine unrelated facts after a name and an allergy: evictions and refusals as the policy says,
    and the train journey refused rather than pushing out the allergy."""
    from memory.services import Actor, get_or_create_bank, update_bank_settings

    bank = get_or_create_bank(team=tenant.team, person=person, scope="", kind="global")
    update_bank_settings(bank=bank, actor=Actor("admin", "test"), changes={"policy": "bounded", "capacity": 8})
    statements = [
        "Hi, I'm Ada. I'm allergic to peanuts.", "I live in Oslo", "I work at Acme", "I have a dog named Pixel",
        "I love sailing", "I hate mornings", "I enjoy jazz", "I like tea", "I'm vegetarian", "I'm on the train",
    ]  # fmt: skip
    for number, statement in enumerate(statements, start=1):
        turn = exchange(tenant.client, statement)
        tenant.client.post(f"/api/v1/conversations/{turn['conversation']}/end")
        curated = Conversation.objects.filter(pk=turn["conversation"], last_curated_at__isnull=False)
        wait_until(curated.exists, worker=celery_worker_process, what=f"the curator pass after {statement!r}")
        assert ProviderCall.objects.filter(purpose="curate").count() == number
    kept = set(Note.objects.filter(bank=bank).values_list("key", flat=True))
    assert len(kept) == 8
    assert {"name", "allergy-peanuts", "diet"} <= kept
    assert "current-state" not in kept
    assert Revision.objects.filter(action="refused", note_key="current-state").exists()
    assert Revision.objects.filter(action="evict").count() == 2
