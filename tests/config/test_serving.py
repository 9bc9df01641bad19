"""How `manage.py run` serves: several web processes through gunicorn, pooled connections, and
MCP calls that do not wait for each other."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from config.management.commands.run import connection_budget, web_command
from config.mcp import _in_thread
from tests.support.fixtures import run_async

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


@pytest.mark.django_db(transaction=True)  # the request runs on a kept thread, with its own connection
def test_a_request_through_the_asgi_application_reaches_its_thread_without_asgiref(tenant, monkeypatch):
    # Django's own ASGI handler runs each step of each middleware written for both modes in the
    # request's thread and comes back to the event loop (some fifteen hops a request here); the
    # application runs the whole chain and the view in one call on a kept thread, never through
    # asgiref (config.request_threads.KeptThreadASGIHandler).
    import httpx
    from asgiref import sync

    from config.asgi import application

    hops: list[str] = []
    to_thread, to_loop = sync.SyncToAsync.__call__, sync.AsyncToSync.__call__

    async def counted(self, *args, **kwargs):
        hops.append(getattr(self.func, "__qualname__", repr(self.func)))
        return await to_thread(self, *args, **kwargs)

    def counted_back(self, *args, **kwargs):
        hops.append(f"back to the loop: {getattr(self.awaitable, '__qualname__', self.awaitable)}")
        return to_loop(self, *args, **kwargs)

    monkeypatch.setattr(sync.SyncToAsync, "__call__", counted)
    monkeypatch.setattr(sync.AsyncToSync, "__call__", counted_back)

    async def me() -> httpx.Response:
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
            return await client.get("/api/v1/me", headers={"Authorization": f"Bearer {tenant.key.plaintext}"})

    response = run_async(me)
    assert response.status_code == 200, response.text
    assert response.json()["agent"] == tenant.agent.slug
    assert response.headers["X-Request-ID"]  # the middleware ran
    # request_started's receivers, the middleware chain with the view, and the response's close all
    # run on the request's kept thread, handed to it directly: not one asgiref hop.
    assert hops == [], hops


def test_a_request_thread_queueing_a_task_builds_no_result_backend_of_its_own():
    # Each web request runs on a thread of its own; with Celery's default every such thread that
    # queues a task builds a result backend (about a millisecond of CPU). One is shared instead.
    from config.celery import app

    shared = app.backend
    seen = []
    for _ in range(3):
        thread = threading.Thread(target=lambda: seen.append(app.backend))
        thread.start()
        thread.join()
    assert len(seen) == 3
    assert all(backend is shared for backend in seen)


@pytest.mark.parametrize(
    ("path", "most"),
    [("/api/v1/me", 1), ("/api/v1/turns", 2), ("/api/v1/turns/7/reply", 3), ("/api/v1/tools/recall_memories", 16)],
)
def test_the_most_called_api_paths_are_matched_before_the_lens_is_tried(path, most):
    # Django records every pattern it tried before the match (for a 404's debug page): an API call
    # checked against the lens's patterns first spent about 4% of a web process's CPU under load.
    from django.urls import resolve

    match = resolve(path)
    assert len(match.tried) <= most, [str(tried[-1].pattern) for tried in match.tried]
    assert all(str(tried[0].pattern) == "api/v1/" for tried in match.tried)
