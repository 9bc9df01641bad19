from __future__ import annotations

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
