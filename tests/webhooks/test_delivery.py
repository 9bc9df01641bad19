"""Events from the note write path, and each delivery's attempts against a real HTTP receiver
(the task's body called directly; tests/test_worker_webhooks.py runs it on a real worker)."""

from __future__ import annotations

import time

import pytest
from django.db import transaction

from memory import services as memory
from memory.models import Revision
from memory.services import Actor
from tests.support.factories import note_fields
from tests.webhooks.receiver import run_receiver
from webhooks import services
from webhooks.models import Delivery, Subscription
from webhooks.services import Outcome

SECRET = "a-test-secret-long-enough"


@pytest.fixture
def queued(mocker):
    """The delivery ids handed to the queue (the broker edge), in order."""
    ids: list[int] = []
    mocker.patch("webhooks.services._enqueue", side_effect=ids.append)
    return ids


@pytest.fixture
def receiver(settings):
    settings.WEBHOOK_ALLOW_PRIVATE = True
    settings.WEBHOOK_BACKOFF = 0.01
    with run_receiver() as running:
        yield running


def subscribe(tenant, receiver, path="/hook", events=("note.created", "note.updated", "note.deleted", "note.erased")):
    return services.subscribe(agent=tenant.agent, url=receiver.url + path, events=events, secret=SECRET)


def write(django_capture_on_commit_callbacks, tenant, person, actor, **fields):
    with django_capture_on_commit_callbacks(execute=True):
        return memory.remember(team=tenant.team, person=person, actor=actor, **note_fields(**fields))


def test_a_write_emits_one_delivery_per_subscription_that_asked_for_it(
    tenant, other_tenant, person, actor, receiver, queued, django_capture_on_commit_callbacks
):
    wanted = subscribe(tenant, receiver)
    subscribe(tenant, receiver, path="/deletes-only", events=["note.deleted"])
    theirs = subscribe(other_tenant, receiver)
    result = write(django_capture_on_commit_callbacks, tenant, person, actor)
    assert result.note is not None
    [delivery] = Delivery.objects.all()
    assert queued == [delivery.pk]
    assert (delivery.subscription_id, delivery.team_id, delivery.type) == (wanted.pk, tenant.team.pk, "note.created")
    revision = Revision.objects.get(note_id=result.note.pk, action="create")
    assert delivery.subject == f"note:{result.note.pk}"
    assert delivery.sequence == revision.pk
    assert delivery.data == {
        "note": result.note.pk, "bank": "user:ada", "revision": revision.pk, "actor": "agent",
        "agent": tenant.agent.slug, "person": "ada", "key": "home-city", "category": "", "kind": "fact",
        "description": "Where the person lives", "content": "Ada lives in Oslo.",
    }  # fmt: skip
    assert not Delivery.objects.filter(subscription=theirs).exists()


def test_a_write_that_rolls_back_emits_nothing(tenant, person, actor, receiver, queued,
                                               django_capture_on_commit_callbacks):  # fmt: skip
    subscribe(tenant, receiver)
    with django_capture_on_commit_callbacks(execute=True), transaction.atomic():
        memory.remember(team=tenant.team, person=person, actor=actor, **note_fields())
        transaction.set_rollback(True)
    assert not Delivery.objects.exists()
    assert queued == []


def test_a_delivery_is_signed_and_leaves_no_content_behind(
    tenant, person, actor, receiver, queued, django_capture_on_commit_callbacks
):
    subscribe(tenant, receiver)
    write(django_capture_on_commit_callbacks, tenant, person, actor)
    [delivery_id] = queued
    attempt = services.deliver(delivery_id=delivery_id)
    assert attempt == services.Attempt(Outcome.DELIVERED)
    [got] = receiver.at("/hook")
    assert got.signed_with(SECRET)
    assert not got.signed_with(SECRET + "x")
    delivery = Delivery.objects.get(pk=delivery_id)
    assert got.headers["X-Mnemo-Event"] == "note.created"
    assert got.headers["X-Mnemo-Delivery"] == str(delivery_id)
    assert got.headers["Content-Type"] == "application/json"
    assert got.event == {
        "id": str(delivery.event_id), "type": "note.created", "created_at": delivery.created_at.isoformat(),
        "data": got.event["data"],
    }  # fmt: skip
    assert got.event["data"]["content"] == "Ada lives in Oslo."
    assert (delivery.status, delivery.attempts, delivery.last_status_code) == ("delivered", 1, 200)
    assert delivery.delivered_at is not None
    assert "content" not in delivery.data
    assert "description" not in delivery.data
    assert services.deliver(delivery_id=delivery_id) is None  # a second copy of the task sends nothing
    assert len(receiver.at("/hook")) == 1


