"""The API tells the truth about itself: schemathesis fuzzes every operation of the live ASGI server.

Every operation of the OpenAPI schema is called with generated valid and invalid input (the examples,
coverage, fuzzing and stateful phases, with a fixed seed and a bounded number of examples). A 500, a
status the schema does not document, or a body that does not match the documented schema fails the test.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

CHECKS = "not_a_server_error,status_code_conformance,response_schema_conformance,content_type_conformance"
SEED = 20261130
EXAMPLES_PER_OPERATION = 15


@pytest.mark.django_db(transaction=True)
def test_schemathesis_finds_no_server_error_undocumented_status_or_schema_violation(web_server, tenant, tmp_path):
    schemathesis = Path(sys.executable).parent / "schemathesis"
    junit = tmp_path / "schemathesis.xml"
    result = subprocess.run(
        [str(schemathesis), "run", f"{web_server}/api/schema/",
         "--header", f"Authorization: Bearer {tenant.key.plaintext}",
         "--checks", CHECKS,
         "--phases", "examples,coverage,fuzzing,stateful",
         "--seed", str(SEED),
         "--max-examples", str(EXAMPLES_PER_OPERATION),
         "--generation-database", "none",
         "--workers", "1",
         "--request-timeout", "30",
         "--no-color",
         "--report", "junit", "--report-junit-path", str(junit)],
        capture_output=True, text=True, timeout=900, cwd=tmp_path,  # its crash cache stays out of the tree
    )  # fmt: skip
    output = result.stdout + result.stderr
    # The summary names every phase it ran: the stateful phase must not be skipped silently.
    assert "Stateful" in output, output[-4000:]
    assert result.returncode == 0, output[-20000:]
    report = junit.read_text()
    assert 'failures="0"' in report, report[-4000:]
    assert 'errors="0"' in report, report[-4000:]
