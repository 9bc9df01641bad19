"""The operator's console in the admin: agents and their keys, and per-agent usage."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from rest_framework.test import APIClient

from accounts.models import Agent, AgentUsage, ApiKey, Team
from accounts.usage import Usage, count_usage, flush_usage, usage_since
from config.redis import cache_redis
from tests.support.fixtures import run_async

pytestmark = pytest.mark.django_db

REMEMBER = {"person": "ada", "key": "home-city", "description": "Where Ada lives", "content": "Ada lives in Oslo."}


@pytest.fixture(autouse=True)
def _no_usage_left_from_other_runs():
    # Counters live in Redis under the database's name, which every run of the suite reuses (with
    # ids starting again): what a run left unflushed must not count for this one's agents.
    redis = cache_redis()
    for key in redis.scan_iter(f"mnemo:usage:{connection.settings_dict['NAME']}:*"):
        redis.delete(key)


def api_client(plaintext: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    return client


def issue_key_in_admin(admin_client, agent: Agent) -> str:
    """The raw key, read from the page the add form leads to (it is shown there once)."""
    response = admin_client.post("/admin/accounts/apikey/add/", {"agent": agent.pk, "name": "console", "can_admin": ""})
    assert response.status_code == 200  # the page itself, not a redirect: the key travels nowhere else
    assert "no-store" in response["Cache-Control"]
    assert not response.cookies.get("messages")
    page = response.content.decode()
    start = page.index('<code id="new-key">') + len('<code id="new-key">')
    return page[start:].split("<", 1)[0]


def test_an_operator_creates_an_agent_issues_a_key_once_and_revokes_it(admin_client):
    team = Team.objects.create(slug="acme", name="Acme")
    response = admin_client.post(
        "/admin/accounts/agent/add/",
        {"team": team.pk, "slug": "Coach-Bot", "name": "Coach", "persona": "Be kind."},
        follow=True,
    )
    assert response.status_code == 200
    agent = Agent.objects.get(team=team)
    assert (agent.slug, agent.name, agent.persona) == ("coach-bot", "Coach", "Be kind.")  # through create_agent

    # The agent's page links to issuing a key for it; the key page shows the raw key once.
    agent_page = admin_client.get(f"/admin/accounts/agent/{agent.pk}/change/").content.decode()
    assert f"/admin/accounts/apikey/add/?agent={agent.pk}" in agent_page
    plaintext = issue_key_in_admin(admin_client, agent)
    assert plaintext.startswith("mnemo_")
    api_key = ApiKey.objects.get(agent=agent)
    assert plaintext.split("_")[2] not in str(ApiKey.objects.values().get())  # only its hash is stored

    # The key works, and no page shows it (or its hash) again.
    assert api_client(plaintext).get("/api/v1/me").json()["agent"] == "coach-bot"
    for url in (
        "/admin/accounts/apikey/",
        f"/admin/accounts/apikey/{api_key.pk}/change/",
        f"/admin/accounts/agent/{agent.pk}/change/",
    ):
        page = admin_client.get(url).content.decode()
        assert plaintext not in page
        assert plaintext.split("_")[2] not in page
        assert api_key.secret_hash not in page
    assert api_key.prefix in admin_client.get(f"/admin/accounts/agent/{agent.pk}/change/").content.decode()

    # Revoked from the keys list: the next call with it is refused.
    response = admin_client.post(
        "/admin/accounts/apikey/", {"action": "revoke_selected", "_selected_action": [api_key.pk]}, follow=True
    )
    assert "Revoked 1 key(s)." in response.content.decode()
    refused = api_client(plaintext).get("/api/v1/me")
    assert refused.status_code == 401
    assert refused.json()["error"]["code"] == "not_authenticated"


def test_a_taken_agent_slug_is_refused_on_the_form(admin_client):
    team = Team.objects.create(slug="acme", name="Acme")
    Agent.objects.create(team=team, slug="coach", name="Coach")
    response = admin_client.post("/admin/accounts/agent/add/", {"team": team.pk, "slug": "coach", "name": "Again"})
    assert response.status_code == 200  # the form again, with the error
    assert "already exists" in response.content.decode()
    assert Agent.objects.filter(team=team).count() == 1


def usage_row(page: str, label: str) -> list[int]:
    row = page.split(f"<th>{label}</th>", 1)[1].split("</tr>", 1)[0]
    return [int(cell.split("</td>")[0]) for cell in row.split("<td>")[1:]]


def test_usage_moves_with_requests_turns_tool_calls_notes_and_rate_limits(admin_client, tenant, other_tenant, settings):
    agent_page = f"/admin/accounts/agent/{tenant.agent.pk}/change/"
    page = admin_client.get(agent_page).content.decode()
    assert usage_row(page, "Last 24 hours") == [0, 0, 0, 0, 0]

    assert tenant.client.get("/api/v1/me").status_code == 200
    assert tenant.client.post("/api/v1/tools/remember", REMEMBER, format="json").status_code == 200
    assert (
        tenant.client.post(
            "/api/v1/tools/recall_memories", {"person": "ada", "query": "Oslo"}, format="json"
        ).status_code
        == 200
    )
    assert tenant.client.post("/api/v1/turns", {"person": "ada", "message": "Hello"}, format="json").status_code == 201
    assert other_tenant.client.get("/api/v1/me").status_code == 200  # another agent's, counted apart
    settings.API_RATE = "5/hour"
    assert tenant.client.get("/api/v1/me").status_code == 200
    assert tenant.client.get("/api/v1/me").status_code == 429

    # requests, turns, tool calls, notes written, rate-limited: read from Redis before any flush.
    expected = [6, 1, 2, 1, 1]
    page = admin_client.get(agent_page).content.decode()
    assert usage_row(page, "Last 24 hours") == expected
    assert usage_row(page, "Last 30 days") == expected
    assert not AgentUsage.objects.exists()

    # Flushed to Postgres, the numbers stay; counted again after the flush, they add up.
    assert flush_usage() >= 2
    row = AgentUsage.objects.get(agent=tenant.agent)
    assert (row.requests, row.turns, row.tool_calls, row.rate_limited) == (6, 1, 2, 1)
    assert AgentUsage.objects.get(agent=other_tenant.agent).requests == 1
    assert usage_row(admin_client.get(agent_page).content.decode(), "Last 24 hours") == expected
    assert tenant.client.get("/api/v1/me").status_code == 429
    assert usage_row(admin_client.get(agent_page).content.decode(), "Last 24 hours") == [7, 1, 2, 1, 2]
    flush_usage()
    assert AgentUsage.objects.get(agent=tenant.agent).requests == 7

    # The usage list shows every agent, linked to its page.
    listing = admin_client.get("/admin/accounts/agent/usage/")
    assert listing.status_code == 200
    rows = {agent.slug: (day, month) for agent, day, month in listing.context["rows"]}
    assert rows[tenant.agent.slug] == ([7, 1, 2, 1, 2], [7, 1, 2, 1, 2])
    assert rows[other_tenant.agent.slug] == ([1, 0, 0, 0, 0], [1, 0, 0, 0, 0])
    assert "/admin/accounts/agent/usage/" in admin_client.get("/admin/accounts/agent/").content.decode()


@pytest.mark.django_db(transaction=True)
def test_mcp_requests_and_tool_calls_count_for_the_keys_agent(web_server, tenant, other_tenant):
    from tests.test_mcp import HOME, http_session

    async def scenario() -> None:
        async with http_session(web_server, tenant.key.plaintext) as session:
            await session.call_tool("remember", HOME)
            await session.call_tool("recall_memories", {"person": "ada", "query": "Oslo"})

    run_async(scenario)
    now = datetime.now(UTC)
    usage = usage_since([tenant.agent.pk, other_tenant.agent.pk], now - timedelta(hours=1))
    assert usage[tenant.agent.pk].tool_calls == 2
    assert usage[tenant.agent.pk].requests >= 3  # the session's opening requests count too
    assert usage[other_tenant.agent.pk] == Usage()


def test_usage_older_than_the_day_counts_for_the_month_only(admin_client, tenant):
    hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    AgentUsage.objects.create(team=tenant.team, agent=tenant.agent, hour=hour - timedelta(days=2), requests=40)
    AgentUsage.objects.create(team=tenant.team, agent=tenant.agent, hour=hour - timedelta(days=31), requests=900)
    page = admin_client.get(f"/admin/accounts/agent/{tenant.agent.pk}/change/").content.decode()
    assert usage_row(page, "Last 24 hours")[0] == 0
    assert usage_row(page, "Last 30 days")[0] == 40


def test_counting_a_request_costs_one_round_trip_to_redis(tenant, record_property):
    runs = 2000
    started = time.perf_counter()
    for _ in range(runs):
        count_usage(team_id=tenant.team.pk, agent_id=tenant.agent.pk, requests=1)
    per_call_ms = (time.perf_counter() - started) / runs * 1000
    started = time.perf_counter()
    for _ in range(runs):
        cache_redis().ping()
    ping_ms = (time.perf_counter() - started) / runs * 1000
    record_property("count_usage_ms", per_call_ms)
    # The measurement docs/operations.md quotes: about one PING's round trip.
    print(f"count_usage: {per_call_ms:.3f} ms per call; a Redis PING: {ping_ms:.3f} ms")
    assert per_call_ms < max(2, 5 * ping_ms)
    flush_usage()
    assert AgentUsage.objects.get(agent=tenant.agent).requests == runs
