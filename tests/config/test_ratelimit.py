"""The API's rate limit per key (REST; /mcp is in tests/test_mcp_limits.py) and the rate settings."""

from __future__ import annotations

import logging

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import RequestFactory
from rest_framework.test import APIClient

from accounts.services import issue_api_key
from config.env import env_rate, parse_rate
from config.ratelimit import Rate, client_address, count_request

REMEMBER = {"person": "ada", "key": "home-city", "description": "Where Ada lives", "content": "Oslo"}


@pytest.mark.django_db
def test_a_key_over_its_rate_gets_429_with_retry_after_and_other_keys_do_not(tenant, other_tenant, settings):
    settings.API_RATE = "3/hour"
    assert tenant.client.get("/api/v1/me").status_code == 200
    assert tenant.client.post("/api/v1/tools/remember", REMEMBER, format="json").status_code == 200
    assert tenant.client.get("/api/v1/notes").status_code == 200

    refused = tenant.client.get("/api/v1/me")
    assert refused.status_code == 429
    wait = int(refused["Retry-After"])
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
    assert tenant.client.post("/api/v1/tools/remember", {**REMEMBER, "key": "pet"}, format="json").status_code == 429
    assert not tenant.team.notes.filter(key="pet").exists()  # refused before anything ran

    # Another team's key, and another key of the same agent from the same address, have budgets of their own.
    assert other_tenant.client.get("/api/v1/me").status_code == 200
    second = APIClient()
    second.credentials(HTTP_AUTHORIZATION=f"Bearer {issue_api_key(agent=tenant.agent, name='second').plaintext}")
    assert second.get("/api/v1/me").status_code == 200


@pytest.mark.django_db
def test_requests_without_a_valid_key_are_refused_not_counted(tenant, settings):
    settings.API_RATE = "1/hour"
    for _ in range(3):
        assert APIClient().get("/api/v1/me").status_code == 401
    assert tenant.client.get("/api/v1/me").status_code == 200
    assert tenant.client.get("/api/v1/me").status_code == 429


@pytest.mark.django_db
def test_an_unreachable_cache_lets_requests_through_and_says_so_in_the_log(tenant, settings, tmp_path, caplog):
    settings.API_RATE = "1/hour"
    settings.CACHES = {
        "default": {**settings.CACHES["default"], "LOCATION": f"unix://{tmp_path}/no-redis.sock", "OPTIONS": {}}
    }
    with caplog.at_level(logging.ERROR, logger="config.ratelimit"):
        assert [tenant.client.get("/api/v1/me").status_code for _ in range(3)] == [200, 200, 200]
    assert "Rate limit api not applied: the cache (Redis) is unreachable" in caplog.text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("600/min", (600, 60)),
        ("10/s", (10, 1)),
        ("5/15min", (5, 900)),
        ("1/day", (1, 86400)),
        ("100/hours", (100, 3600)),
    ],
)
def test_rates_read_as_requests_per_period(text, expected):
    assert parse_rate(text) == expected


@pytest.mark.parametrize("text", ["600", "0/min", "ten/min", "5/0m", "5/fortnight", "-1/s", "5/ min", "\uff15/min"])
def test_malformed_rates_stop_start_up(monkeypatch, text):
    monkeypatch.setenv("X_RATE", text)
    with pytest.raises(ImproperlyConfigured, match=r"^X_RATE: "):
        env_rate("X_RATE", default="1/s")


def test_rates_describe_themselves_in_words():
    assert str(Rate.parse("600/min")) == "600 requests per minute"
    assert str(Rate.parse("5/15min")) == "5 requests per 15 minutes"
    assert str(Rate.parse("30/2h")) == "30 requests per 2 hours"
    assert str(Rate.parse("7/90s")) == "7 requests per 90 seconds"


def test_the_client_address_trusts_only_as_many_proxies_as_configured(settings):
    request = RequestFactory().get("/", REMOTE_ADDR="10.0.0.1", HTTP_X_FORWARDED_FOR="6.6.6.6, 203.0.113.5")
    settings.NUM_PROXIES = 0
    assert client_address(request) == "10.0.0.1"
    settings.NUM_PROXIES = 1
    assert client_address(request) == "203.0.113.5"  # what our proxy saw; the first entry is the client's say-so


def test_retry_after_counts_from_the_request_that_opened_the_window(mocker):
    clock = mocker.patch("config.ratelimit.time.time", return_value=1_000_000.0)
    rate = Rate.parse("2/hour")
    assert count_request(scope="t", ident="a", rate=rate) == 0
    clock.return_value += 600
    assert count_request(scope="t", ident="a", rate=rate) == 0
    clock.return_value += 0.5
    assert count_request(scope="t", ident="a", rate=rate) == 3000  # 3600 - 600.5, rounded up
    assert count_request(scope="t", ident="b", rate=rate) == 0
