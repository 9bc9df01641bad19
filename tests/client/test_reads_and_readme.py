"""The client's reads (the retrieval audit), and its README's quickstart run as pasted against the live server."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import mnemo_client
import pytest
from mnemo_client import AsyncMnemo, Mnemo, PermissionDenied

from memory.models import Note, Read

pytestmark = pytest.mark.django_db(transaction=True)

README = Path(mnemo_client.__file__).parents[1] / "README.md"


def _wait_for_reads(count: int) -> None:
    # The server writes a request's reads once its response is sent (memory.services.reads).
    deadline = time.monotonic() + 10
    while Read.objects.count() < count:
        assert time.monotonic() < deadline, "the server did not record the reads"
        time.sleep(0.05)


def test_reads_lists_the_audit_by_person_tool_and_time(web_server, admin_tenant):
    with Mnemo(web_server, api_key=admin_tenant.key.plaintext) as mnemo:
        mnemo.remember(person="ada", key="home", description="Where Ada lives", content="Ada lives in Oslo.")
        mnemo.recall_memories(person="ada", query="where does Ada live?")
        mnemo.search(person="bob", query="anything")
        _wait_for_reads(2)
        reads = mnemo.reads("ada")
        assert reads["count"] == 1
        [read] = reads["results"]
        note = Note.objects.get(key="home")
        assert (read["person"], read["agent"], read["tool"]) == ("ada", admin_tenant.agent.slug, "recall_memories")
        assert read["query"] == "where does Ada live?"
        assert read["notes"] == [{"id": note.pk, "rank": 1}]
        assert mnemo.reads(tool="search")["results"][0]["person"] == "bob"
        assert mnemo.reads(since=datetime.now(UTC) + timedelta(minutes=1))["count"] == 0
        assert [r["person"] for r in mnemo.iter_reads(page_size=1)] == ["bob", "ada"]


def test_async_reads_and_an_ordinary_key_is_refused(web_server, admin_tenant, tenant):
    async def scenario() -> None:
        async with AsyncMnemo(web_server, api_key=admin_tenant.key.plaintext) as mnemo:
            await mnemo.recall_memories(person="ada", query="tea")
            await asyncio.to_thread(_wait_for_reads, 1)
            page = await mnemo.reads("ada", agent=admin_tenant.agent.slug)
            assert [read["tool"] for read in page["results"]] == ["recall_memories"]
            assert [read["person"] async for read in mnemo.iter_reads()] == ["ada"]
        async with AsyncMnemo(web_server, api_key=tenant.key.plaintext) as ordinary:
            with pytest.raises(PermissionDenied, match="admin-capable"):
                await ordinary.reads("ada")

    asyncio.run(scenario())


def quickstart_blocks() -> list[str]:
    text = README.read_text()
    section = text.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)


def test_the_readme_quickstart_runs_as_pasted(web_server, admin_tenant):
    blocks = quickstart_blocks()
    assert len(blocks) == 3  # the sync client, the async one, the reads
    env = {
        **os.environ,
        "MNEMO_URL": web_server,
        "MNEMO_KEY": admin_tenant.key.plaintext,
        # This checkout's client, whichever one the editable install points at.
        "PYTHONPATH": str(README.parent),
    }
    outputs = []
    for block in blocks:
        done = subprocess.run(
            [sys.executable, "-c", block], env=env, capture_output=True, text=True, timeout=60, check=False
        )
        assert done.returncode == 0, f"this quickstart block failed:\n{block}\n{done.stderr}"
        outputs.append(done.stdout)
        _wait_for_reads(1)
    assert not Note.objects.filter(key="home-city").exists()  # remembered, then forgotten
    assert "pet A cat called Pus." in outputs[1]
    assert "where does Ada live?" in outputs[2]
