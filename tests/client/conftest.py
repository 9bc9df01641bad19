"""The client package against the live server (tests.support.fixtures.asgi_server, one for the whole run)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterator

import pytest
from mnemo_client import Mnemo

from tests.support.fixtures import Tenant

NODE_MAJOR = 20  # clients/typescript's engines.node


def node_missing() -> str | None:
    """Why the TypeScript client's tests cannot run here, or None when Node >= 20 and npm are on PATH."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if not node or not npm:
        return "Node.js and npm are not installed"
    version = subprocess.run([node, "--version"], capture_output=True, text=True, check=False).stdout.strip()
    major = re.match(r"v(\d+)\.", version)
    if not major or int(major.group(1)) < NODE_MAJOR:
        return f"Node.js {version or '(unknown version)'} is older than {NODE_MAJOR}"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # As tests/conftest.py does for Chromium and the browser tests.
    missing = node_missing()
    if not missing:
        return
    if os.environ.get("MNEMO_REQUIRE_NODE") == "1":
        raise pytest.UsageError(
            f"MNEMO_REQUIRE_NODE=1 but {missing}; install Node.js {NODE_MAJOR} or later with npm "
            "(apt-get install -y nodejs npm)."
        )
    skip = pytest.mark.skip(reason=f"{missing} (set MNEMO_REQUIRE_NODE=1 to make this an error)")
    for item in items:
        if "node" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def mnemo(web_server: str, tenant: Tenant) -> Iterator[Mnemo]:
    with Mnemo(web_server, api_key=tenant.key.plaintext) as client:
        yield client
