"""The webhooks API: subscribe, list, unsubscribe, the delivery log; admin-capable keys only."""

from __future__ import annotations

import pytest

from tests.support.fixtures import make_tenant
from webhooks.models import Delivery, Subscription

URL = "http://127.0.0.1:9/hook"


@pytest.fixture
def allow_private(settings):
    settings.WEBHOOK_ALLOW_PRIVATE = True


def subscribe(tenant, **body):
    return tenant.client.post("/api/v1/webhooks", {"url": URL, "events": ["note.created"], **body}, format="json")


def test_subscribing_answers_a_generated_secret_once(db, allow_private):
    tenant = make_tenant(can_admin=True)
    answer = subscribe(tenant, events=["note.created", "note.erased", "note.created"])
    assert answer.status_code == 201, answer.json()
    body = answer.json()
    assert len(body["secret"]) >= 32
    assert body["events"] == ["note.created", "note.erased"]
    assert body["agent"] == tenant.agent.slug
    subscription = Subscription.objects.get(pk=body["id"])
    assert subscription.secret == body["secret"]
    listed = tenant.client.get("/api/v1/webhooks").json()
    assert [s["id"] for s in listed["results"]] == [body["id"]]
    assert "secret" not in listed["results"][0]


def test_a_given_secret_is_kept_and_not_shown_again(db, allow_private):
    tenant = make_tenant(can_admin=True)
    body = subscribe(tenant, secret="a-secret-of-twenty-chars").json()
    assert body["secret"] == "a-secret-of-twenty-chars"
    assert "twenty" not in tenant.client.get("/api/v1/webhooks").content.decode()


def test_a_short_secret_is_refused(db, allow_private):
    answer = subscribe(make_tenant(can_admin=True), secret="short")
    assert answer.status_code == 400
    assert answer.json()["error"]["field"] == "secret"


@pytest.mark.parametrize("path", ["/api/v1/webhooks", "/api/v1/webhooks/1/deliveries"])
def test_a_plain_key_may_not_list(tenant, path):
    answer = tenant.client.get(path)
    assert answer.status_code == 403
    assert "admin-capable" in answer.json()["error"]["message"]


def test_a_plain_key_may_not_subscribe_or_unsubscribe(tenant, allow_private):
    assert subscribe(tenant).status_code == 403
    assert tenant.client.delete("/api/v1/webhooks/1").status_code == 403
    assert not Subscription.objects.exists()


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("http://127.0.0.1:8000/hook", "loopback"),
        ("http://10.1.2.3/hook", "private"),
        ("http://169.254.169.254/latest/meta-data", "link-local"),
        ("http://[::1]/hook", "loopback"),
        ("http://0.0.0.0/hook", "unspecified"),
        ("http://224.0.0.1/hook", "multicast"),
        ("http://localhost/hook", "loopback"),
        ("http://[::ffff:127.0.0.1]/hook", "loopback"),
    ],
)
def test_a_url_on_a_private_address_is_refused(db, url, says):
    answer = subscribe(make_tenant(can_admin=True), url=url)
    assert answer.status_code == 400, answer.json()
    error = answer.json()["error"]
    assert error["field"] == "url"
    assert says in error["message"]
    assert "WEBHOOK_ALLOW_PRIVATE" in error["message"]
    assert not Subscription.objects.exists()


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("ftp://example.com/hook", "http://"),
        ("file:///etc/passwd", "http://"),
        ("http:///hook", "needs a host"),
        ("https://user:pw@example.com/hook", "user name or password"),
        ("http://example.com:99999/hook", "port"),
        ("http://no-such-host.invalid/hook", "does not resolve"),
    ],
)
def test_a_url_mnemo_cannot_call_is_refused(db, allow_private, url, says):
    answer = subscribe(make_tenant(can_admin=True), url=url)
    assert answer.status_code == 400, answer.json()
    assert answer.json()["error"]["field"] == "url"
    assert says in answer.json()["error"]["message"]


def test_an_unknown_event_is_refused(db, allow_private):
    answer = subscribe(make_tenant(can_admin=True), events=["note.created", "note.read"])
    assert answer.status_code == 400
    assert answer.json()["error"]["field"].startswith("events")


def test_no_events_is_refused(db, allow_private):
    answer = subscribe(make_tenant(can_admin=True), events=[])
    assert answer.status_code == 400
    assert answer.json()["error"]["field"] == "events"


def test_proposal_created_is_an_event_one_may_subscribe_to(db, allow_private):
    assert subscribe(make_tenant(can_admin=True), events=["proposal.created"]).status_code == 201


def test_unsubscribing_removes_the_subscription_and_its_log(db, allow_private):
    tenant = make_tenant(can_admin=True)
    webhook = subscribe(tenant).json()["id"]
    assert tenant.client.delete(f"/api/v1/webhooks/{webhook}").status_code == 204
    assert not Subscription.objects.exists()
    assert tenant.client.delete(f"/api/v1/webhooks/{webhook}").status_code == 404


def test_another_team_s_subscription_is_not_found(db, allow_private):
    mine, theirs = make_tenant(can_admin=True), make_tenant(can_admin=True)
    webhook = subscribe(theirs).json()["id"]
    assert mine.client.get("/api/v1/webhooks").json()["results"] == []
    assert mine.client.get(f"/api/v1/webhooks/{webhook}/deliveries").status_code == 404
    assert mine.client.delete(f"/api/v1/webhooks/{webhook}").status_code == 404
    assert Subscription.objects.filter(pk=webhook).exists()


def test_the_delivery_log_lists_a_subscription_s_deliveries_newest_first(db, allow_private):
    tenant = make_tenant(can_admin=True)
    webhook = Subscription.objects.get(pk=subscribe(tenant).json()["id"])
    for n in range(2):
        Delivery.objects.create(
            team=tenant.team, subscription=webhook, event_id=f"00000000-0000-0000-0000-00000000000{n}",
            type="note.created", subject="note:1", sequence=n, data={}, created_at="2026-12-01T10:00:00Z",
            attempts=n, last_status_code=500 if n else None, last_error="HTTP 500" if n else "",
        )  # fmt: skip
    rows = tenant.client.get(f"/api/v1/webhooks/{webhook.pk}/deliveries").json()["results"]
    assert [(r["attempts"], r["status"], r["last_status_code"], r["last_error"]) for r in rows] == [
        (1, "pending", 500, "HTTP 500"),
        (0, "pending", None, ""),
    ]
    assert set(rows[0]) >= {"id", "event", "type", "next_attempt_at", "delivered_at", "created_at"}
