"""GET /healthz: the database, Redis and at least one live Celery worker."""

from __future__ import annotations

import logging

from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from config.celery import app as celery_app
from config.models import Heartbeat
from config.redis import redis_client

logger = logging.getLogger(__name__)


def check_database() -> tuple[bool, str]:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:
        return False, f"database unreachable: {exc.__class__.__name__}"
    return True, "ok"


def check_redis() -> tuple[bool, str]:
    try:
        redis_client(timeout=1.0).ping()
    except Exception as exc:
        return False, f"redis unreachable: {exc.__class__.__name__}"
    return True, "ok"


def check_worker(*, timeout: float = 1.5) -> tuple[bool, str]:
    try:
        replies = celery_app.control.ping(timeout=timeout, limit=1)
    except Exception as exc:
        return False, f"cannot reach workers: {exc.__class__.__name__}"
    if not replies:
        return False, f"no Celery worker answered a ping within {timeout}s; start one with `make run` or `make worker`"
    return True, f"{len(replies)} worker(s) answered"


def _last_heartbeat() -> str | None:
    beat = Heartbeat.objects.filter(name="beat").first()
    return beat.seen_at.isoformat() if beat else None


@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    checks: dict[str, tuple[bool, str]] = {"database": check_database(), "redis": check_redis()}
    if checks["redis"][0]:
        checks["worker"] = check_worker()
    else:
        checks["worker"] = (False, "not checked: the broker (redis) is down")
    body_beat = _last_heartbeat() if checks["database"][0] else None
    down = [name for name, (ok, _) in checks.items() if not ok]
    body = {
        "status": "ok" if not down else "down",
        "down": down,
        "checks": {name: {"ok": ok, "detail": detail} for name, (ok, detail) in checks.items()},
        # Informational: beat cannot be pinged, so its last heartbeat (written by a worker) is shown.
        "beat_last_seen": body_beat,
    }
    if down:
        logger.warning("health check failing: %s", ", ".join(down))
    return JsonResponse(body, status=503 if down else 200)
