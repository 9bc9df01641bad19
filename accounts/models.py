"""Tenants and who acts within them: teams, memberships, agents, people, API keys.

Every tenant table carries team_id directly and every unique constraint leads with it, so
the schema can later be distributed by team without a redesign.
"""

from __future__ import annotations

from typing import Self

from django.conf import settings
from django.db import models
from django.db.models.functions import Length

# Lets constraints say secret_hash__length=64.
models.CharField.register_lookup(Length)


class Team(models.Model):
    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


class Membership(models.Model):
    class Role(models.TextChoices):
        ADMIN = "admin", "Admin"
        MEMBER = "member", "Member"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.MEMBER)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["team", "user"], name="membership_unique_user_per_team"),
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.team} ({self.role})"


class AgentQuerySet(models.QuerySet["Agent"]):
    def for_team(self, team: Team) -> Self:
        return self.filter(team=team)


class Agent(models.Model):
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="agents")
    slug = models.SlugField(max_length=64)
    name = models.CharField(max_length=200)
    persona = models.TextField(blank=True, help_text="The standing instructions this agent's turns start with.")
    created_at = models.DateTimeField(auto_now_add=True)

    objects = AgentQuerySet.as_manager()

    # DRF's IsAuthenticated asks request.user.is_authenticated; an API key authenticates an agent.
    is_authenticated = True

    class Meta:
        ordering = ["team", "slug"]
        constraints = [
            models.UniqueConstraint(fields=["team", "slug"], name="agent_unique_slug_per_team"),
        ]

    def __str__(self) -> str:
        return f"{self.team.slug}/{self.slug}"


class PersonQuerySet(models.QuerySet["Person"]):
    def for_team(self, team: Team) -> Self:
        return self.filter(team=team)


class Person(models.Model):
    """Someone agents talk to, known by the agent platform's own id for them."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="people")
    external_id = models.CharField(max_length=200)
    display_name = models.CharField(max_length=200, blank=True)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="people",
        help_text="The login that may open this person's Memory lens.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    erased_at = models.DateTimeField(
        null=True, blank=True, help_text="When everything held about this person was erased (the row is a tombstone)."
    )
    review_writes = models.BooleanField(
        default=False,
        help_text="What agents learn about this person waits for their approval (memory.services.proposals).",
    )

    objects = PersonQuerySet.as_manager()

    class Meta:
        # By the team's id: ordering by the team would join its row into every query (see Bank.Meta).
        ordering = ["team_id", "external_id"]
        verbose_name_plural = "people"
        constraints = [
            models.UniqueConstraint(fields=["team", "external_id"], name="person_unique_external_id_per_team"),
            models.CheckConstraint(condition=models.Q(external_id__regex=r"\S"), name="person_external_id_not_blank"),
        ]

    def __str__(self) -> str:
        return self.display_name or self.external_id


class ApiKeyQuerySet(models.QuerySet["ApiKey"]):
    def active(self) -> Self:
        return self.filter(revoked_at__isnull=True)


class ApiKey(models.Model):
    """A per-agent credential. Only a SHA-256 of the secret is stored; the secret is shown once."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="api_keys")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(max_length=200, blank=True)
    prefix = models.CharField(max_length=16, help_text="The visible part of the key, for telling keys apart.")
    secret_hash = models.CharField(max_length=64, editable=False)
    can_admin = models.BooleanField(
        default=False, help_text="May change the team's memory settings (bank policy and limits)."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = ApiKeyQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "API key"
        constraints = [
            models.UniqueConstraint(fields=["team", "prefix"], name="apikey_unique_prefix_per_team"),
            models.CheckConstraint(condition=models.Q(secret_hash__length=64), name="apikey_secret_hash_is_sha256"),
        ]
        indexes = [models.Index(fields=["prefix"], name="apikey_prefix_lookup")]

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.agent})"

    @property
    def is_revoked(self) -> bool:
        return self.revoked_at is not None


class AgentUsage(models.Model):
    """What an agent did in one hour, for the operator's console (accounts.usage counts it).

    Counted in Redis as requests arrive and added here by the flush task; a row is never edited
    by hand. Notes written are not counted here: the revision log already records each one.
    """

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="usage")
    hour = models.DateTimeField(help_text="The hour counted (its start, UTC).")
    requests = models.PositiveBigIntegerField(default=0, help_text="Authenticated API and MCP requests.")
    turns = models.PositiveBigIntegerField(default=0, help_text="Turns composed.")
    tool_calls = models.PositiveBigIntegerField(default=0, help_text="Tool calls, over REST or MCP.")
    rate_limited = models.PositiveBigIntegerField(default=0, help_text="Requests refused with 429.")

    class Meta:
        ordering = ["team_id", "agent_id", "-hour"]
        verbose_name = "agent usage"
        verbose_name_plural = "agent usage"
        constraints = [
            models.UniqueConstraint(fields=["team", "agent", "hour"], name="agentusage_unique_agent_hour"),
        ]

    def __str__(self) -> str:
        return f"{self.agent_id} at {self.hour:%Y-%m-%d %H:00}"
