"""Rate limits on the shared cache (Redis), so every web process counts against the same budget.

A limit counts requests per (scope, identity) in a window that opens with the first request
counted and lasts the rate's period; each request increments the counter atomically (INCR). Over
the limit, the caller is told how many seconds remain until the window closes (Retry-After).

When Redis cannot be reached the limit is not applied and the failure is logged: a limit guards
against abuse; it must not take the service down with it.
"""

from __future__ import annotations

import hashlib
import logging
import math
import time
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.http import HttpRequest
from redis.exceptions import RedisError
from rest_framework import exceptions
from rest_framework.request import Request
from rest_framework.throttling import BaseThrottle

from accounts.models import ApiKey
from accounts.usage import count_usage
from config import metrics
from config.env import parse_rate
from config.redis import cache_redis

logger = logging.getLogger(__name__)

_UNITS = {1: "second", 60: "minute", 3600: "hour", 86400: "day"}


@dataclass(frozen=True)
class Rate:
    limit: int
    seconds: int

    @classmethod
    def parse(cls, text: str) -> Rate:
        return cls(*parse_rate(text))

    def __str__(self) -> str:
        for unit_seconds, unit in sorted(_UNITS.items(), reverse=True):
            if self.seconds == unit_seconds:
                return f"{self.limit} requests per {unit}"
            if self.seconds % unit_seconds == 0:
                return f"{self.limit} requests per {self.seconds // unit_seconds} {unit}s"
        return f"{self.limit} requests per {self.seconds} seconds"  # pragma: no cover - 1 divides everything


def digest(text: str) -> str:
    """A cache-key-safe stand-in for an identity that may hold any characters (a username, an address)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


# One round trip per counted request: add one to the window's count, and open the window (note
# when, and let it expire after the period) if this request is its first. A script runs atomically,
# so the window cannot expire between the two.
_COUNT_SCRIPT = """
local count = redis.call('HINCRBY', KEYS[1], 'count', 1)
if count == 1 then
  redis.call('HSET', KEYS[1], 'since', ARGV[1])
  redis.call('EXPIRE', KEYS[1], ARGV[2])
end
return {count, redis.call('HGET', KEYS[1], 'since')}
"""


def count_request(*, scope: str, ident: str, rate: Rate) -> int:
    """Count one request against the limit. Returns 0 when it may proceed, else the seconds until it may."""
    key = cache.make_key(f"ratelimit:{scope}:{digest(ident)}:window")
    now = time.time()
    try:
        count, since = cache_redis().eval(_COUNT_SCRIPT, 1, key, repr(now), rate.seconds)
    except RedisError:
        logger.exception("Rate limit %s not applied: the cache (Redis) is unreachable", scope)
        return 0
    if int(count) <= rate.limit:
        return 0
    metrics.count_rate_limited(scope)
    opened = float(since) if since is not None else now
    return max(1, math.ceil(opened + rate.seconds - now))


def increment(key: str, *, timeout: int) -> int:
    """Atomically add one to a counter that expires `timeout` seconds after its first increment."""
    for _ in range(2):
        cache.add(key, 0, timeout=timeout)
        try:
            return cache.incr(key)
        except ValueError:  # it expired between add() and incr(): start it again
            continue
    cache.set(key, 1, timeout=timeout)
    return 1


def client_address(request: HttpRequest) -> str:
    """The client's address: REMOTE_ADDR, or the X-Forwarded-For entry the NUM_PROXIES trusted proxies added."""
    proxies = settings.NUM_PROXIES
    if proxies:
        header: str = request.META.get("HTTP_X_FORWARDED_FOR", "")
        forwarded = [part.strip() for part in header.split(",") if part.strip()]
        if forwarded:
            return forwarded[-min(proxies, len(forwarded))]
    address: str = request.META.get("REMOTE_ADDR") or "unknown"
    return address


# --- API keys: REST and /mcp share one budget per key ------------------------------------------


def api_key_retry_after(api_key: ApiKey) -> int:
    """Count one request by this key against API_RATE; 0 when it may proceed, else seconds to wait.

    Every authenticated request (REST and /mcp) passes here once, so its agent's usage is counted here too.
    """
    wait = count_request(scope="api", ident=f"{api_key.prefix}:{api_key.pk}", rate=Rate.parse(settings.API_RATE))
    count_usage(team_id=api_key.team_id, agent_id=api_key.agent_id, requests=1, rate_limited=1 if wait else 0)
    return wait


class ApiKeyThrottled(exceptions.Throttled):
    extra_detail_singular = "Retry in {wait} second (the Retry-After header says the same)."
    extra_detail_plural = "Retry in {wait} seconds (the Retry-After header says the same)."


def api_key_throttled(wait: int) -> ApiKeyThrottled:
    return ApiKeyThrottled(wait=wait, detail=f"This API key is over its limit of {Rate.parse(settings.API_RATE)}.")


class ApiKeyThrottle(BaseThrottle):
    """API_RATE per API key (request.auth). Anonymous requests never get this far: authentication refuses them."""

    def allow_request(self, request: Request, view: Any) -> bool:
        api_key = request.auth
        if not isinstance(api_key, ApiKey):
            return True
        wait = api_key_retry_after(api_key)
        if wait:
            # Raised here rather than returned, so the message can name the limit; DRF's handler
            # still adds Retry-After from its `wait`.
            raise api_key_throttled(wait)
        return True