def test_a_receiver_that_fails_twice_gets_the_event_on_the_third_try(
    tenant, person, actor, receiver, queued, django_capture_on_commit_callbacks
):
    receiver.statuses["/hook"] = [500, 503]
    subscribe(tenant, receiver)
    write(django_capture_on_commit_callbacks, tenant, person, actor)
    [delivery_id] = queued
    first = services.deliver(delivery_id=delivery_id)
    assert first is not None
    assert first.outcome == Outcome.RETRYING
    assert first.retry_in == pytest.approx(0.01)
    delivery = Delivery.objects.get(pk=delivery_id)
    assert (delivery.status, delivery.attempts, delivery.last_status_code) == ("pending", 1, 500)
    assert delivery.next_attempt_at is not None
    assert "HTTP 500" in delivery.last_error
    time.sleep(0.05)
    second = services.deliver(delivery_id=delivery_id)
    assert second is not None
    assert second.outcome == Outcome.RETRYING
    assert second.retry_in == pytest.approx(0.02)  # doubled
    time.sleep(0.05)
    assert services.deliver(delivery_id=delivery_id) == services.Attempt(Outcome.DELIVERED)
    assert [r.headers["X-Mnemo-Delivery"] for r in receiver.at("/hook")] == [str(delivery_id)] * 3
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.last_status_code, delivery.last_error) == (
        "delivered",
        3,
        200,
        "",
    )


def test_a_delivery_is_not_tried_before_its_backoff(tenant, person, actor, receiver, queued, settings,
                                                    django_capture_on_commit_callbacks):  # fmt: skip
    settings.WEBHOOK_BACKOFF = 60
    receiver.statuses["/hook"] = [500]
    subscribe(tenant, receiver)
    write(django_capture_on_commit_callbacks, tenant, person, actor)
    assert services.deliver(delivery_id=queued[0]).outcome == Outcome.RETRYING
    assert services.deliver(delivery_id=queued[0]) is None
    assert len(receiver.at("/hook")) == 1


@pytest.mark.parametrize("status", [400, 404, 410])
def test_a_client_error_is_final(tenant, person, actor, receiver, queued, status, django_capture_on_commit_callbacks):
    receiver.statuses["/hook"] = [status]
    subscribe(tenant, receiver)
    write(django_capture_on_commit_callbacks, tenant, person, actor)
    assert services.deliver(delivery_id=queued[0]) == services.Attempt(Outcome.FAILED)
    delivery = Delivery.objects.get()
    assert (delivery.status, delivery.last_status_code, delivery.next_attempt_at) == ("failed", status, None)


@pytest.mark.parametrize("status", [408, 429, 500, 502])
def test_a_passing_error_is_tried_again(tenant, person, actor, receiver, queued, status,
                                        django_capture_on_commit_callbacks):  # fmt: skip
    receiver.statuses["/hook"] = [status]
    subscribe(tenant, receiver)
    write(django_capture_on_commit_callbacks, tenant, person, actor)
    assert services.deliver(delivery_id=queued[0]).outcome == Outcome.RETRYING


def test_retries_stop_after_webhook_retry_for(tenant, person, actor, receiver, queued, settings,
                                              django_capture_on_commit_callbacks):  # fmt: skip
    settings.WEBHOOK_RETRY_FOR = 1
    settings.WEBHOOK_BACKOFF = 5
    receiver.statuses["/hook"] = [500]
    subscribe(tenant, receiver)
    write(django_capture_on_commit_callbacks, tenant, person, actor)
    assert services.deliver(delivery_id=queued[0]) == services.Attempt(Outcome.FAILED)
    assert Delivery.objects.get().status == "failed"


def test_a_redirect_is_not_followed(tenant, person, actor, receiver, queued, django_capture_on_commit_callbacks):
    subscribe(tenant, receiver, path="/redirect")
    write(django_capture_on_commit_callbacks, tenant, person, actor)
    assert services.deliver(delivery_id=queued[0]) == services.Attempt(Outcome.FAILED)
    assert [r.path for r in receiver.received] == ["/redirect"]  # nothing at /elsewhere
    delivery = Delivery.objects.get()
    assert delivery.last_status_code == 302
    assert "not followed" in delivery.last_error
    assert "/elsewhere" in delivery.last_error


def test_a_slow_receiver_is_cut_at_the_timeout(tenant, person, actor, receiver, queued, settings,
                                               django_capture_on_commit_callbacks):  # fmt: skip
    settings.WEBHOOK_TIMEOUT = 1
    receiver.slow_paths.add("/hook")  # its answer trickles in over some 12 s, no gap long enough to time out a read
    subscribe(tenant, receiver)
    write(django_capture_on_commit_callbacks, tenant, person, actor)
    started = time.monotonic()
    attempt = services.deliver(delivery_id=queued[0])
    took = time.monotonic() - started
    assert attempt is not None
    assert attempt.outcome == Outcome.RETRYING
    assert 0.9 < took < 2.5, f"the delivery took {took:.1f}s"
    delivery = Delivery.objects.get()
    assert (delivery.status, delivery.last_status_code) == ("pending", None)
    assert "No answer within 1 s" in delivery.last_error


