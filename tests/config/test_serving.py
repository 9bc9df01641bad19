"""How `manage.py run` serves: several web processes through gunicorn, pooled connections, and
MCP calls that do not wait for each other."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

from config.management.commands.run import connection_budget, web_command
from config.mcp import _in_thread
from tests.fixtures import run_async

ROOT = Path(__file__).resolve().parents[2]


def test_the_web_server_is_gunicorn_with_uvicorn_workers_not_uvicorn_workers_flag():
    command = web_command("python", host="127.0.0.1", port=8000, processes=3)
    assert command[:4] == ["python", "-m", "gunicorn", "config.asgi:application"]
    assert command[command.index("--worker-class") + 1] == "uvicorn_worker.UvicornWorker"
    assert command[command.index("--workers") + 1] == "3"
    assert command[command.index("--bind") + 1] == "127.0.0.1:8000"
    ipv6 = web_command("python", host="::1", port=8001, processes=1)
    assert ipv6[ipv6.index("--bind") + 1] == "[::1]:8001"


def test_the_connection_budget_counts_each_web_process_pool_and_each_worker_process(settings):
    settings.DB_POOL_MAX_SIZE = 10
    assert connection_budget(web=2, workers=2) == 2 * 10 + 2 + 2
    settings.DB_POOL_MAX_SIZE = 4
    assert connection_budget(web=8, workers=3) == 8 * 4 + 3 + 2


def test_mcp_calls_in_one_process_run_side_by_side():
    # Two calls that each wait for the other: run one at a time (one shared thread), they never meet.
    meeting = threading.Barrier(2, timeout=5)

    def meet() -> int:
        meeting.wait()
        return threading.get_ident()

    async def both() -> list[int]:
        import asyncio

        return list(await asyncio.gather(_in_thread(meet)(), _in_thread(meet)()))

    first, second = run_async(both)
    assert first != second


def test_pooling_refuses_a_connection_age():
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings", "DB_CONN_MAX_AGE": "60"}
    code = "import django; django.setup()"
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    assert result.returncode != 0
    assert "DB_CONN_MAX_AGE=60 needs DB_POOL=0" in result.stderr
    allowed = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env={**env, "DB_POOL": "0"}, capture_output=True, text=True
    )
    assert allowed.returncode == 0, allowed.stderr[-2000:]
