"""Webhook subscriptions and their deliveries: one delivery row per event and subscription."""

from __future__ import annotations

from typing import Self

from django.contrib.postgres.fields import ArrayField
from django.db import models

from accounts.models import Agent, Team


class EventType(models.TextChoices):
    NOTE_CREATED = "note.created", "A note was created"
    NOTE_UPDATED = "note.updated", "A note was rewritten (an update, an append, a merge)"
    NOTE_DELETED = "note.deleted", "A note was deleted (forgotten, evicted, expired, merged away)"
    NOTE_ERASED = "note.erased", "A note was erased (the payload carries no content)"
    PERSON_ERASED = "person.erased", "Everything held about a person was erased"
    PROPOSAL_CREATED = "proposal.created", "A write was proposed for review"


class SubscriptionQuerySet(models.QuerySet["Subscription"]):
    def for_team(self, team: Team) -> Self:
        return self.filter(team=team)


class Subscription(models.Model):
    """A URL an agent of the team asked Mnemo to POST events to."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="webhooks")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="webhooks")
    url = models.URLField(max_length=2000)
    events = ArrayField(models.CharField(max_length=32, choices=EventType.choices))
    # Kept as given, not hashed: every delivery is signed with it (HMAC needs the secret itself).
    # It is shown once, when the subscription is made, and never again (API, admin, logs).
    secret = models.CharField(max_length=200, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = SubscriptionQuerySet.as_manager()

    class Meta:
        ordering = ["team_id", "id"]
        indexes = [models.Index(fields=["team", "id"], name="webhook_by_team")]
        constraints = [
            models.CheckConstraint(condition=~models.Q(events=[]), name="webhook_has_events"),
        ]

    def __str__(self) -> str:
        return f"{self.url} ({', '.join(self.events)})"


class DeliveryQuerySet(models.QuerySet["Delivery"]):
    def for_team(self, team: Team) -> Self:
        return self.filter(team=team)

    def pending(self) -> Self:
        return self.filter(status=Delivery.Status.PENDING)


class Delivery(models.Model):
    """One event for one subscription, and what became of sending it.

    Deliveries of one subject (a note) to one subscription are sent in `sequence` order: a
    delivery waits while an earlier one of its subject is pending.
    """

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        DELIVERED = "delivered", "Delivered"
        FAILED = "failed", "Failed"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="webhook_deliveries")
    subscription = models.ForeignKey(Subscription, on_delete=models.CASCADE, related_name="deliveries")
    event_id = models.UUIDField(help_text="The event's id (the body's `id`), the same for every subscription.")
    type = models.CharField(max_length=32, choices=EventType.choices)
    subject = models.CharField(max_length=100, blank=True, help_text="What the event is about, e.g. note:12.")
    sequence = models.BigIntegerField(default=0, help_text="Order among the deliveries of one subject.")
    # Not a foreign key: the person row may be deleted by a hard erasure, which scrubs these rows.
    person_id = models.BigIntegerField(null=True, blank=True)
    data = models.JSONField()
    created_at = models.DateTimeField()
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    last_status_code = models.PositiveIntegerField(null=True, blank=True)
    last_error = models.CharField(max_length=500, blank=True)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)
    # Set while a worker sends it, so a second copy of its task does not send it again.
    claimed_until = models.DateTimeField(null=True, blank=True)

    objects = DeliveryQuerySet.as_manager()

    class Meta:
        ordering = ["team_id", "-id"]
        verbose_name_plural = "deliveries"
        indexes = [
            models.Index(fields=["team", "subscription", "-id"], name="delivery_log"),
            models.Index(
                fields=["team", "subscription", "subject", "sequence"],
                condition=models.Q(status="pending"),
                name="delivery_pending_by_subject",
            ),
            models.Index(fields=["next_attempt_at"], condition=models.Q(status="pending"), name="delivery_due"),
        ]

    def __str__(self) -> str:
        return f"{self.type} to {self.subscription_id} ({self.status})"
