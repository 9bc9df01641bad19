"""Verified API keys, remembered by each process so a request need not look its key up again.

Looking a key up (with its agent and team) is a database query and most of an API request's own
work. A process remembers each key it verified for at most KEY_CACHE_SECONDS, and trusts what it
remembers only while the *accounts mark* in Redis is the one it saw when it looked the key up.
Every write to a key, an agent or a team sets a new mark (at once, and again when its transaction
commits), so a revoked key, a deleted agent or a renamed team takes effect on the next request in
every process. Reading the mark is one Redis GET; when Redis cannot be read, every request asks
the database, as if nothing were remembered.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
import uuid
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from redis.exceptions import RedisError

from accounts.models import ApiKey
from config.redis import cache_redis

logger = logging.getLogger(__name__)

MAX_ENTRIES = 10_000  # keys remembered per process; past it, the memory starts again
_MISSING = object()

_lock = threading.Lock()
_entries: dict[str, tuple[ApiKey, bytes | None, float]] = {}  # "prefix:digest" -> (key, mark, remembered at)


def mark_key() -> str:
    """The accounts mark's key: one for every process on the same database, whatever KEY_PREFIX each
    uses (the keys it stands for live in that database). Processes of another database on the same
    Redis (another deployment, a parallel test run) keep a mark of their own, so their writes never
    make this database's processes look their keys up again."""
    return f"mnemo:accounts:mark:{connection.settings_dict['NAME']}"


def current_mark() -> bytes | object | None:
    """The accounts mark in Redis (None when never set), or _MISSING when Redis cannot be read."""
    try:
        mark = cache_redis().get(mark_key())
    except RedisError:
        logger.warning("API keys are looked up in the database: the cache (Redis) is unreachable", exc_info=True)
        return _MISSING
    return mark if mark is None or isinstance(mark, bytes) else str(mark).encode()


def _new_mark() -> None:
    try:
        cache_redis().set(mark_key(), uuid.uuid4().hex)
    except RedisError:
        # Processes that cannot read the mark ask the database; those that can stop trusting what
        # they remember within KEY_CACHE_SECONDS.
        logger.exception("The accounts mark could not be renewed: the cache (Redis) is unreachable")
    with _lock:
        _entries.clear()


def accounts_changed(**kwargs: Any) -> None:
    """A key, an agent or a team was written: forget what every process remembers about keys.

    At once (so this transaction's own reads see the change) and on commit (so a key looked up by
    another request between the two is forgotten too).
    """
    _new_mark()
    transaction.on_commit(_new_mark, robust=True)


def recall(entry: str) -> tuple[ApiKey | None, bytes | object | None]:
    """(the key remembered under this entry if it may still be trusted, else None; the current mark)."""
    if settings.KEY_CACHE_SECONDS <= 0:
        return None, _MISSING
    mark = current_mark()
    if mark is _MISSING:
        return None, mark
    stored = _entries.get(entry)
    if stored is None:
        return None, mark
    api_key, seen, at = stored
    if seen != mark or time.monotonic() - at > settings.KEY_CACHE_SECONDS:
        return None, mark
    # A copy per request: a view may set attributes on its key, agent or team.
    fresh = copy.copy(api_key)
    fresh.agent = copy.copy(api_key.agent)
    fresh.team = copy.copy(api_key.team)
    return fresh, mark


def remember(entry: str, api_key: ApiKey, mark: bytes | object | None) -> None:
    """Remember a key just verified in the database, under the mark read before the lookup."""
    if mark is _MISSING or settings.KEY_CACHE_SECONDS <= 0:
        return
    with _lock:
        if len(_entries) >= MAX_ENTRIES:
            _entries.clear()
        _entries[entry] = (api_key, mark if isinstance(mark, bytes) else None, time.monotonic())


def touch(entry: str, api_key: ApiKey) -> None:
    """Carry a new last_used_at into what is remembered (it is written at most once a minute)."""
    stored = _entries.get(entry)
    if stored is not None:
        stored[0].last_used_at = api_key.last_used_at