def test_a_receiver_that_never_answers_is_cut_at_the_timeout(tenant, person, actor, queued, settings,
                                                             django_capture_on_commit_callbacks):  # fmt: skip
    import socket

    settings.WEBHOOK_ALLOW_PRIVATE = True
    settings.WEBHOOK_TIMEOUT = 1
    with socket.socket() as silent:  # accepts connections (the backlog) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        services.subscribe(agent=tenant.agent, url=f"http://127.0.0.1:{port}/hook", events=["note.created"])
        write(django_capture_on_commit_callbacks, tenant, person, actor)
        started = time.monotonic()
        attempt = services.deliver(delivery_id=queued[0])
        took = time.monotonic() - started
    assert attempt is not None
    assert attempt.outcome == Outcome.RETRYING
    assert 0.9 < took < 2.5, f"the delivery took {took:.1f}s"
    assert "No answer within 1 s" in Delivery.objects.get().last_error


def test_a_private_address_is_refused_again_at_delivery(tenant, person, actor, receiver, queued, settings,
                                                        django_capture_on_commit_callbacks):  # fmt: skip
    subscribe(tenant, receiver)  # allowed then
    write(django_capture_on_commit_callbacks, tenant, person, actor)
    settings.WEBHOOK_ALLOW_PRIVATE = False  # as if its name now resolved to a private address
    assert services.deliver(delivery_id=queued[0]) == services.Attempt(Outcome.REFUSED)
    assert receiver.received == []
    delivery = Delivery.objects.get()
    assert delivery.status == "failed"
    assert "loopback" in delivery.last_error


def test_a_later_event_of_a_note_waits_for_the_earlier_one(
    tenant, person, actor, receiver, queued, django_capture_on_commit_callbacks
):
    receiver.statuses["/hook"] = [500]
    subscribe(tenant, receiver)
    write(django_capture_on_commit_callbacks, tenant, person, actor)
    write(django_capture_on_commit_callbacks, tenant, person, actor, content="Ada moved to Bergen.")
    write(django_capture_on_commit_callbacks, tenant, person, actor, key="pet", content="A cat.")
    created, updated, other_note = queued
    assert services.deliver(delivery_id=updated) is None  # the note's earlier event is pending
    assert services.deliver(delivery_id=created).outcome == Outcome.RETRYING
    assert services.deliver(delivery_id=updated) is None  # still held while the earlier one retries
    assert services.deliver(delivery_id=other_note).outcome == Outcome.DELIVERED  # another note's is not held
    time.sleep(0.05)
    assert services.deliver(delivery_id=created).outcome == Outcome.DELIVERED
    assert queued[-1] == updated  # the earlier one, once final, sends the next
    assert services.deliver(delivery_id=updated).outcome == Outcome.DELIVERED
    sent = [(r.event["type"], r.event["data"]["key"]) for r in receiver.at("/hook")]
    assert sent == [
        ("note.created", "home-city"),
        ("note.created", "pet"),
        ("note.created", "home-city"),
        ("note.updated", "home-city"),
    ]


def test_erasing_a_note_takes_its_words_out_of_every_delivery(
    admin_tenant, actor, receiver, queued, django_capture_on_commit_callbacks
):
    tenant = admin_tenant
    from tests.support.factories import PersonFactory

    person = PersonFactory.create(team=tenant.team, external_id="ada")
    subscribe(tenant, receiver)
    note = write(django_capture_on_commit_callbacks, tenant, person, actor).note
    write(django_capture_on_commit_callbacks, tenant, person, actor, content="Ada moved to Bergen.")
    assert services.deliver(delivery_id=queued[0]).outcome == Outcome.DELIVERED
    with django_capture_on_commit_callbacks(execute=True):
        memory.erase_note(note=note, actor=Actor(Revision.Actor.ADMIN, "key:x"))
    rows = list(Delivery.objects.order_by("id"))
    assert [r.type for r in rows] == ["note.created", "note.updated", "note.erased"]
    for row in rows:
        assert not {"content", "description", "key"} & set(row.data), row.data
    assert rows[2].data == {
        "note": note.pk, "bank": "user:ada", "revision": rows[2].sequence, "actor": "admin", "agent": None,
        "person": "ada",
    }  # fmt: skip
    for delivery_id in queued[1:]:
        services.deliver(delivery_id=delivery_id)
    sent = [r.event for r in receiver.at("/hook")]
    assert [e["type"] for e in sent] == ["note.created", "note.updated", "note.erased"]
    assert "Bergen" not in str(sent[1:])


