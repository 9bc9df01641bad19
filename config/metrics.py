"""Prometheus metrics: the families, the functions the code counts with, and GET /metrics.

Off unless METRICS_ENABLED=1, and then free of cost where it is off: the middleware removes itself
and every count_* function returns at its first line. On, every process (each gunicorn worker,
each Celery worker process) writes its samples to files in PROMETHEUS_MULTIPROC_DIR
(prometheus_client's multiprocess mode), and a scrape of any web process adds them all up. The
directory is emptied by `manage.py run` before it starts its processes (config/management/
commands/run.py); a deployment that starts them itself empties it first (docs/operations.md).

Labels are code-defined names only: URL patterns (never paths), tool and provider names, outcomes
and error codes. Nothing a caller sends (an id, a person's name, an arbitrary method) becomes a
label value.
"""

from __future__ import annotations

import functools
import hmac
import logging
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.core.exceptions import MiddlewareNotUsed
from django.db import DatabaseError
from django.http import Http404, HttpRequest, HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.multiprocess import MultiProcessCollector
from redis.exceptions import RedisError
from rest_framework.exceptions import APIException

from config.errors import json_error_response
from config.exceptions import DomainError

logger = logging.getLogger(__name__)

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"

# Methods are a label: anything else a client sends is counted as "other", so a caller cannot mint series.
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
# Outcomes counted from zero in every process, so a rate() over them exists before the first event.
CURATOR_OUTCOMES = ("applied", "skipped", "failed", "error")
CURATOR_JOBS = ("curate", "consolidate", "summary")
WEBHOOK_OUTCOMES = ("delivered", "retrying", "failed")
RATE_LIMIT_SCOPES = ("api", "demo")
REPLICA_OUTCOMES = ("replica", "replica behind", "replica down", "in a transaction")

SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
# A layer holds up to COMPOSER_CEILING characters (18,000 by default).
CHARS = (0, 250, 500, 1000, 2000, 4000, 8000, 16000, 32000)


@dataclass(frozen=True)
class Families:
    http_requests: Counter
    http_duration: Histogram
    tool_calls: Counter
    compose_duration: Histogram
    layer_chars: Histogram
    curator_runs: Counter
    provider_calls: Counter
    provider_tokens: Counter
    rate_limited: Counter
    webhook_deliveries: Counter
    replica_reads: Counter


@functools.cache
def families() -> Families:
    """The families, made once per process on first use (in multiprocess mode, making one opens its file)."""
    made = Families(
        http_requests=Counter(
            "mnemo_http_requests", "HTTP requests answered, by URL pattern.", ["route", "method", "status"]
        ),
        http_duration=Histogram(
            "mnemo_http_request_duration_seconds",
            "Time to answer a request, by URL pattern.",
            ["route"],
            buckets=SECONDS,
        ),
        tool_calls=Counter(
            "mnemo_tool_calls", "Tool calls (REST and MCP), by outcome or error code.", ["tool", "outcome"]
        ),
        compose_duration=Histogram("mnemo_turn_compose_duration_seconds", "Time to compose a turn.", buckets=SECONDS),
        layer_chars=Histogram(
            "mnemo_turn_layer_chars", "Characters each layer of a composed turn took.", ["layer"], buckets=CHARS
        ),
        curator_runs=Counter("mnemo_curator_runs", "Curator jobs run by workers.", ["job", "outcome"]),
        provider_calls=Counter("mnemo_provider_calls", "Calls to the LLM provider.", ["provider", "outcome"]),
        provider_tokens=Counter("mnemo_provider_tokens", "Tokens the LLM provider reported.", ["provider", "kind"]),
        rate_limited=Counter("mnemo_rate_limited", "Requests refused by a rate limit.", ["scope"]),
        webhook_deliveries=Counter("mnemo_webhook_deliveries", "Webhook delivery attempts.", ["outcome"]),
        replica_reads=Counter(
            "mnemo_replica_reads",
            "Reads that could go to a replica (DATABASE_REPLICA_URLS), by where they went and why.",
            ["outcome"],
        ),
    )
    for job in CURATOR_JOBS:
        for outcome in CURATOR_OUTCOMES:
            made.curator_runs.labels(job, outcome)
    for outcome in WEBHOOK_OUTCOMES:
        made.webhook_deliveries.labels(outcome)
    for scope in RATE_LIMIT_SCOPES:
        made.rate_limited.labels(scope)
    for outcome in REPLICA_OUTCOMES:
        made.replica_reads.labels(outcome)
    return made


