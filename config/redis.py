from __future__ import annotations

import functools
from typing import Any

import redis
from django.conf import settings


def redis_py_url(url: str) -> str:
    """kombu spells a unix socket redis+socket://PATH; redis-py spells it unix://PATH."""
    if url.startswith("redis+socket://"):
        return "unix://" + url.removeprefix("redis+socket://")
    return url


def redis_client(*, timeout: float = 2.0) -> redis.Redis:
    return redis.Redis.from_url(
        redis_py_url(settings.REDIS_URL), socket_timeout=timeout, socket_connect_timeout=timeout
    )


@functools.lru_cache(maxsize=8)
def _client_for(location: str, connect_timeout: float | None, timeout: float | None) -> redis.Redis:
    return redis.Redis.from_url(location, socket_connect_timeout=connect_timeout, socket_timeout=timeout)


def cache_redis() -> redis.Redis:
    """A redis-py client on the shared cache's server (CACHES["default"]), made once per process.

    For counters and markers the cache API cannot express in one round trip. (Django's cache makes
    a new client object on every call; this one is kept, with its connection pool.)
    """
    conf: dict[str, Any] = settings.CACHES["default"]
    options: dict[str, Any] = conf.get("OPTIONS", {})
    return _client_for(conf["LOCATION"], options.get("socket_connect_timeout"), options.get("socket_timeout"))