def test_erasing_a_person_emits_person_erased_and_scrubs_their_events(
    admin_tenant, actor, receiver, queued, django_capture_on_commit_callbacks
):
    tenant = admin_tenant
    from tests.support.factories import PersonFactory

    person = PersonFactory.create(team=tenant.team, external_id="ada")
    subscription = subscribe(tenant, receiver)
    Subscription.objects.filter(pk=subscription.pk).update(events=["note.created", "person.erased"])
    write(django_capture_on_commit_callbacks, tenant, person, actor)
    with django_capture_on_commit_callbacks(execute=True):
        memory.erase_person(team=tenant.team, person=person, actor=Actor(Revision.Actor.ADMIN, "key:x"), hard=True)
    created, erased = Delivery.objects.order_by("id")
    # A hard erasure: the events no longer name them either, not even through a bank's id.
    assert not {"person", "bank"} & set(created.data)
    assert "content" not in created.data
    assert "Oslo" not in str(created.data)
    assert (erased.type, erased.data) == ("person.erased", {"person": "ada", "actor": "admin", "hard": True})
    for delivery_id in queued:
        services.deliver(delivery_id=delivery_id)
    assert [r.event["type"] for r in receiver.at("/hook")] == ["note.created", "person.erased"]
    assert "ada" not in str(list(Delivery.objects.values_list("data", flat=True)))  # once told, forgotten


def test_the_sweep_queues_deliveries_whose_task_was_lost(tenant, person, actor, receiver, queued,
                                                         django_capture_on_commit_callbacks):  # fmt: skip
    subscribe(tenant, receiver)
    write(django_capture_on_commit_callbacks, tenant, person, actor)
    assert services.send_due() == 0  # just emitted: its task is on its way
    Delivery.objects.update(created_at="2026-01-01T00:00:00Z")
    assert services.send_due() == 1
    assert queued[-1] == Delivery.objects.get().pk


def test_any_service_emits_an_event_through_emit_event(tenant, receiver, queued, django_capture_on_commit_callbacks):
    subscribe(tenant, receiver, events=["proposal.created"])
    with django_capture_on_commit_callbacks(execute=True), transaction.atomic():
        services.emit_event(
            team_id=tenant.team.pk, event_type="proposal.created", data={"proposal": 7}, subject="proposal:7"
        )
    assert services.deliver(delivery_id=queued[0]) == services.Attempt(Outcome.DELIVERED)
    [got] = receiver.at("/hook")
    assert (got.event["type"], got.event["data"]) == ("proposal.created", {"proposal": 7})
    with pytest.raises(ValueError, match="Unknown webhook event type"):
        services.emit_event(team_id=tenant.team.pk, event_type="note.read", data={})


def test_a_write_nobody_subscribed_to_costs_one_query_after_commit(
    tenant, person, actor, queued, django_capture_on_commit_callbacks, django_assert_num_queries
):
    with django_capture_on_commit_callbacks() as callbacks:
        memory.remember(team=tenant.team, person=person, actor=actor, **note_fields())
    emitted = [callback for callback in callbacks if getattr(callback, "func", None) is services._record_event]
    assert len(emitted) == 1
    with django_assert_num_queries(1):  # the team's subscriptions to note.created: none
        emitted[0]()
    assert not Delivery.objects.exists()


def test_a_proposed_write_emits_proposal_created_without_its_words(
    tenant, person, actor, receiver, queued, django_capture_on_commit_callbacks
):
    subscribe(tenant, receiver, events=["proposal.created", "note.created"])
    memory.set_review_writes(person=person, review=True)
    person.refresh_from_db()
    with django_capture_on_commit_callbacks(execute=True):
        answer = tenant.client.post(
            "/api/v1/tools/remember", {"person": "ada", **note_fields(content="Ada lives in Tromsø.")}, format="json"
        )
    assert answer.status_code == 202, answer.json()  # proposed, not written: no note.created
    [delivery] = Delivery.objects.all()
    assert delivery.type == "proposal.created"
    assert delivery.data["person"] == "ada"
    assert (delivery.data["operation"], delivery.data["bank"], delivery.data["agent"]) == (
        "remember", "user:ada", tenant.agent.slug,
    )  # fmt: skip
    assert "Tromsø" not in str(delivery.data)
    assert services.deliver(delivery_id=delivery.pk) == services.Attempt(Outcome.DELIVERED)
    [got] = receiver.at("/hook")
    assert got.signed_with(SECRET)
    assert got.event["data"]["proposal"] == delivery.data["proposal"]
