"""Webhook subscriptions over the API: an admin-capable key subscribes URLs to its team's events."""

from __future__ import annotations

from django.db.models import QuerySet
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, serializers
from rest_framework.generics import ListAPIView
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.authentication import request_api_key
from accounts.models import ApiKey
from config.fields import LineField
from config.schema import error_responses
from webhooks import services
from webhooks.models import Delivery, EventType, Subscription
from webhooks.serializers import DeliveryOutput, SubscriptionCreated, SubscriptionOutput

WEBHOOKS_NEED_ADMIN = "Webhooks tell a URL about every person of the team: they need an admin-capable API key."


def _admin_key(request: Request) -> ApiKey:
    key = request_api_key(request)
    if not key.can_admin:
        raise exceptions.PermissionDenied(WEBHOOKS_NEED_ADMIN)
    return key


def _subscriptions(key: ApiKey) -> QuerySet[Subscription]:
    return Subscription.objects.for_team(key.team).select_related("agent").order_by("id")


class WebhookListApi(ListAPIView[Subscription]):
    serializer_class = SubscriptionOutput

    class WebhookCreateInput(serializers.Serializer[None]):
        url = LineField(max_length=2000, help_text="http:// or https://, on a public address.")
        events = serializers.ListField(
            child=serializers.ChoiceField(choices=EventType.values), min_length=1, max_length=len(EventType.values)
        )
        secret = LineField(
            min_length=16, max_length=200, required=False,
            help_text="The signing secret; without one, Mnemo makes one and answers it this once.",
        )  # fmt: skip

    @extend_schema(
        operation_id="webhooks_list",
        description="The team's webhook subscriptions, oldest first (never their secrets). An admin-capable key only.",
        responses={200: SubscriptionOutput(many=True), **error_responses(403)},
    )
    def get(self, request: Request, *args: object, **kwargs: object) -> Response:
        return super().get(request, *args, **kwargs)

    def get_queryset(self) -> QuerySet[Subscription]:
        return _subscriptions(_admin_key(self.request))

    @extend_schema(
        operation_id="webhooks_create",
        description=(
            "Subscribes a URL to events about the team's people. Each event is POSTed as JSON `{id, type, "
            "created_at, data}`, signed `X-Mnemo-Signature: sha256=<HMAC-SHA256 of the body with the secret>`. "
            "The secret is in this answer only. A URL whose host resolves to a private, loopback or link-local "
            "address is refused (400, field `url`). An admin-capable key only."
        ),
        request=WebhookCreateInput,
        responses={201: SubscriptionCreated, **error_responses(403)},
    )
    def post(self, request: Request) -> Response:
        key = _admin_key(request)
        data = self.WebhookCreateInput(data=request.data)
        data.is_valid(raise_exception=True)
        subscription = services.subscribe(
            agent=key.agent,
            url=data.validated_data["url"],
            events=data.validated_data["events"],
            secret=data.validated_data.get("secret"),
        )
        return Response(SubscriptionCreated(subscription).data, status=201)


class WebhookDetailApi(APIView):
    @extend_schema(
        operation_id="webhooks_destroy",
        description="Unsubscribes: nothing more is sent, and its delivery log goes. An admin-capable key only.",
        responses={204: None, **error_responses(403)},
    )
    def delete(self, request: Request, webhook_id: int) -> Response:
        key = _admin_key(request)
        services.unsubscribe(subscription=get_object_or_404(_subscriptions(key), pk=webhook_id))
        return Response(status=204)


class DeliveryListApi(ListAPIView[Delivery]):
    serializer_class = DeliveryOutput

    @extend_schema(
        operation_id="webhooks_deliveries",
        description=(
            "A subscription's delivery log, newest first: each event's status (pending, delivered, failed), "
            "attempts, the last answer's status code and error, and when it is tried next. An admin-capable key only."
        ),
        responses={200: DeliveryOutput(many=True), **error_responses(403)},
    )
    def get(self, request: Request, *args: object, **kwargs: object) -> Response:
        return super().get(request, *args, **kwargs)

    def get_queryset(self) -> QuerySet[Delivery]:
        key = _admin_key(self.request)
        subscription = get_object_or_404(_subscriptions(key), pk=self.kwargs["webhook_id"])
        return Delivery.objects.for_team(key.team).filter(subscription=subscription).order_by("-id")
