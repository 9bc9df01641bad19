"""Writes for webhooks: subscribing, the events services emit, and each delivery's attempts."""

from __future__ import annotations

import json
import logging
import secrets
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from typing import Any

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models, transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from accounts.models import Agent, Person
from config import metrics
from webhooks import sending
from webhooks.models import Delivery, EventType, Subscription
from webhooks.safety import check_url

logger = logging.getLogger(__name__)

# What a delivery keeps once it is final, and what an erasure takes out of every delivery of what it
# erased: the words. What the event was (its type, note id, time) stays for the delivery log.
CONTENT_FIELDS = ["content", "description"]
ERASED_FIELDS = ["content", "description", "key", "category"]


class Outcome:
    DELIVERED = "delivered"  # the receiver answered 2xx
    FAILED = "failed"  # final: a 3xx or 4xx (but 408 and 429), or still failing after WEBHOOK_RETRY_FOR
    RETRYING = "retrying"  # no answer, 408, 429 or 5xx: tried again after a backoff
    REFUSED = "refused"  # final: the URL's host now resolves to an address Mnemo may not call


@dataclass(frozen=True)
class Attempt:
    outcome: str
    retry_in: float | None = None  # seconds, when the outcome is retrying


def subscribe(*, agent: Agent, url: str, events: Iterable[str], secret: str | None = None) -> Subscription:
    """Subscribe url to the team's events of these types. Without a secret, one is generated; either
    way the caller shows it once, as this returns it (nothing else ever shows it again)."""
    check_url(url)  # resolves the host: before the transaction, which holds no network call
    with transaction.atomic(durable=True):
        return Subscription.objects.create(
            team_id=agent.team_id,
            agent=agent,
            url=url,
            events=sorted(set(events)),
            secret=secret or secrets.token_urlsafe(32),
        )


@transaction.atomic(durable=True)
def unsubscribe(*, subscription: Subscription) -> None:
    """Delete the subscription and its delivery log; nothing more is sent to it."""
    subscription.delete()


# --- events -------------------------------------------------------------------------------------


def emit_event(
    *,
    team_id: int,
    event_type: str,
    data: dict[str, Any],
    subject: str = "",
    sequence: int = 0,
    person_id: int | None = None,
) -> None:
    """Send an event to each subscription of the team that asked for its type, once the caller's
    transaction commits (never, if it rolls back). Every service that changes what events report
    calls it inside its transaction (the note write path, a person's erasure, proposals).

    `subject` names what the event is about ("note:12"): deliveries of one subject to one subscription
    go out in `sequence` order (a number the caller took in its transaction, e.g. the revision id, so
    it follows commit order), then in the order emitted. `person_id`, when the event is about a person,
    fills `data["person"]` (their id) and lets their erasure find the event's words."""
    if event_type not in EventType.values:
        raise ValueError(f"Unknown webhook event type {event_type!r}.")
    emitted_at = timezone.now()
    transaction.on_commit(
        partial(_record_event, team_id, event_type, dict(data), subject, sequence, person_id, emitted_at), robust=True
    )


def _record_event(
    team_id: int,
    event_type: str,
    data: dict[str, Any],
    subject: str,
    sequence: int,
    person_id: int | None,
    emitted_at: Any,
) -> None:
    # After commit, outside any transaction: one query when nobody subscribed, which is most writes.
    subscriptions = list(
        Subscription.objects.filter(team_id=team_id, events__contains=[event_type]).values_list("pk", flat=True)
    )
    if not subscriptions:
        return
    if person_id is not None and "person" not in data:
        data["person"] = Person.objects.filter(pk=person_id).values_list("external_id", flat=True).first()
    event_id = uuid.uuid4()
    deliveries = Delivery.objects.bulk_create(
        [
            Delivery(
                team_id=team_id, subscription_id=subscription_id, event_id=event_id, type=event_type,
                subject=subject, sequence=sequence, person_id=person_id, data=data, created_at=emitted_at,
            )
            for subscription_id in subscriptions
        ]
    )  # fmt: skip
    for delivery in deliveries:
        _enqueue(delivery.pk)