def enabled() -> bool:
    return bool(settings.METRICS_ENABLED)


# --- what the code counts ---------------------------------------------------------------------


@contextmanager
def tool_call(tool: str) -> Iterator[None]:
    """Count one call of a registered tool by how it ended: ok, a domain error's code, or the
    code of the API error (a body that is not JSON); "error" for anything else."""
    if not settings.METRICS_ENABLED:
        yield
        return
    outcome = "error"
    try:
        yield
        outcome = "ok"
    except DomainError as exc:
        outcome = exc.code
        raise
    except APIException as exc:
        outcome = str(exc.default_code)
        raise
    finally:
        families().tool_calls.labels(tool, outcome).inc()


def observe_turn(*, seconds: float, layer_chars: Mapping[str, int]) -> None:
    if not settings.METRICS_ENABLED:
        return
    made = families()
    made.compose_duration.observe(seconds)
    for layer, chars in layer_chars.items():
        made.layer_chars.labels(layer).observe(chars)


def count_curator_run(*, job: str, outcome: str) -> None:
    if settings.METRICS_ENABLED:
        families().curator_runs.labels(job, outcome).inc()


def count_provider_call(*, provider: str, outcome: str, tokens_in: int | None, tokens_out: int | None) -> None:
    if not settings.METRICS_ENABLED:
        return
    made = families()
    made.provider_calls.labels(provider, outcome).inc()
    if tokens_in:
        made.provider_tokens.labels(provider, "in").inc(tokens_in)
    if tokens_out:
        made.provider_tokens.labels(provider, "out").inc(tokens_out)


def count_rate_limited(scope: str) -> None:
    if settings.METRICS_ENABLED:
        families().rate_limited.labels(scope).inc()


def count_replica_read(outcome: str) -> None:
    """A search or listing that may read from a replica: "replica" (it did), or why the primary
    answered: "replica behind", "replica down", "in a transaction"."""
    if settings.METRICS_ENABLED:
        families().replica_reads.labels(outcome).inc()


def count_webhook_delivery(outcome: str) -> None:
    """One delivery attempt: "delivered", "retrying" (failed, tried again later) or "failed" (given up)."""
    if settings.METRICS_ENABLED:
        families().webhook_deliveries.labels(outcome).inc()


# --- requests ---------------------------------------------------------------------------------


class MetricsMiddleware:
    """Count each request and its time under its URL pattern (request.resolver_match.route)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        if not settings.METRICS_ENABLED:
            raise MiddlewareNotUsed
        self.get_response = get_response
        self.families = families()
        # The samples of each (route, method, status) seen, found once: labels() costs more than
        # inc() and observe() together. Bounded, as the labels are (patterns, methods, statuses).
        self.children: dict[tuple[str, str, int], tuple[Counter, Histogram]] = {}

    def __call__(self, request: HttpRequest) -> HttpResponse:
        started = time.perf_counter()
        response = self.get_response(request)
        elapsed = time.perf_counter() - started
        match = request.resolver_match
        # Refused before URL resolution (static files, an oversized body) or matching no pattern.
        route = match.route if match is not None else "unmatched"
        method = request.method if request.method in METHODS else "other"
        key = (route, method, response.status_code)
        children = self.children.get(key)
        if children is None:
            made = self.families
            children = (made.http_requests.labels(route, method, str(key[2])), made.http_duration.labels(route))
            self.children[key] = children
        children[0].inc()
        children[1].observe(elapsed)
        return response


def observe_request(*, route: str, method: str, status: int, seconds: float) -> None:
    """A request Django's middleware does not see (the MCP server at /mcp), counted as MetricsMiddleware counts."""
    if settings.METRICS_ENABLED:
        made = families()
        made.http_requests.labels(route, method if method in METHODS else "other", str(status)).inc()
        made.http_duration.labels(route).observe(seconds)


