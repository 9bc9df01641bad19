"""The fixtures and helpers every test shares, each defined here once: tenants and their API
clients, a person with a conversation, the write path's actor, indexing inline, a signed-in lens,
a real Celery worker, and the ASGI app under uvicorn.

Data builders without pytest machinery (factories, note fields, a recorded chat) are in
tests/support/factories.py.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from itertools import count
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.conf import settings
from django.db import connection
from django.test import Client
from rest_framework.test import APIClient

from accounts.models import Agent, Person, Team
from accounts.services import IssuedKey, issue_api_key
from conversations.models import Conversation
from conversations.services import start_conversation
from memory.models import Revision
from memory.services import Actor
from tests.support.factories import AgentFactory, PersonFactory, TeamFactory

logger = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parents[2]
_worker_numbers = count(1)

# How long a test waits for a real worker or server to get somewhere. It is a deadline, not a delay:
# a passing test stops waiting as soon as what it needs is there, and a busy 2-core machine is slow.
WORKER_DEADLINE = 120.0


@dataclass
class Tenant:
    team: Team
    agent: Agent
    key: IssuedKey
    client: APIClient


def make_tenant(*, can_admin: bool = False) -> Tenant:
    team = TeamFactory.create()
    agent = AgentFactory.create(team=team)
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


# --- the people and conversations most tests are about ----------------------------------------


@pytest.fixture
def person(tenant: Tenant) -> Person:
    """Ada, a person of the tenant's team (her banks are user:ada, user:ada:<scope>)."""
    return PersonFactory.create(team=tenant.team, external_id="ada")


@pytest.fixture
def conversation(tenant: Tenant, person: Person) -> Conversation:
    """The tenant's agent talking with Ada."""
    return start_conversation(team=tenant.team, agent=tenant.agent, person=person)


@pytest.fixture
def actor(tenant: Tenant) -> Actor:
    """The tenant's agent as the write path's actor, within request req-1."""
    return Actor(Revision.Actor.AGENT, tenant.agent.slug, "req-1")


# --- indexing: inline, or nowhere --------------------------------------------------------------


@pytest.fixture
def index_inline(mocker: Any, django_capture_on_commit_callbacks: Any) -> Callable[[], Any]:
    """Run the after-commit indexing of notes and messages inline, as a worker would.

    Use `with index_inline(): ...` around the writes; their indexing runs when the block ends. An
    embedder failure is logged and left for the retry and the reconciler, as the Celery tasks do.
    """
    from memory.embedders import EmbeddingUnavailable
    from memory.indexing import IndexedModel

    def run_inline(indexed: IndexedModel, ids: list[int]) -> None:
        try:
            indexed.index(ids)
        except EmbeddingUnavailable as exc:
            logger.warning("inline indexing failed: %s", exc)

    mocker.patch("memory.indexing.dispatch", side_effect=run_inline)  # the one seam, for every indexed model

    def capture() -> Any:
        return django_capture_on_commit_callbacks(execute=True)

    return capture


@pytest.fixture
def no_broker(mocker: Any) -> None:
    """Writes that commit for real send their after-commit indexing nowhere (not to the broker);
    the test calls the indexing itself."""
    mocker.patch("memory.indexing.dispatch")


# --- the lens and the demo ---------------------------------------------------------------------

HTMX = {"HX-Request": "true"}
PASSWORD = "correct horse battery staple"


@pytest.fixture
def lens_user(django_user_model: Any, person: Person) -> Any:
    """Ada's login ("ada-login"), linked to her person: the lens shows her what is remembered."""
    user = django_user_model.objects.create_user("ada-login", password=PASSWORD)
    person.user = user
    person.save(update_fields=["user"])
    return user


@pytest.fixture
def lens_client(client: Client, lens_user: Any) -> Client:
    client.force_login(lens_user)
    return client


