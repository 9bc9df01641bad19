"""The client package against the live server: one uvicorn for the whole package of tests."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from mnemo_client import Mnemo

from tests.fixtures import Tenant, serve_asgi


@pytest.fixture(scope="package")
def web_server(django_db_setup: None, django_db_blocker: Any) -> Iterator[str]:
    """As tests.fixtures.web_server, shared by every module here: starting uvicorn is the slow part."""
    with django_db_blocker.unblock(), serve_asgi("client", API_RATE="1000000/min") as server:
        yield server.url


@pytest.fixture
def mnemo(web_server: str, tenant: Tenant) -> Iterator[Mnemo]:
    with Mnemo(web_server, api_key=tenant.key.plaintext) as client:
        yield client


def run_async(scenario: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
    """Run a coroutine in a thread of its own: once a browser test has run, pytest-playwright keeps
    an event loop running in the test thread, and asyncio.run() refuses to nest in it."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, scenario()).result()
