"""A real server for the hostile-input tests: config.asgi:application under uvicorn (what `manage.py run`
serves), on the test database, so bodies arrive the way they do in production (chunked ones too)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
from django.conf import settings

from tests.fixtures import ROOT, database_url_for_subprocesses


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass(frozen=True)
class LiveServer:
    host: str
    port: int
    log_path: str

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def log(self) -> str:
        with open(self.log_path) as log:
            return log.read()


@pytest.fixture(scope="package")
def asgi_server(django_db_setup: None, django_db_blocker: pytest.FixtureRequest) -> Iterator[LiveServer]:
    from tests.conftest import TEST_QUEUE

    with django_db_blocker.unblock():  # type: ignore[attr-defined]
        database_url = database_url_for_subprocesses()
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_ALLOW_ASYNC_UNSAFE"}
    env |= {
        "DATABASE_URL": database_url,
        "CELERY_QUEUE": TEST_QUEUE,
        "EMBEDDER": "hashing",
        "DJANGO_SETTINGS_MODULE": "config.settings",
    }
    port = free_port()
    log_path = str(settings.DATA_DIR / f"test-uvicorn-hostile-{os.getpid()}.log")
    log = open(log_path, "w+")  # noqa: SIM115 - closed in teardown
    process = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "config.asgi:application", "--host", "127.0.0.1", "--port", str(port),
         "--lifespan", "on", "--no-access-log"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    server = LiveServer("127.0.0.1", port, log_path)
    try:
        deadline = time.monotonic() + 30
        while True:
            if process.poll() is not None:
                pytest.fail(f"uvicorn exited during start-up:\n{server.log()[-4000:]}")
            try:
                httpx.get(f"{server.url}/mcp", timeout=5)  # 401 at once: no database involved
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    pytest.fail("uvicorn did not answer within 30s")
                time.sleep(0.1)
        yield server
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()
