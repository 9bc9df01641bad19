from __future__ import annotations

from rest_framework import serializers

from webhooks.models import Delivery, Subscription


class SubscriptionOutput(serializers.Serializer[Subscription]):
    id = serializers.IntegerField()
    url = serializers.CharField()
    events = serializers.ListField(child=serializers.CharField())
    agent = serializers.CharField(source="agent.slug", help_text="The agent whose key subscribed.")
    created_at = serializers.DateTimeField()


class SubscriptionCreated(SubscriptionOutput):
    secret = serializers.CharField(help_text="The signing secret, shown this once: keep it.")


class DeliveryOutput(serializers.Serializer[Delivery]):
    id = serializers.IntegerField(help_text="Sent as X-Mnemo-Delivery.")
    event = serializers.UUIDField(source="event_id", help_text="The event's id (the body's `id`).")
    type = serializers.CharField()
    subject = serializers.CharField()
    status = serializers.ChoiceField(choices=Delivery.Status.choices)
    attempts = serializers.IntegerField()
    last_status_code = serializers.IntegerField(allow_null=True)
    last_error = serializers.CharField()
    last_attempt_at = serializers.DateTimeField(allow_null=True)
    next_attempt_at = serializers.DateTimeField(allow_null=True)
    delivered_at = serializers.DateTimeField(allow_null=True)
    created_at = serializers.DateTimeField()
