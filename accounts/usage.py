"""Per-agent usage for the operator's console: requests, turns, tool calls and rate-limited requests.

A request adds to its agent's counters for the current hour in Redis (one pipelined round trip:
HINCRBY on the agent-hour's hash, SADD of that hash to the pending set). `flush_usage`, run every
minute by Celery beat, moves each pending hash into its AgentUsage row (an additive UPSERT). A
read adds what Postgres holds to what Redis holds that is not flushed yet, so the numbers are
current even when beat is behind. Counting never fails a request: when Redis cannot be reached
the count is lost and the failure logged.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, fields
from datetime import UTC, datetime, timedelta

from django.db import connection, transaction
from redis.exceptions import RedisError

from accounts.models import Agent, AgentUsage
from config.redis import cache_redis

logger = logging.getLogger(__name__)

COUNTERS = ("requests", "turns", "tool_calls", "rate_limited")
# A hash beat never flushed (no beat, no worker) still goes in time; a read then misses it.
UNFLUSHED_SECONDS = 40 * 86400


@dataclass
class Usage:
    requests: int = 0
    turns: int = 0
    tool_calls: int = 0
    rate_limited: int = 0
    notes_written: int = 0  # from the revision log (memory.queries.notes_written_by)

    def add(self, counts: dict[str, int]) -> None:
        for name, value in counts.items():
            setattr(self, name, getattr(self, name) + value)

    def as_dict(self) -> dict[str, int]:
        return {field.name: getattr(self, field.name) for field in fields(self)}


def _prefix() -> str:
    # Per database, as the accounts mark is (accounts.keycache.mark_key): deployments or test runs
    # sharing a Redis never flush each other's counts into the wrong agents.
    return f"mnemo:usage:{connection.settings_dict['NAME']}"


def _pending_key() -> str:
    return f"{_prefix()}:pending"


def _hash_key(member: str) -> str:
    return f"{_prefix()}:{member}"


def _member(team_id: int, agent_id: int, hour: int) -> str:
    return f"{team_id}:{agent_id}:{hour}"


def _add_to_hash(member: str, counts: dict[str, int]) -> None:
    key = _hash_key(member)
    pipe = cache_redis().pipeline(transaction=False)
    for name, value in counts.items():
        pipe.hincrby(key, name, value)
    pipe.expire(key, UNFLUSHED_SECONDS)
    pipe.sadd(_pending_key(), member)
    pipe.execute()


def count_usage(*, team_id: int, agent_id: int, **counts: int) -> None:
    """Add to an agent's counters for this hour (names from COUNTERS)."""
    try:
        _add_to_hash(_member(team_id, agent_id, int(time.time() // 3600)), counts)
    except RedisError:
        logger.warning("Usage not counted for agent %s: the cache (Redis) is unreachable", agent_id, exc_info=True)


# Take a hash and forget it in one step: a count that lands after the script starts a new hash
# (and re-adds it to the pending set), so nothing is counted twice or dropped between the two.
_TAKE_SCRIPT = """
local counts = redis.call('HGETALL', KEYS[1])
redis.call('DEL', KEYS[1])
redis.call('SREM', KEYS[2], ARGV[1])
return counts
"""


def _hour_start(hour: int) -> datetime:
    return datetime.fromtimestamp(hour * 3600, tz=UTC)


def _parse_member(member: bytes | str) -> tuple[int, int, int]:
    text = member.decode() if isinstance(member, bytes) else member
    team_id, agent_id, hour = (int(part) for part in text.split(":"))
    return team_id, agent_id, hour


def _counts(pairs: Iterable[tuple[bytes, bytes]]) -> dict[str, int]:
    return {name.decode(): int(value) for name, value in pairs if name.decode() in COUNTERS}


def _add_to_row(team_id: int, agent_id: int, hour: int, counts: dict[str, int]) -> None:
    table, agents = AgentUsage._meta.db_table, Agent._meta.db_table
    values = [counts.get(name, 0) for name in COUNTERS]
    columns = ", ".join(COUNTERS)
    added = ", ".join(f"{name} = {table}.{name} + EXCLUDED.{name}" for name in COUNTERS)
    with connection.cursor() as cursor:
        # An agent deleted since its requests were counted has nothing to add to.
        cursor.execute(
            f"""
            INSERT INTO {table} (team_id, agent_id, hour, {columns})
            SELECT %s, %s, %s, {", ".join(["%s"] * len(COUNTERS))}
            WHERE EXISTS (SELECT 1 FROM {agents} WHERE id = %s)
            ON CONFLICT (team_id, agent_id, hour) DO UPDATE SET {added}
            """,
            [team_id, agent_id, _hour_start(hour), *values, agent_id],
        )


def flush_usage() -> int:
    """Move every pending counter from Redis into AgentUsage; returns how many agent-hours moved.
    Safe to run twice at once: each hash is taken by one run only."""
    redis = cache_redis()
    moved = 0
    for raw in redis.smembers(_pending_key()):
        team_id, agent_id, hour = _parse_member(raw)
        member = _member(team_id, agent_id, hour)
        flat = redis.eval(_TAKE_SCRIPT, 2, _hash_key(member), _pending_key(), member)
        counts = _counts(zip(flat[::2], flat[1::2], strict=True))
        if not any(counts.values()):
            continue
        try:
            with transaction.atomic():
                _add_to_row(team_id, agent_id, hour, counts)
        except Exception:
            # Give the counts back for the next run, then let the task fail loudly.
            _add_to_hash(member, counts)
            raise
        moved += 1
    return moved


def usage_since(agent_ids: Iterable[int], since: datetime) -> dict[int, Usage]:
    """Each agent's counters from the hour holding `since` on: Postgres plus what Redis holds unflushed."""
    wanted = set(agent_ids)
    usage = {agent_id: Usage() for agent_id in wanted}
    first_hour = int(since.timestamp() // 3600)
    rows = AgentUsage.objects.filter(agent_id__in=wanted, hour__gte=_hour_start(first_hour)).values_list(
        "agent_id", *COUNTERS
    )
    # Summed here rather than grouped in SQL: at most 720 hourly rows per agent for thirty days.
    for agent_id, *values in rows:
        usage[agent_id].add(dict(zip(COUNTERS, values, strict=True)))
    try:
        redis = cache_redis()
        members = [
            member
            for member in (_parse_member(raw) for raw in redis.smembers(_pending_key()))
            if member[1] in wanted and member[2] >= first_hour
        ]
        if members:
            pipe = redis.pipeline(transaction=False)
            for member in members:
                pipe.hgetall(_hash_key(_member(*member)))
            for (_, agent_id, _), held in zip(members, pipe.execute(), strict=True):
                usage[agent_id].add(_counts(held.items()))
    except RedisError:
        logger.warning("Usage shown without unflushed counts: the cache (Redis) is unreachable", exc_info=True)
    return usage


def window_starts(now: datetime) -> tuple[datetime, datetime]:
    """The starts of the console's two windows, in whole hours: the last 24 hours (this one and the
    23 before it) and the last 30 days (720 hours)."""
    this_hour = _hour_start(int(now.timestamp() // 3600))
    return this_hour - timedelta(hours=23), this_hour - timedelta(hours=719)


def usage_windows(agent_ids: Iterable[int], *, now: datetime) -> tuple[dict[int, Usage], dict[int, Usage]]:
    """(the last 24 hours, the last 30 days) per agent (window_starts)."""
    ids = list(agent_ids)
    day, month = window_starts(now)
    return usage_since(ids, day), usage_since(ids, month)