# --- the scrape -------------------------------------------------------------------------------


class ScrapeTimeCollector:
    """Gauges read when Prometheus scrapes: the embedding backlog and the Celery queue's length."""

    def collect(self) -> Iterable[Metric]:
        backlog = GaugeMetricFamily(
            "mnemo_embedding_backlog", "Rows without a vector of the current embedding model.", labels=["kind"]
        )
        try:
            for kind, count in embedding_backlog().items():
                backlog.add_metric([kind], count)
        except DatabaseError:
            logger.exception("mnemo_embedding_backlog not scraped: the database failed")
        yield backlog
        queue = settings.CELERY_TASK_DEFAULT_QUEUE
        length = GaugeMetricFamily("mnemo_celery_queue_length", "Tasks waiting in a Celery queue.", labels=["queue"])
        try:
            length.add_metric([queue], celery_queue_length(queue))
        except RedisError:
            logger.exception("mnemo_celery_queue_length not scraped: the broker (Redis) failed")
        yield length


def embedding_backlog() -> dict[str, int]:
    """Per indexed model ("note", "message"): rows that have no vector of the configured model and
    width. One anti-join count each; it does not recompute text hashes (the reconciler does)."""
    from django.db.models import Exists, OuterRef

    from memory.embedders import get_embedder
    from memory.indexing import indexed_models

    embedder = get_embedder()
    counts: dict[str, int] = {}
    for indexed in indexed_models():
        if embedder is None:  # EMBEDDER=none: nothing is waiting to be embedded
            counts[indexed.label] = 0
            continue
        rows = indexed.model._default_manager.all()
        if indexed.skip is not None:
            rows = rows.exclude(indexed.skip)
        current = indexed.vector_model._default_manager.filter(
            **{indexed.row_field: OuterRef("pk")}, team=OuterRef("team"), model=embedder.model, dim=embedder.dim
        )
        counts[indexed.label] = rows.filter(~Exists(current)).count()
    return counts


def celery_queue_length(queue: str) -> int:
    from config.redis import redis_client

    client = redis_client(timeout=2.0)
    try:
        return int(client.llen(queue))
    finally:
        client.close()


def scrape_registry() -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    families()  # this process's families exist (their zero-initialised outcomes with them)
    if os.environ.get(MULTIPROC_ENV):
        MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    else:  # one process (a test, runserver): its own samples
        from prometheus_client import REGISTRY

        registry.register(_ProcessCollector(REGISTRY))
    registry.register(ScrapeTimeCollector())
    return registry


@dataclass(frozen=True)
class _ProcessCollector:
    registry: CollectorRegistry

    def collect(self) -> Iterable[Metric]:
        return self.registry.collect()


def _authorised(request: HttpRequest, token: str) -> bool:
    given = request.headers.get("Authorization", "")
    return hmac.compare_digest(given.encode("utf-8", "surrogateescape"), f"Bearer {token}".encode())


@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    if not settings.METRICS_ENABLED:
        raise Http404("Metrics are off (METRICS_ENABLED).")
    token = settings.METRICS_TOKEN
    if token and not _authorised(request, token):
        response = json_error_response(
            request, "not_authenticated", "Send the metrics token: Authorization: Bearer <METRICS_TOKEN>.", 401
        )
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    return HttpResponse(generate_latest(scrape_registry()), content_type=CONTENT_TYPE_LATEST)


# --- the multiprocess directory ---------------------------------------------------------------


def reset_multiprocess_dir() -> Path | None:
    """Empty PROMETHEUS_MULTIPROC_DIR (made when missing) before the processes that write to it
    start: files left by an earlier run's processes would be added to this run's counts."""
    path = os.environ.get(MULTIPROC_ENV)
    if not settings.METRICS_ENABLED or not path:
        return None
    directory = Path(path)
    directory.mkdir(parents=True, exist_ok=True)
    # Only prometheus_client's own files ("counter_1234.db"): the variable could name a directory
    # that holds other things too.
    for stale in directory.glob("*_*.db"):
        stale.unlink(missing_ok=True)
    return directory
