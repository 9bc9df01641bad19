"""OpenTelemetry traces with OTEL_EXPORTER_OTLP_ENDPOINT set: a request, its SQL and the Celery task
it queued in one trace, received over OTLP/HTTP by a local stand-in collector; nothing without it."""

from __future__ import annotations

import gzip
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from tests.conftest import TEST_QUEUE
from tests.support.fixtures import Tenant, run_celery_worker, serve_web, subprocess_env
from tests.support.gated_worker import gate_client
from tests.support.http_stub import serve

ROOT = Path(__file__).resolve().parents[2]
DEADLINE = 60.0


class Received:
    """The spans the collector was sent, each with its service's name."""

    def __init__(self) -> None:
        self.spans: list[tuple[str, Span]] = []
        self.paths: list[str] = []
        self.lock = threading.Lock()

    def add(self, path: str, body: bytes) -> None:
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        with self.lock:
            self.paths.append(path)
            for resource_spans in request.resource_spans:
                attributes = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
                for scope_spans in resource_spans.scope_spans:
                    self.spans.extend((attributes.get("service.name", ""), span) for span in scope_spans.spans)

    def of_trace(self, trace_id: bytes) -> list[Span]:
        with self.lock:
            return [span for _, span in self.spans if span.trace_id == trace_id]


@pytest.fixture
def collector() -> Iterator[tuple[str, Received]]:
    received = Received()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            received.add(self.path, body)
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

    with serve(Handler) as url:
        yield url, received


def attributes(span: Span) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for attribute in span.attributes:
        value = attribute.value
        found[attribute.key] = value.string_value or value.int_value or value.bool_value
    return found


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_request_its_statements_and_the_task_it_queues_share_one_trace(
    tenant: Tenant, collector: tuple[str, Received]
) -> None:
    url, received = collector
    otel = {"OTEL_EXPORTER_OTLP_ENDPOINT": url, "OTEL_BSP_SCHEDULE_DELAY": "100", "OTEL_SERVICE_NAME": "mnemo-test"}
    gate_client().delete(TEST_QUEUE)  # tasks earlier tests left are about rows long gone
    with (
        serve_web(
            "tracing",
            API_RATE="1000000/min",
            OTEL_EXPORTER_OTLP_ENDPOINT=url,
            OTEL_BSP_SCHEDULE_DELAY="100",
            OTEL_SERVICE_NAME="mnemo-test",
        ) as web,
        run_celery_worker(extra_env=otel) as worker,
    ):
        response = httpx.post(
            f"{web.url}/api/v1/tools/remember",
            headers={"Authorization": f"Bearer {tenant.key.plaintext}"},
            json={"person": "ada", "key": "home-city", "description": "Where Ada lives", "content": "Oslo."},
            timeout=30,
        )
        assert response.status_code == 200, response.text

        def request_span() -> Span | None:
            with received.lock:
                for _, span in received.spans:
                    if span.kind == Span.SPAN_KIND_SERVER and span.name == "POST api/v1/tools/remember":
                        return span
            return None

        def whole_trace() -> bool:
            span = request_span()
            if span is None:
                return False
            names = [s.name for s in received.of_trace(span.trace_id)]
            return any(name.startswith("run/memory.tasks.embed_notes") for name in names)

        deadline = time.monotonic() + DEADLINE
        while not whole_trace():
            assert worker.process.poll() is None, worker.log_text()[-3000:]
            assert time.monotonic() < deadline, (
                f"no trace from the request to its task within {DEADLINE:.0f}s; received: "
                f"{sorted({(service, span.name) for service, span in received.spans})}\n{web.log()[-2000:]}"
            )
            time.sleep(0.1)

    assert set(received.paths) == {"/v1/traces"}
    span = request_span()
    assert span is not None
    trace = received.of_trace(span.trace_id)
    by_id = {s.span_id: s for s in trace}
    assert span.parent_span_id == b""  # the request starts the trace
    assert attributes(span).get("http.route") == "api/v1/tools/remember"

    # The request's SQL: statements under the request's span, with placeholders, never the values.
    statements = [s for s in trace if attributes(s).get("db.system") == "postgresql"]
    assert statements, sorted(s.name for s in trace)
    assert any("INSERT" in str(attributes(s).get("db.statement", "")) for s in statements)
    assert not any("Oslo." in str(attributes(s).get("db.statement", "")) for s in statements)

    # The task: sent from the request (a producer span), run by the worker (a consumer span whose
    # parent is that producer span), with the worker's own SQL under it.
    sent = [s for s in trace if s.kind == Span.SPAN_KIND_PRODUCER and s.name.startswith("apply_async/")]
    ran = [s for s in trace if s.kind == Span.SPAN_KIND_CONSUMER and s.name.startswith("run/memory.tasks.embed_notes")]
    assert sent
    assert ran
    assert by_id[ran[0].parent_span_id].kind == Span.SPAN_KIND_PRODUCER
    worker_statements = [s for s in statements if s.parent_span_id == ran[0].span_id]
    assert worker_statements, "the task's SQL is traced under the task's span"
    services = {service for service, s in received.spans if s.trace_id == span.trace_id}
    assert services == {"mnemo-test"}


def test_without_the_endpoint_no_tracing_module_is_imported() -> None:
    # redis-py imports OpenTelemetry's metrics SDK whenever it is installed (redis.observability):
    # that is redis-py's, not ours. Nothing of tracing may be loaded: no tracer provider, exporter
    # or instrumentation, and psycopg's connect is psycopg's own.
    env = {k: v for k, v in subprocess_env().items() if not k.startswith("OTEL_")}
    code = (
        "import sys, django; django.setup(); import config.asgi, config.celery, psycopg; "
        "print(sorted(m for m in sys.modules if m.startswith(('opentelemetry.sdk.trace', "
        "'opentelemetry.exporter', 'opentelemetry.instrumentation')))); "
        "print(psycopg.connect.__module__)"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["[]", "psycopg.connection"]