@pytest.fixture
def demo_on(settings: Any) -> None:
    settings.DEMO_ENABLED = True


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
        deadline = time.monotonic() + WORKER_DEADLINE
        while True:
            if process.poll() is not None:
                log.seek(0)
                pytest.fail(f"The Celery worker exited during start-up:\n{log.read()[-4000:]}")
            replies = celery_app.control.ping(destination=[f"{name}@{os.uname().nodename}"], timeout=0.5)
            if replies:
                break
            if time.monotonic() > deadline:
                log.seek(0)
                pytest.fail(
                    f"The Celery worker did not answer a ping within {WORKER_DEADLINE:.0f}s:\n{log.read()[-4000:]}"
                )
        yield WorkerProcess(process, log_path)
    finally:
        stop_process(process, timeout=20)
        log.close()


@pytest.fixture
def celery_worker_process(transactional_db: None) -> Iterator[subprocess.Popen[str]]:
    """A real `celery worker` process (one at a time) on this run's queue, connected to the *test* database."""
    with run_celery_worker() as worker:
        yield worker.process


def stop_process(process: subprocess.Popen[Any], *, timeout: float) -> None:
    """Ask a child to stop, and kill it if it has not within `timeout` seconds."""
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def subprocess_env() -> dict[str, str]:
    from tests.conftest import TEST_QUEUE

    env = {k: v for k, v in os.environ.items() if k != "DJANGO_ALLOW_ASYNC_UNSAFE"}  # ORM-from-async must fail there
    return {
        **env,
        "DATABASE_URL": database_url_for_subprocesses(),
        "CELERY_QUEUE": TEST_QUEUE,
        "EMBEDDER": "hashing",
        "DJANGO_SETTINGS_MODULE": "config.settings",
    }


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass(frozen=True)
class LiveServer:
    host: str
    port: int
    log_path: Path

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def log(self, since: int = 0) -> str:
        """The server's output, from the character `since` on (a `log_size()` taken earlier)."""
        return self.log_path.read_text()[since:]

    def log_size(self) -> int:
        return len(self.log_path.read_text())


@contextmanager
def serve_asgi(name: str, **env_overrides: str) -> Iterator[LiveServer]:
    """config.asgi:application under uvicorn (what `make run` serves), on this run's test database,
    so requests arrive as they do in production (chunked bodies, /mcp, the ASGI wrappers).

    Call it with the database unblocked; the server stops when the block ends.
    """
    env = {**subprocess_env(), **env_overrides}
    server = LiveServer("127.0.0.1", free_port(), settings.DATA_DIR / f"test-uvicorn-{name}-{os.getpid()}.log")
    log = server.log_path.open("w+")
    process = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "config.asgi:application", "--host", server.host, "--port", str(server.port),
         "--lifespan", "on", "--no-access-log"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + WORKER_DEADLINE
        while True:
            if process.poll() is not None:
                pytest.fail(f"uvicorn exited during start-up:\n{server.log()[-4000:]}")
            try:
                httpx.get(f"{server.url}/mcp", timeout=5)  # 401 at once: no database, worker or redis involved
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    pytest.fail(f"uvicorn did not answer within {WORKER_DEADLINE:.0f}s")
                time.sleep(0.1)
        yield server
    finally:
        stop_process(process, timeout=15)
        log.close()


@contextmanager
def serve_web(name: str, *, processes: int = 1, **env_overrides: str) -> Iterator[LiveServer]:
    """The web processes exactly as `manage.py run` starts them (gunicorn with uvicorn's worker
    class, its command line), on this run's test database. Call it with the database unblocked."""
    from config.management.commands.run import web_command

    env = {**subprocess_env(), **env_overrides}
    server = LiveServer("127.0.0.1", free_port(), settings.DATA_DIR / f"test-web-{name}-{os.getpid()}.log")
    log = server.log_path.open("w+")
    command = web_command(sys.executable, host=server.host, port=server.port, processes=processes)
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + WORKER_DEADLINE
        answered = 0
        while answered < 2 * processes:  # the listening socket is shared: ask until every process could have answered
            if process.poll() is not None:
                pytest.fail(f"gunicorn exited during start-up:\n{server.log()[-4000:]}")
            try:
                httpx.get(f"{server.url}/mcp", timeout=5)  # 401 at once: no database, worker or redis involved
                answered += 1
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    pytest.fail(f"gunicorn did not answer within {WORKER_DEADLINE:.0f}s:\n{server.log()[-4000:]}")
                time.sleep(0.1)
        yield server
    finally:
        stop_process(process, timeout=15)
        log.close()