def _enqueue(delivery_id: int) -> None:
    from webhooks import tasks  # imported here: tasks import this module

    try:
        tasks.deliver.delay(delivery_id)
    except Exception:  # the broker is down: the sweep (send_due) sends it later
        logger.exception("Could not queue webhook delivery %s; the sweep will send it.", delivery_id)


class _Without(models.Func):
    """jsonb minus keys: `data - ARRAY['content', ...]`."""

    arg_joiner = " - "
    template = "(%(expressions)s)"
    output_field = models.JSONField()


def _without(fields: list[str]) -> _Without:
    return _Without(models.F("data"), models.Value(fields, output_field=ArrayField(models.TextField())))


def erase_event_content(
    *, team_id: int, note_ids: Iterable[int] = (), person_id: int | None = None, hard: bool = False
) -> None:
    """An erasure's part in webhooks: every delivery about these notes (or about this person) loses
    the words of what was erased, sent or not; a pending one is sent without them. A hard erasure of
    the person takes their id out too. Runs in the erasure's transaction, and again after it commits,
    for events that transaction emitted (they are recorded on commit)."""
    about = Q(subject__in=[f"note:{note_id}" for note_id in note_ids])
    fields = list(ERASED_FIELDS)
    if person_id is not None:
        about |= Q(person_id=person_id)
        if hard:
            fields += ["person", "bank"]  # a private bank's id holds the person's

    def scrub() -> None:
        Delivery.objects.filter(team_id=team_id).filter(about).update(data=_without(fields))

    scrub()
    transaction.on_commit(scrub, robust=True)


# --- delivering ---------------------------------------------------------------------------------


def event_body(delivery: Delivery) -> bytes:
    """The body a receiver gets (and whose bytes are signed)."""
    event = {
        "id": str(delivery.event_id),
        "type": delivery.type,
        "created_at": delivery.created_at.isoformat(),
        "data": delivery.data,
    }
    return json.dumps(event, ensure_ascii=False, separators=(",", ":")).encode()


def _claim(delivery_id: int, now: Any) -> bool:
    """Take the delivery for one attempt, or say it is not this task's to send: already final, not due
    yet, being sent by another copy of the task, or waiting for an earlier delivery of its subject to
    the same subscription. One conditional UPDATE, so two copies of a task never both send."""
    earlier = (
        Delivery.objects.filter(
            team_id=OuterRef("team_id"),
            subscription_id=OuterRef("subscription_id"),
            subject=OuterRef("subject"),
            status=Delivery.Status.PENDING,
        )
        .exclude(subject="")
        .filter(Q(sequence__lt=OuterRef("sequence")) | Q(sequence=OuterRef("sequence"), pk__lt=OuterRef("pk")))
    )
    claimed = (
        Delivery.objects.filter(pk=delivery_id, status=Delivery.Status.PENDING)
        .filter(Q(next_attempt_at__isnull=True) | Q(next_attempt_at__lte=now))
        .filter(Q(claimed_until__isnull=True) | Q(claimed_until__lt=now))
        .filter(~Exists(earlier))
        # Past the request's own deadline, with room to record its answer.
        .update(claimed_until=now + timedelta(seconds=settings.WEBHOOK_TIMEOUT + 30), attempts=models.F("attempts") + 1)
    )
    return claimed == 1


def _decide(delivery: Delivery, answer: sending.Answer, now: Any) -> Attempt:
    if answer.refused:
        return Attempt(Outcome.REFUSED)
    code = answer.status_code
    if code is not None and 200 <= code < 300:
        return Attempt(Outcome.DELIVERED)
    # A redirect or a client error says the subscription is wrong, and trying again will not fix it;
    # 408 and 429 say "later", and a 5xx or no answer may pass.
    if code is not None and 300 <= code < 500 and code not in (408, 429):
        return Attempt(Outcome.FAILED)
    delay = min(settings.WEBHOOK_BACKOFF_MAX, settings.WEBHOOK_BACKOFF * 2 ** max(delivery.attempts - 1, 0))
    if now + timedelta(seconds=delay) > delivery.created_at + timedelta(seconds=settings.WEBHOOK_RETRY_FOR):
        return Attempt(Outcome.FAILED)
    return Attempt(Outcome.RETRYING, delay)


