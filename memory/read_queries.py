"""Reads of the retrieval audit: the rows for the API, the lens and a person's export.

The rows are written by memory.services.reads; this module only reads them, always within a team.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.db.models import QuerySet
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from accounts.models import Agent, Person, Team
from memory.exceptions import InvalidArguments
from memory.models import Read
from memory.tools import REGISTRY


def read_tools() -> list[str]:
    """What a read's `tool` may be: every tool that does not write, and `turn`."""
    return sorted([name for name, tool in REGISTRY.items() if not tool.writes] + [Read.TURN])


def parse_time(raw: str, *, field: str) -> datetime:
    """An ISO 8601 date and time from a query parameter (UTC when it names no offset)."""
    try:
        parsed = parse_datetime(raw)
    except ValueError:
        parsed = None
    if parsed is None:
        shown = raw if len(raw) <= 40 else raw[:40] + "…"
        raise InvalidArguments(
            f"{field} must be an ISO 8601 date and time, e.g. 2026-11-30T12:00:00Z (got {shown!r}).", field=field
        )
    return parsed.replace(tzinfo=UTC) if timezone.is_naive(parsed) else parsed


@dataclass(frozen=True)
class ReadFilter:
    person: Person | None = None
    agent: Agent | None = None
    tool: str | None = None
    since: datetime | None = None
    until: datetime | None = None


def reads_of_team(team: Team, wanted: ReadFilter) -> QuerySet[Read]:
    """A team's reads, newest first, narrowed by person, agent, tool and time (since inclusive, until exclusive)."""
    reads = Read.objects.for_team(team).select_related("agent", "person").order_by("-created_at", "-id")
    if wanted.person is not None:
        reads = reads.filter(person=wanted.person)
    if wanted.agent is not None:
        reads = reads.filter(agent=wanted.agent)
    if wanted.tool is not None:
        reads = reads.filter(tool=wanted.tool)
    if wanted.since is not None:
        reads = reads.filter(created_at__gte=wanted.since)
    if wanted.until is not None:
        reads = reads.filter(created_at__lt=wanted.until)
    return reads


def ranked_notes(read: Read) -> list[dict[str, int]]:
    return [{"id": note_id, "rank": rank} for rank, note_id in enumerate(read.notes, start=1)]


def ranked_messages(read: Read) -> list[dict[str, int]]:
    conversations = read.conversations or [0] * len(read.messages)
    return [
        {"id": message_id, "conversation": conversation, "rank": rank}
        for rank, (message_id, conversation) in enumerate(zip(read.messages, conversations, strict=False), start=1)
    ]


def read_out(read: Read) -> dict[str, Any]:
    """One read as the API and the export give it: ids and counts, never what the notes or messages say."""
    return {
        "id": read.pk,
        "tool": read.tool,
        "agent": read.agent.slug,
        "person": read.person.external_id,
        "query": read.query,
        "query_erased": read.query_erased,
        "turn": read.turn_id,
        "as_of": read.as_of.isoformat() if read.as_of is not None else None,
        "notes": ranked_notes(read),
        "messages": ranked_messages(read),
        "note_count": read.note_count,
        "message_count": read.message_count,
        "degraded": list(read.degraded),
        "latency_ms": read.latency_ms,
        "created_at": read.created_at.isoformat(),
    }


def reads_for_export(*, team: Team, person: Person, agent: Agent | None = None) -> list[dict[str, Any]]:
    """Every read about the person still kept (READ_AUDIT_DAYS), oldest first, for their export;
    with an agent, that agent's only (another agent's name its conversations and turns)."""
    reads = Read.objects.for_team(team).filter(person=person).select_related("agent", "person")
    if agent is not None:
        reads = reads.filter(agent=agent)
    return [read_out(read) for read in reads.order_by("created_at", "id")]
