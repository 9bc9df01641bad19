"""clients/typescript's `npm test` against this run's live server (tests.support.fixtures.asgi_server).

The npm tests cover the TypeScript client end to end: tools, turns, import, typed errors,
pagination, retries, the AI SDK tools, the README quickstart, and that the checked-in generated
types match the server's OpenAPI schema. Without Node this reports it could not run, or fails
with MNEMO_REQUIRE_NODE=1 (tests/client/conftest.py), as the browser tests do without Chromium.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess

import pytest

from accounts.services import issue_api_key
from tests.support.fixtures import ROOT, Tenant

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.node]

PACKAGE = ROOT / "clients" / "typescript"
# Written into node_modules after `npm ci`: the next run reinstalls only when package-lock.json changed.
INSTALLED_STAMP = PACKAGE / "node_modules" / ".mnemo-installed"
NPM_DEADLINE = 600  # seconds; `npm ci` from an empty cache downloads the dev dependencies


def npm(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    run = subprocess.run(
        ["npm", *args], cwd=PACKAGE, env=env, capture_output=True, text=True, timeout=NPM_DEADLINE, check=False
    )
    if run.returncode != 0:
        pytest.fail(
            f"`npm {' '.join(args)}` in clients/typescript exited {run.returncode}:\n{run.stdout}\n{run.stderr}"
        )
    return run


def install() -> None:
    lock = hashlib.sha256((PACKAGE / "package-lock.json").read_bytes()).hexdigest()
    if INSTALLED_STAMP.exists() and INSTALLED_STAMP.read_text() == lock:
        return
    npm("ci", "--no-audit", "--no-fund")
    INSTALLED_STAMP.write_text(lock)


def test_npm_test_passes_against_the_live_server(web_server: str, tenant: Tenant) -> None:
    admin_key = issue_api_key(agent=tenant.agent, name="typescript-admin", can_admin=True)
    install()
    env = {
        **os.environ,
        "MNEMO_URL": web_server,
        "MNEMO_KEY": tenant.key.plaintext,
        "MNEMO_ADMIN_KEY": admin_key.plaintext,
        "NO_COLOR": "1",
    }
    run = npm("test", env=env)
    # node --test's spec reporter ends with the counts: every test ran and passed, none was skipped.
    counts = dict(re.findall(r"^\S* ?(tests|pass|fail|cancelled|skipped|todo) (\d+)$", run.stdout, re.MULTILINE))
    assert int(counts["tests"]) >= 30
    assert counts["pass"] == counts["tests"]
    assert (counts["fail"], counts["cancelled"], counts["skipped"], counts["todo"]) == ("0", "0", "0", "0")
