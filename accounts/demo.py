"""The demo tenant `make run` prints: a team, a coach agent, an owner login and an agent key."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.db import transaction

from accounts.models import Agent, Team
from accounts.services import (
    authenticate_key,
    create_agent,
    create_team,
    ensure_owner_login,
    get_or_create_person,
    issue_api_key,
    link_person_to_user,
)

DEMO_TEAM = "demo"
DEMO_AGENT = "coach"
DEMO_OWNER = "owner"
COACH_PERSONA = (
    "You are a friendly coach. You remember what the person tells you about themselves and use it, "
    "and you say so plainly when you do not know something."
)


@dataclass(frozen=True)
class DemoCredentials:
    team: Team
    agent: Agent
    username: str
    password: str
    api_key: str


def _read_or_create(path: Path, make: Callable[[], str]) -> str:
    if path.exists():
        return path.read_text().strip()
    path.parent.mkdir(parents=True, exist_ok=True)
    value = make()
    path.write_text(value)
    path.chmod(0o600)
    return value


@transaction.atomic
def ensure_demo() -> DemoCredentials:
    """Idempotent: reuses the team, agent, login and key from earlier runs (kept in the data dir)."""
    team = Team.objects.filter(slug=DEMO_TEAM).first() or create_team(slug=DEMO_TEAM, name="Demo team")
    agent = Agent.objects.filter(team=team, slug=DEMO_AGENT).first() or create_agent(
        team=team, slug=DEMO_AGENT, name="Coach", persona=COACH_PERSONA
    )
    secrets_dir = settings.DATA_DIR / "demo"
    password = _read_or_create(secrets_dir / "owner_password", lambda: secrets.token_urlsafe(12))
    user = ensure_owner_login(team=team, username=DEMO_OWNER, password=password)
    person = get_or_create_person(team=team, external_id=DEMO_OWNER)
    if person.user_id != user.pk:
        link_person_to_user(person=person, user=user)

    key_file = secrets_dir / "agent_key"
    stored = key_file.read_text().strip() if key_file.exists() else ""
    current = authenticate_key(stored) if stored else None
    if current is None or current.agent_id != agent.pk:
        issued = issue_api_key(agent=agent, name="demo (make run)", can_admin=True)
        key_file.parent.mkdir(parents=True, exist_ok=True)
        key_file.write_text(issued.plaintext)
        key_file.chmod(0o600)
        stored = issued.plaintext
    return DemoCredentials(team=team, agent=agent, username=DEMO_OWNER, password=password, api_key=stored)
