"""The client package against the live server (tests.fixtures.asgi_server, one for the whole run)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from mnemo_client import Mnemo

from tests.fixtures import Tenant


@pytest.fixture
def mnemo(web_server: str, tenant: Tenant) -> Iterator[Mnemo]:
    with Mnemo(web_server, api_key=tenant.key.plaintext) as client:
        yield client
