"""OpenTelemetry traces, on when OTEL_EXPORTER_OTLP_ENDPOINT is set (docs/operations.md, "Traces").

Spans for each request (the ASGI application, /mcp included), each database statement (psycopg)
and each Celery task, sent as OTLP over HTTP (protobuf) to the endpoint. A task's span continues
the trace of the request that queued it: the Celery instrumentation carries the context in the
task message's headers.

Off, nothing here runs and no OpenTelemetry module is imported: the imports are inside the
functions, called only when the endpoint is set (config.apps, config.asgi). The exporter reads
the standard OTEL_* variables itself (OTEL_EXPORTER_OTLP_HEADERS, OTEL_SERVICE_NAME, OTEL_BSP_*).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.exceptions import MiddlewareNotUsed
from django.http import HttpRequest, HttpResponse

_started = False


def start() -> None:
    """Install the tracer provider and instrument psycopg and Celery in this process (once).

    Called from AppConfig.ready, so before the first database connection and before any task is
    sent. The batch processor's export thread is started again in a forked child (the SDK
    re-creates it after fork), so Celery's prefork processes export their own spans.
    """
    global _started
    if _started or not settings.OTEL_EXPORTER_OTLP_ENDPOINT:
        return
    try:
        from opentelemetry import trace
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.instrumentation.celery import CeleryInstrumentor
        from opentelemetry.instrumentation.psycopg import PsycopgInstrumentor
        from opentelemetry.sdk.resources import SERVICE_NAME, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as exc:
        from django.core.exceptions import ImproperlyConfigured

        raise ImproperlyConfigured(
            f"OTEL_EXPORTER_OTLP_ENDPOINT is set but OpenTelemetry is not installed ({exc}); "
            "install Mnemo with its otel extra (pip install 'mnemo[otel]') or unset the variable."
        ) from exc

    service = os.environ.get("OTEL_SERVICE_NAME") or "mnemo"
    provider = TracerProvider(resource=Resource.create({SERVICE_NAME: service}))
    # The exporter appends /v1/traces to OTEL_EXPORTER_OTLP_ENDPOINT itself.
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    PsycopgInstrumentor().instrument(enable_commenter=False)
    CeleryInstrumentor().instrument()  # type: ignore[no-untyped-call]
    _started = True


def wrap_asgi(application: Any) -> Any:
    """The ASGI application with a server span around each request, or unchanged when tracing is off."""
    if not settings.OTEL_EXPORTER_OTLP_ENDPOINT:
        return application
    from opentelemetry.instrumentation.asgi import OpenTelemetryMiddleware

    # /healthz is polled by load balancers every few seconds: a trace of it says nothing.
    return OpenTelemetryMiddleware(application, excluded_urls="healthz", exclude_spans=["receive", "send"])


class RouteNameMiddleware:
    """Name the request's server span by its URL pattern ("GET api/v1/people/<path:external_id>"),
    as the ASGI layer cannot: it runs before Django resolves the URL."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        if not settings.OTEL_EXPORTER_OTLP_ENDPOINT:
            raise MiddlewareNotUsed
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        match = request.resolver_match
        if match is not None:
            from opentelemetry import trace

            span = trace.get_current_span()
            span.update_name(f"{request.method} {match.route}")
            span.set_attribute("http.route", match.route)
        return response
