"""The Django admin shows the delivery log, and never a subscription's secret."""

from __future__ import annotations

from tests.support.fixtures import make_tenant
from webhooks.models import Delivery, Subscription

SECRET = "never-shown-in-the-admin-123"


def test_the_admin_lists_deliveries_and_hides_the_secret(db, admin_client):
    tenant = make_tenant(can_admin=True)
    subscription = Subscription.objects.create(
        team=tenant.team, agent=tenant.agent, url="https://1.1.1.1/hook", events=["note.created"], secret=SECRET
    )
    delivery = Delivery.objects.create(
        team=tenant.team, subscription=subscription, event_id="00000000-0000-0000-0000-000000000001",
        type="note.created", subject="note:1", data={"note": 1}, created_at="2026-12-01T10:00:00Z",
        attempts=2, last_status_code=503, last_error="HTTP 503: busy",
    )  # fmt: skip
    pages = [
        "/admin/webhooks/subscription/",
        f"/admin/webhooks/subscription/{subscription.pk}/change/",
        "/admin/webhooks/delivery/",
        f"/admin/webhooks/delivery/{delivery.pk}/change/",
    ]
    for page in pages:
        answer = admin_client.get(page)
        assert answer.status_code == 200, page
        assert SECRET not in answer.content.decode(), page
    log = admin_client.get(f"/admin/webhooks/delivery/{delivery.pk}/change/").content.decode()
    assert "HTTP 503: busy" in log
    assert admin_client.get("/admin/webhooks/subscription/add/").status_code == 403
