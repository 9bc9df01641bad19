"""Shared fixtures: tenants, authenticated API clients, and a real Celery worker."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import count
from pathlib import Path

import pytest
from django.db import connection
from rest_framework.test import APIClient

from accounts.models import Agent, Team
from accounts.services import IssuedKey, issue_api_key
from tests.factories import AgentFactory, TeamFactory

ROOT = Path(__file__).resolve().parent.parent
_worker_numbers = count(1)


@dataclass
class Tenant:
    team: Team
    agent: Agent
    key: IssuedKey
    client: APIClient


def make_tenant(*, can_admin: bool = False) -> Tenant:
    team = TeamFactory()
    agent = AgentFactory(team=team)
    key = issue_api_key(agent=agent, name="test", can_admin=can_admin)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key.plaintext}")
    return Tenant(team=team, agent=agent, key=key, client=client)


@pytest.fixture
def tenant(db: None) -> Tenant:
    return make_tenant()


@pytest.fixture
def other_tenant(db: None) -> Tenant:
    return make_tenant()


@pytest.fixture
def admin_tenant(db: None) -> Tenant:
    return make_tenant(can_admin=True)


@pytest.fixture
def api(tenant: Tenant) -> APIClient:
    return tenant.client


def database_url_for_subprocesses() -> str:
    """A DATABASE_URL for other processes (workers, children) to reach this run's test database."""
    settings = connection.settings_dict
    host = settings.get("HOST") or settings.get("OPTIONS", {}).get("host", "")
    port = settings.get("PORT") or "5432"
    user = settings.get("USER") or "postgres"
    password = settings.get("PASSWORD") or ""
    if host.startswith("/"):
        return f"postgresql://{user}:{password}@/{settings['NAME']}?host={host}&port={port}"
    return f"postgresql://{user}:{password}@{host}:{port}/{settings['NAME']}"


@dataclass
class WorkerProcess:
    process: subprocess.Popen[str]
    log_path: Path

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")


@contextmanager
def run_celery_worker(
    *, app: str = "config", concurrency: int = 1, extra_env: dict[str, str] | None = None
) -> Iterator[WorkerProcess]:
    """Start a real `celery worker` on this run's queue, connected to the *test* database, and
    wait until it answers a ping. Its output goes to a log file the test may read."""
    from config.celery import app as celery_app
    from tests.conftest import TEST_QUEUE

    env = {
        **os.environ,
        "DATABASE_URL": database_url_for_subprocesses(),
        "CELERY_QUEUE": TEST_QUEUE,
        "EMBEDDER": "hashing",
        "DJANGO_SETTINGS_MODULE": "config.settings",
        **(extra_env or {}),
    }
    from django.conf import settings

    name = f"test-{os.getpid()}-{next(_worker_numbers)}"
    log_path = settings.DATA_DIR / f"{name}.log"
    log = open(log_path, "w+")  # noqa: SIM115 - closed in the finally below
    process = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", app, "worker", "-Q", TEST_QUEUE, "-c", str(concurrency), "-l", "INFO",
         "--without-gossip", "--without-mingle", "--without-heartbeat", "-n", f"{name}@%h"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None:
                log.seek(0)
                pytest.fail(f"The Celery worker exited during start-up:\n{log.read()[-4000:]}")
            replies = celery_app.control.ping(destination=[f"{name}@{os.uname().nodename}"], timeout=0.5)
            if replies:
                break
            if time.monotonic() > deadline:
                log.seek(0)
                pytest.fail(f"The Celery worker did not answer a ping within 60s:\n{log.read()[-4000:]}")
        yield WorkerProcess(process, log_path)
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


@pytest.fixture
def celery_worker_process(transactional_db: None) -> Iterator[subprocess.Popen[str]]:
    """A real `celery worker` process (one at a time) on this run's queue, connected to the *test* database."""
    with run_celery_worker() as worker:
        yield worker.process
