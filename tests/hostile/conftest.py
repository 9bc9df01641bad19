from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.fixtures import LiveServer, serve_asgi


@pytest.fixture(scope="package")
def asgi_server(django_db_setup: None, django_db_blocker: Any) -> Iterator[LiveServer]:
    """The ASGI app under uvicorn for the hostile-input tests, with the rate limit out of their reach."""
    with django_db_blocker.unblock(), serve_asgi("hostile", API_RATE="1000000/min") as server:
        yield server
