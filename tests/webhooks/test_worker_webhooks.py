"""Webhooks end to end: a real HTTP receiver subscribed through the API, notes written, edited,
deleted and erased through the API, and a real Celery worker delivering the events."""

from __future__ import annotations

from collections import defaultdict

import pytest

from tests.support.fixtures import make_tenant, run_celery_worker, wait_until
from tests.webhooks.receiver import Received, run_receiver
from webhooks.models import Delivery

EVENTS = ["note.created", "note.updated", "note.deleted", "note.erased", "person.erased"]
WORKER_ENV = {"WEBHOOK_ALLOW_PRIVATE": "1", "WEBHOOK_BACKOFF": "0.2", "WEBHOOK_TIMEOUT": "2"}


def remember(tenant, key, content):
    answer = tenant.client.post(
        "/api/v1/tools/remember",
        {"person": "ada", "key": key, "description": f"Ada's {key}", "content": content},
        format="json",
    )
    assert answer.status_code == 200, answer.json()
    return answer.json()["id"]


def by_note(received: list[Received]) -> dict[object, list[tuple[str, int]]]:
    events: dict[object, list[tuple[str, int]]] = defaultdict(list)
    for got in received:
        event = got.event
        if "note" in event["data"]:
            events[event["data"]["note"]].append((event["type"], event["data"]["revision"]))
    return events


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_each_event_arrives_once_in_order_per_note_signed_and_only_for_its_team(settings):
    settings.WEBHOOK_ALLOW_PRIVATE = True  # the API runs in this process: the receiver is on 127.0.0.1
    tenant, other = make_tenant(can_admin=True), make_tenant(can_admin=True)
    with run_receiver() as receiver, run_celery_worker(extra_env=WORKER_ENV) as worker:
        receiver.fail_first["/flaky"] = 2  # the first delivery there is answered 500 twice

        def subscribe(client, path):
            answer = client.post("/api/v1/webhooks", {"url": receiver.url + path, "events": EVENTS}, format="json")
            assert answer.status_code == 201, answer.json()
            return answer.json()

        steady, flaky = subscribe(tenant.client, "/steady"), subscribe(tenant.client, "/flaky")
        subscribe(other.client, "/theirs")
        other_note = remember(other, "home-city", "Their Ada lives in Rome.")

        home = remember(tenant, "home-city", "Ada lives in Oslo.")
        pet = remember(tenant, "pet", "A cat named Miso.")
        edited = tenant.client.post(
            "/api/v1/tools/edit_note",
            {"person": "ada", "id": home, "mode": "find_replace", "find": "Oslo", "content": "Bergen"},
            format="json",
        )
        assert edited.status_code == 200, edited.json()
        assert tenant.client.delete(f"/api/v1/notes/{pet}").status_code == 200
        diet = remember(tenant, "diet", "Ada is allergic to peanuts.")
        assert tenant.client.delete(f"/api/v1/notes/{diet}?erase=true").status_code == 200

        def arrived(path: str, count: int) -> bool:
            return len(receiver.at(path)) >= count

        wait_until(lambda: arrived("/steady", 6), worker=worker.process, what="six events at /steady")
        wait_until(lambda: arrived("/flaky", 8), worker=worker.process, what="six events and two failures at /flaky")

        # The person's erasure: their remaining note is erased, then they are.
        assert tenant.client.delete("/api/v1/people/ada").status_code == 200
        wait_until(lambda: arrived("/steady", 8), worker=worker.process, what="the erasures at /steady")
        wait_until(lambda: arrived("/flaky", 10), worker=worker.process, what="the erasures at /flaky")
        wait_until(lambda: not Delivery.objects.pending().exists(), worker=worker.process, what="every delivery final")

    steady_got, flaky_got = receiver.at("/steady"), receiver.accepted("/flaky")
    # Once each at /steady, every one signed with its subscription's secret.
    assert len({got.event["id"] for got in steady_got}) == len(steady_got) == 8
    assert all(got.signed_with(steady["secret"]) for got in steady_got)
    assert not any(got.signed_with(flaky["secret"]) for got in steady_got)
    assert all(got.signed_with(flaky["secret"]) for got in flaky_got)
    # In order per note, at both (the flaky one held the note's later events until its first got through).
    expected = {
        home: ["note.created", "note.updated", "note.erased"],
        pet: ["note.created", "note.deleted"],
        diet: ["note.created", "note.erased"],
    }
    for received in (steady_got, flaky_got):
        events = by_note(received)
        assert {note: [t for t, _ in seen] for note, seen in events.items()} == expected
        for seen in events.values():
            assert [revision for _, revision in seen] == sorted(revision for _, revision in seen)
    assert steady_got[-1].event["type"] == "person.erased"
    assert steady_got[-1].event["data"]["person"] == "ada"
    # The first event at /flaky arrived on its third try: one delivery, three requests.
    tries = [got for got in receiver.at("/flaky") if got.event["data"].get("note") == home][:3]
    assert [got.status for got in tries] == [500, 500, 200]
    assert {got.headers["X-Mnemo-Delivery"] for got in tries} == {tries[0].headers["X-Mnemo-Delivery"]}
    flaky_first = Delivery.objects.get(pk=int(tries[0].headers["X-Mnemo-Delivery"]))
    assert (flaky_first.type, flaky_first.status, flaky_first.attempts) == ("note.created", "delivered", 3)
    assert len(receiver.at("/flaky")) == 10
    assert len({got.event["id"] for got in flaky_got}) == len(flaky_got) == 8
    # A write's event carries what the note says (the diet note's may have lost it: it was erased at
    # once, and an erasure takes its words out of every delivery not yet sent); an erasure's, nothing.
    created = {
        got.event["data"]["note"]: got.event["data"] for got in steady_got if got.event["type"] == "note.created"
    }
    assert created[home]["content"] == "Ada lives in Oslo."
    for got in steady_got:
        if got.event["type"] == "note.erased":
            assert set(got.event["data"]) == {"note", "bank", "revision", "actor", "agent", "person"}
    # Another team's subscription heard nothing of this team, and this team nothing of theirs.
    assert [got.event["data"]["note"] for got in receiver.at("/theirs")] == [other_note]
    assert other_note not in by_note(steady_got)
    # No delivery row keeps a word of what was erased.
    assert "peanuts" not in str(list(Delivery.objects.values_list("data", flat=True)))