def deliver(*, delivery_id: int) -> Attempt | None:
    """Make one attempt at a delivery; None when it was not this call's to make (see _claim). Safe to
    run twice. After a final outcome, the next delivery of the same subject is sent."""
    if not _claim(delivery_id, timezone.now()):
        return None
    delivery = Delivery.objects.select_related("subscription").get(pk=delivery_id)
    body = event_body(delivery)
    headers = {
        "Content-Type": "application/json",
        "User-Agent": sending.USER_AGENT,
        "X-Mnemo-Event": delivery.type,
        "X-Mnemo-Delivery": str(delivery.pk),
        "X-Mnemo-Signature": sending.signature(body, delivery.subscription.secret),
    }
    answer = sending.post(delivery.subscription.url, body, headers, timeout=settings.WEBHOOK_TIMEOUT)
    now = timezone.now()
    # The one place a delivery's outcome is decided (delivered, failed, retrying, refused): a metric
    # counting deliveries by outcome (mnemo_webhook_deliveries_total) is counted here, once an attempt.
    attempt = _decide(delivery, answer, now)
    metrics.count_webhook_delivery(attempt.outcome)
    _record(delivery, answer, attempt, now)
    if attempt.outcome != Outcome.RETRYING:
        _send_next(delivery)
    return attempt


def _record(delivery: Delivery, answer: sending.Answer, attempt: Attempt, now: Any) -> None:
    fields: dict[str, Any] = {
        "last_status_code": answer.status_code,
        "last_error": answer.error[:500],
        "last_attempt_at": now,
        "claimed_until": None,
    }
    if attempt.outcome == Outcome.RETRYING:
        assert attempt.retry_in is not None
        fields |= {"next_attempt_at": now + timedelta(seconds=attempt.retry_in)}
    else:
        # Final: the words leave the row (the note and its revisions hold them, the receiver has them),
        # and so does the id of a person who was erased.
        kept_out = CONTENT_FIELDS + (["person"] if delivery.type == EventType.PERSON_ERASED else [])
        fields |= {
            "status": Delivery.Status.DELIVERED if attempt.outcome == Outcome.DELIVERED else Delivery.Status.FAILED,
            "delivered_at": now if attempt.outcome == Outcome.DELIVERED else None,
            "next_attempt_at": None,
            "data": _without(kept_out),
        }
    Delivery.objects.filter(pk=delivery.pk).update(**fields)
    if attempt.outcome != Outcome.DELIVERED:
        # Never the secret, nor the body: the URL, the answer and its code only.
        logger.info(
            "Webhook delivery %s (%s) to %s: %s, %s",
            delivery.pk, delivery.type, delivery.subscription.url, attempt.outcome, answer.error or answer.status_code,
        )  # fmt: skip


def _send_next(delivery: Delivery) -> None:
    if not delivery.subject:
        return
    following = (
        Delivery.objects.filter(
            team_id=delivery.team_id, subscription_id=delivery.subscription_id, subject=delivery.subject
        )
        .pending()
        .order_by("sequence", "pk")
        .values_list("pk", flat=True)
        .first()
    )
    if following is not None:
        _enqueue(following)


def send_due(*, limit: int = 1000) -> int:
    """Queue the pending deliveries whose task was lost (a broker that was down, a worker that died
    mid-send): due for a minute and claimed by nobody. Safe to run any time; a copy of a task that
    is still queued finds its delivery taken or done and does nothing."""
    now = timezone.now()
    due = (
        Delivery.objects.pending()
        .filter(Q(next_attempt_at__isnull=True, created_at__lte=now - timedelta(minutes=1))
                | Q(next_attempt_at__lte=now - timedelta(minutes=1)))
        .filter(Q(claimed_until__isnull=True) | Q(claimed_until__lt=now))
        .order_by("pk")
        .values_list("pk", flat=True)[:limit]
    )  # fmt: skip
    ids = list(due)
    for delivery_id in ids:
        _enqueue(delivery_id)
    return len(ids)