@pytest.fixture(scope="session")
def asgi_server(django_db_setup: None, django_db_blocker: Any) -> Iterator[LiveServer]:
    """The ASGI app under uvicorn on the test database, with the rate limit out of the tests' reach.

    One for the whole run (starting uvicorn is the slow part), shared by the MCP, client, hostile
    input and fuzzing tests; every test there has its own tenant, so none sees another's data.
    Tests that need other settings start their own with serve_asgi.
    """
    with ExitStack() as stack:
        # Unblocked only while it starts: the tests that use it say themselves what database access they need.
        with django_db_blocker.unblock():
            server = stack.enter_context(serve_asgi("web", API_RATE="1000000/min"))
        yield server
    # The test database is dropped next, which Postgres refuses while uvicorn's sessions linger.
    with django_db_blocker.unblock():
        wait_for_other_sessions_to_end()


def close_connection_pool() -> None:
    """Close this process's database connections, pooled ones included (a pool is per process and
    keeps its connections open after the threads that used them are gone)."""
    from django.db import connections

    for conn in connections.all(initialized_only=True):
        conn.close()
        if settings.DATABASES[conn.alias].get("OPTIONS", {}).get("pool"):
            conn.close_pool()  # type: ignore[attr-defined]  # the PostgreSQL backend's


def wait_for_other_sessions_to_end(deadline: float = 30.0) -> None:
    """Return once this connection is the only session on the test database (Postgres ends the
    sessions of a stopped process a moment after it exits), or after `deadline` seconds."""
    give_up = time.monotonic() + deadline
    own = connection.settings_dict["OPTIONS"]["application_name"]  # this process's sessions (its pool's too)
    with connection.cursor() as cursor:
        while time.monotonic() < give_up:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND application_name <> %s",
                [own],
            )
            if cursor.fetchone()[0] == 0:
                return
            time.sleep(0.05)


@pytest.fixture
def web_server(asgi_server: LiveServer) -> str:
    """asgi_server's base URL."""
    return asgi_server.url


def wait_until(condition: Callable[[], object], *, worker: subprocess.Popen[str], what: str) -> None:
    """Poll `condition` (a database read) until it is true; fail at once if the worker died."""
    deadline = time.monotonic() + WORKER_DEADLINE
    while not condition():
        assert worker.poll() is None, f"the worker died while waiting for {what}"
        assert time.monotonic() < deadline, f"the worker did not get to {what} within {WORKER_DEADLINE:.0f}s"
        time.sleep(0.05)


def wait_for_worker_to_drain(worker: subprocess.Popen[str]) -> None:
    """Return once the worker has run every task sent before this call.

    The test worker takes one task at a time from one queue, in the order they were sent
    (concurrency 1, prefetch 1), so when a heartbeat sent now has been recorded, every earlier
    task has run. This replaces sleeping "long enough" before asserting that something did not happen.
    """
    from config.models import Heartbeat
    from config.tasks import record_heartbeat

    name = f"drain-{uuid.uuid4().hex[:8]}"
    record_heartbeat.delay(name=name)
    wait_until(Heartbeat.objects.filter(name=name).exists, worker=worker, what="a heartbeat sent after the others")


def in_own_thread[T](fn: Callable[[], T]) -> T:
    """Run fn in a thread of its own and return what it returns: once a browser test has run,
    pytest-playwright keeps an event loop running in the test thread, and asyncio.run() refuses
    to nest in it."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(fn).result()


def run_async[T](scenario: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run an async scenario to its end in a loop of its own (see in_own_thread)."""
    return in_own_thread(lambda: asyncio.run(scenario()))
