"""Sign-in lockout: too many failed passwords for one username, or from one address, stop further tries.

LOGIN_MAX_FAILURES failures within LOGIN_LOCKOUT_SECONDS (counted from the first of them) lock the
username, or the address, for LOGIN_LOCKOUT_SECONDS. While locked, attempts are refused before the
password is checked, so a right guess during a lockout is worth nothing. A successful sign-in
clears its username's count, not its address's: one valid account must not reset the budget of an
address that is guessing at others. Counters and locks live in the shared cache (Redis).
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache
from redis.exceptions import RedisError

from config.ratelimit import digest, increment

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Lockout:
    seconds: int  # until attempts are accepted again

    @property
    def message(self) -> str:
        return (
            f"Too many failed sign-in attempts for this account or from this address. Try again in {self.wait_words}."
        )

    @property
    def wait_words(self) -> str:
        if self.seconds < 60:
            return f"{self.seconds} second{'s' if self.seconds != 1 else ''}"
        minutes = math.ceil(self.seconds / 60)
        return f"{minutes} minute{'s' if minutes != 1 else ''}"


def _identities(*, username: str, address: str) -> dict[str, str]:
    # Usernames are compared case-insensitively here so that "Ada" and "ada" share one budget.
    return {"user": digest(username.casefold()), "address": digest(address)}


def _failures_key(kind: str, ident: str) -> str:
    return f"login:failures:{kind}:{ident}"


def _lock_key(kind: str, ident: str) -> str:
    return f"login:locked:{kind}:{ident}"


def login_lockout(*, username: str, address: str) -> Lockout | None:
    """The lockout that refuses a sign-in as this username from this address now, if any."""
    keys = [_lock_key(kind, ident) for kind, ident in _identities(username=username, address=address).items()]
    try:
        locked_until = [until for until in cache.get_many(keys).values() if isinstance(until, float)]
    except RedisError:
        logger.exception("Sign-in lockout not checked: the cache (Redis) is unreachable")
        return None
    if not locked_until:
        return None
    return Lockout(seconds=max(1, math.ceil(max(locked_until) - time.time())))


def record_login_failure(*, username: str, address: str) -> Lockout | None:
    """Count a failed sign-in; returns the lockout it starts, if it is the one too many."""
    window = settings.LOGIN_LOCKOUT_SECONDS
    started: Lockout | None = None
    try:
        for kind, ident in _identities(username=username, address=address).items():
            failures = increment(_failures_key(kind, ident), timeout=window)
            if failures < settings.LOGIN_MAX_FAILURES:
                continue
            if cache.add(_lock_key(kind, ident), time.time() + window, timeout=window):
                logger.warning(
                    "Sign-in locked for %ss: %s failed attempts for username %r from address %s (locked by %s)",
                    window, failures, username, address, kind,
                )  # fmt: skip
            started = Lockout(seconds=window)
    except RedisError:
        logger.exception("Failed sign-in not counted: the cache (Redis) is unreachable")
    return started


def clear_login_failures(*, username: str) -> None:
    try:
        cache.delete(_failures_key("user", _identities(username=username, address="")["user"]))
    except RedisError:
        logger.exception("Failed sign-ins not cleared: the cache (Redis) is unreachable")
