from django.urls import path

from webhooks import api

urlpatterns = [
    path("webhooks", api.WebhookListApi.as_view(), name="webhooks-list"),
    path("webhooks/<int:webhook_id>", api.WebhookDetailApi.as_view(), name="webhooks-detail"),
    path("webhooks/<int:webhook_id>/deliveries", api.DeliveryListApi.as_view(), name="webhooks-deliveries"),
]
