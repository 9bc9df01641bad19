"""GET /metrics: off unless METRICS_ENABLED, behind METRICS_TOKEN when set, and, through gunicorn with
two web processes and a Celery worker, every family counting what happened in all of them."""

from __future__ import annotations

import json
import re
import shutil
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.http import HttpResponse
from prometheus_client import CollectorRegistry
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.parser import text_string_to_metric_families

from config.management.commands.run import GUNICORN_HOOKS, web_command
from tests.conftest import TEST_QUEUE
from tests.curator.chat_server import Script, chat_server
from tests.support.fixtures import LiveServer, Tenant, WorkerProcess, run_celery_worker, serve_web
from tests.support.gated_worker import gate_client

TOKEN = "metrics-token-for-tests"
PERSON = "zelda-quartermain"  # must never appear in a label
PLAN = {
    "operations": [{"op": "remember", "key": "home-city", "description": "Where they live", "content": "Oslo."}],
    "summary": "Zelda lives in Oslo.",
}
DEADLINE = 90.0

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def parse(text: str) -> Samples:
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def total(samples: Samples, name: str, **labels: str) -> float:
    return sum(
        value
        for (sample, found), value in samples.items()
        if sample == name and all((key, want) in found for key, want in labels.items())
    )


# --- in one process ---------------------------------------------------------------------------


@pytest.mark.django_db
def test_metrics_are_not_found_when_disabled(client, settings):
    settings.METRICS_ENABLED = False
    assert client.get("/metrics").status_code == 404


@pytest.mark.django_db
def test_metrics_answer_only_with_the_token_when_one_is_set(client, settings):
    settings.METRICS_ENABLED = True
    settings.METRICS_TOKEN = TOKEN
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}):
        refused = client.get("/metrics", headers=headers)
        assert refused.status_code == 401
        assert refused.json()["error"]["code"] == "not_authenticated"
        assert "METRICS_TOKEN" in refused.json()["error"]["message"]
        assert refused["WWW-Authenticate"].startswith("Bearer")
    answered = client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert answered.status_code == 200
    assert answered["Content-Type"].startswith("text/plain; version=")
    assert "# TYPE mnemo_embedding_backlog gauge" in answered.content.decode()


@pytest.mark.django_db
def test_tool_calls_over_mcp_count_as_over_rest(tenant, settings, index_inline):
    from prometheus_client import REGISTRY

    from config.mcp import call_tool

    settings.METRICS_ENABLED = True

    def calls(outcome: str) -> float:
        return REGISTRY.get_sample_value("mnemo_tool_calls_total", {"tool": "forget_memory", "outcome": outcome}) or 0

    before_ok, before_missing = calls("ok"), calls("not_found")
    remember = {"person": "ada", "key": "home-city", "description": "Home", "content": "Oslo."}
    with index_inline():
        assert call_tool(api_key=tenant.key.api_key, name="remember", arguments=remember)[1] is False
    forget = {"person": "ada", "key": "home-city"}
    assert call_tool(api_key=tenant.key.api_key, name="forget_memory", arguments=forget)[1] is False
    body, is_error = call_tool(api_key=tenant.key.api_key, name="forget_memory", arguments=forget)
    assert is_error
    assert body["error"]["code"] == "not_found"
    assert (calls("ok"), calls("not_found")) == (before_ok + 1, before_missing + 1)
    # A name that is no tool is not counted: a caller cannot mint a label value.
    assert call_tool(api_key=tenant.key.api_key, name="no-such-tool", arguments={})[1] is True
    assert REGISTRY.get_sample_value("mnemo_tool_calls_total", {"tool": "no-such-tool", "outcome": "not_found"}) is None


def test_the_request_middleware_removes_itself_when_metrics_are_off(settings):
    from django.core.exceptions import MiddlewareNotUsed

    from config.metrics import MetricsMiddleware

    settings.METRICS_ENABLED = False
    with pytest.raises(MiddlewareNotUsed):
        MetricsMiddleware(lambda request: HttpResponse())


def test_the_web_processes_load_the_hook_that_marks_a_dead_worker(tmp_path):
    command = web_command("python", host="127.0.0.1", port=8000, processes=2)
    assert command[command.index("--config") + 1] == str(GUNICORN_HOOKS)
    assert GUNICORN_HOOKS.is_file()
    source = GUNICORN_HOOKS.read_text()
    assert "def child_exit(" in source
    assert "mark_process_dead(worker.pid" in source


def test_run_empties_the_metrics_directory_before_starting_its_processes(settings, tmp_path, monkeypatch):
    from config.metrics import reset_multiprocess_dir

    left = tmp_path / "metrics"
    left.mkdir()
    (left / "counter_123.db").write_bytes(b"an earlier run's counts")
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(left))
    settings.METRICS_ENABLED = False
    assert reset_multiprocess_dir() is None
    assert (left / "counter_123.db").exists()
    settings.METRICS_ENABLED = True
    (left / "notes.txt").write_text("not prometheus_client's")
    assert reset_multiprocess_dir() == left
    assert [path.name for path in left.iterdir()] == ["notes.txt"]
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path / "new"))
    assert reset_multiprocess_dir() == tmp_path / "new"
    assert (tmp_path / "new").is_dir()


