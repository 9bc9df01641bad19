from __future__ import annotations

import os
import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import BrowserContext, expect

from tests.support.fixtures import *  # noqa: F403 - shared fixtures, kept out of this file for length
from tests.support.fixtures import close_connection_pool

# pytest-playwright runs an event loop in the test thread; Django's ORM refuses sync calls there
# unless told the test process is allowed to.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

# Tasks sent by this test run go to a queue of its own, so a worker started by `make run` on the
# same machine never picks up a test's task and writes it into the main database.
TEST_QUEUE = f"mnemo-test-{uuid.uuid4().hex[:8]}"

LOGS_KEPT_SECONDS = 1800  # test-*.log files in DATA_DIR younger than this survive the next run

CHROMIUM = os.environ.get("CHROMIUM_PATH") or shutil.which("chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


# Connections this test process's pool may hold (DB_POOL_MAX_SIZE is a web or worker process's
# figure, 10 by default). The worker race test runs eight lanes, each a thread with a connection of
# its own, beside the test's own: in a two-process run (TEST_PROCESSES=2) a lane once waited out
# the pool's timeout for a connection with the ten all taken.
TEST_POOL_MAX_SIZE = 24


def pytest_configure(config: pytest.Config) -> None:
    from django.conf import settings

    from config.celery import app

    app.conf.task_default_queue = TEST_QUEUE
    pool = settings.DATABASES["default"].get("OPTIONS", {}).get("pool")
    if isinstance(pool, dict):  # before the first connection, which creates the pool from it
        pool["max_size"] = max(pool["max_size"], TEST_POOL_MAX_SIZE)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if CHROMIUM:
        return
    if os.environ.get("MNEMO_REQUIRE_BROWSER") == "1":
        raise pytest.UsageError(
            "MNEMO_REQUIRE_BROWSER=1 but no Chromium was found; install it (apt-get install -y chromium) "
            "or set CHROMIUM_PATH."
        )
    skip = pytest.mark.skip(reason="Chromium is not installed (set MNEMO_REQUIRE_BROWSER=1 to make this an error)")
    for item in items:
        if "browser" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup: None, django_db_blocker: Any) -> Iterator[None]:
    """pytest-django's, then at the end of the run this process's connection pool is closed before
    the test database is dropped (Postgres refuses to drop a database with sessions on it), and so
    is the session of any process a test started and stopped that Postgres has not ended yet.

    At the start, the logs of the workers and servers earlier runs started go (those not written
    to for half an hour: the last run's stay, to be read, and so do those of a run beside this one)."""
    from django.conf import settings

    for log in settings.DATA_DIR.glob("test-*.log"):
        if time.time() - log.stat().st_mtime > LOGS_KEPT_SECONDS:
            log.unlink(missing_ok=True)
    yield
    with django_db_blocker.unblock():
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        close_connection_pool()


@pytest.fixture(autouse=True)
def _no_reads_left_pending() -> Iterator[None]:
    """The retrieval audit writes reads after a response; a test that reads without a request
    (a service called directly) leaves them pending. Drop them, so that the next test does not
    write reads of people its rolled-back database no longer has."""
    from memory.services.reads import discard_pending_reads

    discard_pending_reads()
    yield
    discard_pending_reads()


@pytest.fixture(autouse=True)
def _nothing_waiting_for_embedding() -> Iterator[None]:
    """Each test starts with nothing of an earlier one waiting to be embedded (memory.indexing):

    - its thread serves no request, and this process's outbox is empty: a request left unfinished
      (its response never closed) would have the next test's rows wait there for a request_finished
      that never comes;
    - the pending lists of this run's database and queue are empty, and no wake marker says a task is
      on its way: rows no worker took, or a marker left for 30 s, would ride along with the next
      test's rows, or keep its own task from being queued at all."""
    from config.redis import cache_redis
    from memory.indexing import indexed_models, pending_keys, send_outbox

    send_outbox()
    cache_redis().delete(*(key for indexed in indexed_models() for key in pending_keys(indexed)))
    yield
    send_outbox()


@pytest.fixture(autouse=True)
def _no_turn_notes_kept() -> None:
    """Each test starts with nothing kept of turn notes (memory.queries.turn_notes) or of recall's
    banks (memory.recall) or of the conversation search's pairs, from another's rolled-back rows."""
    from conversations.kept_pairs import forget_kept_pairs
    from memory.kept_banks import forget_kept
    from memory.queries import forget_kept_notes

    forget_kept_notes()
    forget_kept()
    forget_kept_pairs()


@pytest.fixture(autouse=True)
def _hashing_embedder(settings: object) -> None:
    """Tests embed with the deterministic hashing embedder unless a test asks for another."""
    settings.EMBEDDER = "hashing"  # type: ignore[attr-defined]


@pytest.fixture(autouse=True)
def _rate_limits_per_test(settings: object) -> None:
    """Each test counts rate limits and lockouts in a key space of its own on the shared Redis, and
    the API and demo limits are set out of reach; the tests of those limits lower them."""
    settings.CACHES = {"default": {**settings.CACHES["default"], "KEY_PREFIX": f"test-{uuid.uuid4().hex}"}}  # type: ignore[attr-defined]
    settings.API_RATE = "100000/min"  # type: ignore[attr-defined]
    settings.DEMO_RATE = "100000/min"  # type: ignore[attr-defined]


ARTIFACTS = Path(__file__).resolve().parent / "artifacts"


@pytest.fixture
def artifact(request: pytest.FixtureRequest):
    """A path under tests/artifacts/ (ignored by git) for this test's screenshots."""
    ARTIFACTS.mkdir(exist_ok=True)

    def path(name: str) -> str:
        return str(ARTIFACTS / f"{request.node.name}-{name}.png")

    return path


# Every browser wait is for something the page must show (a selector, a URL, a count); this is its
# deadline. It is long because CI and developer machines are busy 2-core boxes: a passing test never
# waits for it, and Playwright's own defaults (5 s for expect(), 30 s for actions) are too short there.
BROWSER_DEADLINE_MS = 60_000
expect.set_options(timeout=BROWSER_DEADLINE_MS)


@pytest.fixture
def context(context: BrowserContext) -> BrowserContext:
    context.set_default_timeout(BROWSER_DEADLINE_MS)
    context.set_default_navigation_timeout(BROWSER_DEADLINE_MS)
    return context


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict) -> dict:
    return {**browser_type_launch_args, "executable_path": CHROMIUM, "args": CHROMIUM_ARGS}
