"""The client's webhook methods against the live server, and verify_signature."""

from __future__ import annotations

import hashlib
import hmac

import pytest
from mnemo_client import AsyncMnemo, Invalid, Mnemo, NotFound, PermissionDenied, verify_signature

from tests.support.fixtures import run_async
from webhooks.models import Subscription

# A public address written as one: the live server checks it without asking DNS. Nothing is written in
# these tests' teams while subscribed, so nothing is ever sent there.
PUBLIC_URL = "https://1.1.1.1/mnemo-hook"

pytestmark = pytest.mark.django_db(transaction=True)  # the live server reads the keys: they must commit


def test_an_admin_key_subscribes_lists_reads_the_log_and_unsubscribes(web_server, admin_tenant):
    with Mnemo(web_server, api_key=admin_tenant.key.plaintext) as admin:
        created = admin.subscribe_webhook(PUBLIC_URL, ["note.created", "note.erased"])
        assert len(created["secret"]) >= 32
        assert Subscription.objects.get(pk=created["id"]).secret == created["secret"]
        listed = admin.webhooks()
        assert [(w["id"], w["url"], w["events"]) for w in listed["results"]] == [
            (created["id"], PUBLIC_URL, ["note.created", "note.erased"])
        ]
        assert "secret" not in listed["results"][0]
        assert admin.webhook_deliveries(created["id"])["results"] == []
        admin.delete_webhook(created["id"])
        assert admin.webhooks()["count"] == 0
        with pytest.raises(NotFound):
            admin.delete_webhook(created["id"])


def test_webhook_errors_are_typed(web_server, tenant, admin_tenant):
    with Mnemo(web_server, api_key=tenant.key.plaintext) as plain:
        with pytest.raises(PermissionDenied):
            plain.webhooks()
        with pytest.raises(PermissionDenied):
            plain.subscribe_webhook(PUBLIC_URL, ["note.created"])
    with Mnemo(web_server, api_key=admin_tenant.key.plaintext) as admin:
        with pytest.raises(Invalid) as refused:
            admin.subscribe_webhook("http://127.0.0.1:9/hook", ["note.created"])
        assert refused.value.field == "url"
        with pytest.raises(Invalid):
            admin.subscribe_webhook(PUBLIC_URL, ["note.read"])


def test_the_async_client_subscribes_with_a_secret_of_its_own(web_server, admin_tenant):
    async def scenario() -> tuple[str, int]:
        async with AsyncMnemo(web_server, api_key=admin_tenant.key.plaintext) as admin:
            created = await admin.subscribe_webhook(PUBLIC_URL, ["person.erased"], secret="my-own-secret-1234")
            count = (await admin.webhooks())["count"]
            await admin.delete_webhook(created["id"])
            return created["secret"], count

    assert run_async(scenario) == ("my-own-secret-1234", 1)


def test_verify_signature_accepts_mnemo_s_signature_only():
    body = b'{"id":"e1","type":"note.created","created_at":"2026-12-04T10:00:00+00:00","data":{}}'
    header = "sha256=" + hmac.new(b"s3cret", body, hashlib.sha256).hexdigest()
    assert verify_signature(body, header, "s3cret")
    assert not verify_signature(body, header, "other")
    assert not verify_signature(body + b" ", header, "s3cret")
    assert not verify_signature(body, header.removeprefix("sha256="), "s3cret")
    assert not verify_signature(body, None, "s3cret")