# --- two web processes and a worker ------------------------------------------------------------


@pytest.fixture
def metrics_dir(tmp_path: Path) -> Path:
    path = tmp_path / "metrics"
    path.mkdir()
    return path


@pytest.fixture
def web(transactional_db: None, metrics_dir: Path) -> Iterator[LiveServer]:
    env = {"METRICS_ENABLED": "1", "METRICS_TOKEN": TOKEN, "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir)}
    with serve_web("metrics", processes=2, API_RATE="25/min", **env) as server:
        yield server


def scrape(server: LiveServer) -> Samples:
    response = httpx.get(f"{server.url}/metrics", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)
    assert response.status_code == 200, response.text[:500]
    return parse(response.text)


def per_process(metrics_dir: Path, tmp_path: Path) -> dict[int, Samples]:
    """Each process's own samples, read from its files alone."""
    files: dict[int, list[Path]] = defaultdict(list)
    for path in metrics_dir.glob("*.db"):
        files[int(path.stem.rsplit("_", 1)[1])].append(path)
    found: dict[int, Samples] = {}
    for pid, paths in files.items():
        alone = tmp_path / f"alone-{pid}"
        alone.mkdir(parents=True)
        for path in paths:
            shutil.copy(path, alone / path.name)
        registry = CollectorRegistry(auto_describe=False)
        MultiProcessCollector(registry, path=str(alone))
        samples: Samples = {}
        for family in registry.collect():
            for sample in family.samples:
                samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
        found[pid] = samples
    return found


def wait_for(condition: Any, what: str, worker: WorkerProcess | None = None) -> None:
    deadline = time.monotonic() + DEADLINE
    while not condition():
        if worker is not None:
            assert worker.process.poll() is None, f"the worker died waiting for {what}:\n{worker.log_text()[-3000:]}"
        assert time.monotonic() < deadline, f"no {what} within {DEADLINE:.0f}s"
        time.sleep(0.2)


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_every_family_counts_across_two_web_processes_and_a_worker(
    tenant: Tenant, other_tenant: Tenant, web: LiveServer, metrics_dir: Path, tmp_path: Path
) -> None:
    gate_client().delete(TEST_QUEUE)  # tasks earlier tests left are about rows long gone
    api = httpx.Client(base_url=web.url, headers={"Authorization": f"Bearer {tenant.key.plaintext}"}, timeout=30)

    # Without the token: refused, in the API's error shape.
    refused = httpx.get(f"{web.url}/metrics", timeout=30)
    assert refused.status_code == 401
    assert refused.json()["error"]["code"] == "not_authenticated"

    # Requests from many connections at once, so both web processes answer some; the other
    # tenant's key goes over API_RATE (25 a minute) and is refused with 429.
    statuses: list[int] = []

    def lane() -> None:
        for _ in range(5):
            headers = {"Authorization": f"Bearer {other_tenant.key.plaintext}"}
            statuses.append(httpx.get(f"{web.url}/api/v1/me", headers=headers, timeout=30).status_code)

    lanes = [threading.Thread(target=lane) for _ in range(8)]
    for thread in lanes:
        thread.start()
    for thread in lanes:
        thread.join()
    assert statuses.count(200) == 25
    assert statuses.count(429) == 15
    assert httpx.get(f"{web.url}/no/such/page/{PERSON}", timeout=30).status_code == 404

    # A person, turns and replies (four exchanges queue a curator pass), and tool calls.
    conversation = api.post("/api/v1/conversations", json={"person": PERSON}).json()["id"]
    turns = []
    for n in range(4):
        body = {"person": PERSON, "conversation": conversation, "message": f"I live in Oslo, part {n}."}
        turn = api.post("/api/v1/turns", json=body)
        assert turn.status_code == 201, turn.text
        turns.append(turn.json()["turn"])
        assert api.post(f"/api/v1/turns/{turns[-1]}/reply", json={"content": "Noted."}).status_code == 201
    remembered = api.post(
        "/api/v1/tools/remember",
        json={"person": PERSON, "key": "pet", "description": "Their pet", "content": "A cat named Fig."},
    )
    assert remembered.status_code == 200, remembered.text
    assert api.post("/api/v1/tools/recall_memories", json={"person": PERSON, "query": "pet"}).status_code == 200
    missing = api.post("/api/v1/tools/forget_memory", json={"person": PERSON, "key": "no-such-note"})
    assert missing.status_code == 404
    assert api.get(f"/api/v1/people/{PERSON}").status_code == 200
    # The MCP server, which answers outside Django's middleware, is counted under its own route.
    listed = api.post(
        "/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
        headers={"Accept": "application/json, text/event-stream"},
    )
    assert listed.status_code == 200, listed.text

    before = scrape(web)
    # Nothing has embedded the note or the messages yet: no worker runs, their tasks wait in the queue.
    assert total(before, "mnemo_embedding_backlog", kind="note") >= 1
    assert total(before, "mnemo_celery_queue_length", queue=TEST_QUEUE) >= 1

    assert total(before, "mnemo_http_requests_total", route="api/v1/me", method="GET", status="200") == 25
    assert total(before, "mnemo_http_requests_total", route="api/v1/me", method="GET", status="429") == 15
    assert total(before, "mnemo_http_requests_total", route="unmatched", status="404") == 1
    assert total(before, "mnemo_http_requests_total", route="api/v1/turns", method="POST", status="201") == 4
    assert total(before, "mnemo_http_requests_total", route="api/v1/turns/<int:turn_id>/reply", status="201") == 4
    assert total(before, "mnemo_http_requests_total", route="api/v1/people/<path:external_id>", status="200") == 1
    assert total(before, "mnemo_http_requests_total", route="mcp", method="POST", status="200") == 1
    assert total(before, "mnemo_http_request_duration_seconds_count", route="api/v1/turns") == 4
    assert total(before, "mnemo_rate_limited_total", scope="api") == 15
    assert total(before, "mnemo_tool_calls_total", tool="remember", outcome="ok") == 1
    assert total(before, "mnemo_tool_calls_total", tool="recall_memories", outcome="ok") == 1
    assert total(before, "mnemo_tool_calls_total", tool="forget_memory", outcome="not_found") == 1
    assert total(before, "mnemo_turn_compose_duration_seconds_count") == 4
    assert total(before, "mnemo_turn_layer_chars_count", layer="last_exchange") == 4
    assert total(before, "mnemo_turn_layer_chars_sum", layer="last_exchange") > 0
    assert ("mnemo_webhook_deliveries_total", (("outcome", "delivered"),)) in before  # counted from zero
    assert total(before, "mnemo_curator_runs_total") == 0

    # Both web processes answered (the kernel hands each connection to either: on a busy machine
    # one may have taken them all, so a few more unauthenticated calls until both have some), and
    # a scrape is the sum of what each counted.
    def answered_by() -> dict[int, float]:
        processes = per_process(metrics_dir, tmp_path / f"split-{time.monotonic_ns()}")
        return {pid: total(s, "mnemo_http_requests_total", route="api/v1/me") for pid, s in processes.items()}

    for _ in range(20):
        if sum(1 for count in answered_by().values() if count > 0) == 2:
            break
        extra = [threading.Thread(target=httpx.get, args=(f"{web.url}/api/v1/me",)) for _ in range(8)]
        for thread in extra:
            thread.start()
        for thread in extra:
            thread.join()
    split = answered_by()
    assert sum(1 for count in split.values() if count > 0) == 2, split
    assert sum(split.values()) == total(scrape(web), "mnemo_http_requests_total", route="api/v1/me") >= 40

    # A worker: the curator pass runs against the local chat model; the embeddings are done.
    script = Script(replies=[(200, json.dumps(PLAN))] * 3)
    with chat_server(script) as llm_url:
        extra_env = {
            "METRICS_ENABLED": "1",
            "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir),
            "LLM_PROVIDER": "openai",
            "LLM_BASE_URL": llm_url,
            "LLM_MODEL": "test-model",
        }
        with run_celery_worker(extra_env=extra_env) as worker:

            def settled() -> bool:
                now = scrape(web)
                return (
                    total(now, "mnemo_curator_runs_total", job="curate") >= 1
                    and total(now, "mnemo_celery_queue_length", queue=TEST_QUEUE) == 0
                    and total(now, "mnemo_embedding_backlog") == 0
                )

            wait_for(settled, "a curator run, an empty queue and no embedding backlog", worker)
    after = scrape(web)
    assert total(after, "mnemo_curator_runs_total", job="curate", outcome="applied") == 1
    assert total(after, "mnemo_provider_calls_total", provider="openai", outcome="ok") >= 1
    assert total(after, "mnemo_provider_tokens_total", provider="openai", kind="in") >= 120
    assert total(after, "mnemo_provider_tokens_total", provider="openai", kind="out") >= 30
    assert total(after, "mnemo_embedding_backlog", kind="note") == 0
    assert total(after, "mnemo_embedding_backlog", kind="message") == 0
    assert total(after, "mnemo_http_requests_total", route="metrics", status="200") >= 2

    # No label carries an id or a name: routes are URL patterns, never paths.
    values = {value for (_, labels), _ in after.items() for name, value in labels if name != "le"}
    assert not [value for value in values if PERSON in value]
    routes = {value for (_, labels), _ in after.items() for name, value in labels if name == "route"}
    assert not [route for route in routes if re.search(r"(^|/)\d+(/|$)", route)], routes
    assert {"api/v1/me", "api/v1/turns", "api/v1/turns/<int:turn_id>/reply", "metrics", "unmatched"} <= routes
