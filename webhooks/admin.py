from django.contrib import admin

from webhooks.models import Delivery, Subscription


@admin.register(Subscription)
class SubscriptionAdmin(admin.ModelAdmin[Subscription]):
    # The secret is not a field here (editable=False): the admin never shows it.
    list_display = ["url", "team", "agent", "events", "created_at"]
    list_filter = ["team"]
    readonly_fields = ["team", "agent", "url", "events", "created_at"]

    def has_add_permission(self, request: object) -> bool:
        return False  # subscribing checks the URL and makes the secret: the API does it


@admin.register(Delivery)
class DeliveryAdmin(admin.ModelAdmin[Delivery]):
    list_display = [
        "id", "type", "subject", "subscription", "status", "attempts", "last_status_code", "next_attempt_at",
        "created_at",
    ]  # fmt: skip
    list_filter = ["status", "type", "team"]
    list_select_related = ["subscription"]
    readonly_fields = [
        "team", "subscription", "event_id", "type", "subject", "sequence", "person_id", "data", "created_at",
        "status", "attempts", "last_status_code", "last_error", "last_attempt_at", "next_attempt_at",
        "delivered_at", "claimed_until",
    ]  # fmt: skip

    def has_add_permission(self, request: object) -> bool:
        return False

    def has_change_permission(self, request: object, obj: object = None) -> bool:
        return False
