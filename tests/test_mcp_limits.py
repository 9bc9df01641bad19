"""/mcp checks Host and Origin against ALLOWED_HOSTS and holds each key to API_RATE, with the REST API."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import httpx
import pytest

from config.mcp import transport_security
from tests.support.fixtures import serve_asgi

INITIALIZE = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}  # fmt: skip
ACCEPT = {"Accept": "application/json, text/event-stream"}


@pytest.fixture(scope="module")
def limited_server(django_db_setup, django_db_blocker) -> Iterator[str]:
    """The ASGI app under uvicorn on the test database, with API_RATE at 3 an hour per key."""
    with (
        django_db_blocker.unblock(),
        serve_asgi("limits", API_RATE="3/hour", ALLOWED_HOSTS="localhost,127.0.0.1,[::1]") as server,
    ):
        yield server.url


def initialize(url: str, key: str | None, **headers: str) -> httpx.Response:
    auth = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.post(f"{url}/mcp", json=INITIALIZE, headers={**ACCEPT, **auth, **headers}, timeout=30)


@pytest.mark.django_db(transaction=True)
def test_mcp_answers_only_to_allowed_hosts_and_origins(limited_server, tenant):
    port = limited_server.rsplit(":", 1)[1]
    key = tenant.key.plaintext

    foreign = initialize(limited_server, key, Host="evil.example")
    assert foreign.status_code == 421
    assert foreign.json() == {
        "error": {
            "code": "misdirected_request",
            "message": "This server does not answer to that Host header; see ALLOWED_HOSTS.",
        }
    }
    assert initialize(limited_server, None, Host=f"evil.example:{port}").status_code == 421  # before the key
    assert initialize(limited_server, key, Host=f"localhost.evil.example:{port}").status_code == 421

    cross_site = initialize(limited_server, key, Origin="http://evil.example")
    assert cross_site.status_code == 403
    assert cross_site.json()["error"] == {
        "code": "permission_denied",
        "message": "Requests from that Origin are not allowed here.",
    }

    same_site = initialize(limited_server, key, Host=f"localhost:{port}", Origin=f"http://localhost:{port}")
    assert same_site.status_code == 200
    assert same_site.json()["result"]["serverInfo"]["name"] == "mnemo"


@pytest.mark.django_db(transaction=True)
def test_mcp_holds_a_key_to_the_api_rate_together_with_rest(limited_server, tenant, other_tenant):
    key = tenant.key.plaintext
    assert initialize(limited_server, key).status_code == 200
    rest = httpx.get(f"{limited_server}/api/v1/me", headers={"Authorization": f"Bearer {key}"})
    assert rest.status_code == 200
    assert initialize(limited_server, key).status_code == 200

    refused = initialize(limited_server, key)
    assert refused.status_code == 429
    wait = int(refused.headers["Retry-After"])
    assert 1 <= wait <= 3600
    assert refused.json() == {
        "error": {
            "code": "throttled",
            "message": (
                f"This API key is over its limit of 3 requests per hour. Retry in {wait} seconds "
                "(the Retry-After header says the same)."
            ),
        }
    }
    assert httpx.get(f"{limited_server}/api/v1/me", headers={"Authorization": f"Bearer {key}"}).status_code == 429
    assert initialize(limited_server, other_tenant.key.plaintext).status_code == 200


def test_the_allowed_hosts_become_the_sdks_host_and_origin_lists(caplog):
    with caplog.at_level(logging.WARNING, logger="config.mcp"):
        security = transport_security(["mnemo.example.com", "[::1]", ".example.org"], ["https://app.example.net"])
    assert security.enable_dns_rebinding_protection
    assert security.allowed_hosts == [
        "mnemo.example.com", "mnemo.example.com:*", "[::1]", "[::1]:*", "example.org", "example.org:*",
    ]  # fmt: skip
    assert "https://mnemo.example.com" in security.allowed_origins
    assert "http://[::1]:*" in security.allowed_origins
    assert "https://app.example.net" in security.allowed_origins
    assert "allows subdomains in Django, but /mcp accepts only example.org itself" in caplog.text


def test_allowed_hosts_star_turns_the_checks_off_and_says_so(caplog):
    with caplog.at_level(logging.WARNING, logger="config.mcp"):
        security = transport_security(["*"], ["https://*.example.net"])
    assert not security.enable_dns_rebinding_protection
    assert "ALLOWED_HOSTS contains '*': /mcp checks neither the Host nor the Origin header" in caplog.text


def test_wildcard_trusted_origins_are_left_out():
    security = transport_security(["localhost"], ["https://*.example.net"])
    assert not any("example.net" in origin for origin in security.allowed_origins)
