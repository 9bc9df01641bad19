"""API overhead: an authenticated request against the same request without authentication work."""

from __future__ import annotations

from bench.harness import measure, print_table


def run(scratch_team_slug: str) -> None:
    from django.test import Client

    from accounts.services import create_agent, create_team, issue_api_key

    team = create_team(slug=scratch_team_slug)
    key = issue_api_key(agent=create_agent(team=team, slug="bench")).plaintext
    client = Client()
    headers = {"Authorization": f"Bearer {key}"}

    baseline = measure("GET /api/v1/me without a key (401 path)", lambda i: client.get("/api/v1/me"), repeat=300)
    authed = measure("GET /api/v1/me with a key", lambda i: client.get("/api/v1/me", headers=headers), repeat=300)
    print_table("API key authentication", [(baseline, None), (authed, baseline)])
