"""`make bench`: run the benchmarks against a scratch database on the embedded (or given) Postgres.

`python -m bench` runs them all; `python -m bench compose vectors` runs the named ones.
BENCH_KEEP_DATABASE=1 leaves the scratch database in place afterwards (to look into a query's plan).
"""

from __future__ import annotations

import importlib
import os
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

BENCHMARKS = {
    "api": "bench.bench_api",
    "memory": "bench.bench_memory",
    "vectors": "bench.bench_vectors",
    "recall": "bench.bench_recall",
    "compose": "bench.bench_compose",
    "record": "bench.bench_record",
    "curator": "bench.bench_curator",
    "import": "bench.bench_import",
    "locomo": "bench.locomo_retrieval",
    "longmemeval": "bench.longmemeval",
    "longmemeval_scale": "bench.longmemeval_scale",
    "reads": "bench.bench_reads",
    "http": "bench.bench_http",
    "load": "bench.bench_load",
    "multilingual": "bench.bench_multilingual",
}


def main(argv: list[str]) -> int:
    unknown = [name for name in argv if name not in BENCHMARKS]
    if unknown:
        print(f"Unknown benchmark(s): {', '.join(unknown)}. Choose from: {', '.join(BENCHMARKS)}.", file=sys.stderr)
        return 2
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    import logging

    from django.db import connection
    from django.test.utils import setup_test_environment

    logging.getLogger("django.request").setLevel(logging.ERROR)  # 4xx paths are measured, not news
    setup_test_environment()
    # A throwaway database of its own: benchmarks never touch the main data, nor a test run's
    # (BENCH_DATABASE names another, for two runs side by side).
    connection.settings_dict.setdefault("TEST", {})["NAME"] = os.environ.get("BENCH_DATABASE", "mnemo_bench")
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    print(_machine())
    try:
        suffix = uuid.uuid4().hex[:6]
        for name in argv or list(BENCHMARKS):
            module = importlib.import_module(BENCHMARKS[name])
            print(f"\n## {name}")
            with _settings_restored():
                module.run(f"bench-{name}-{suffix}")
    finally:
        if os.environ.get("BENCH_KEEP_DATABASE"):  # left for EXPLAIN and experiments; the next run replaces it
            print(f"\nThe benchmark database {connection.settings_dict['NAME']} is kept (BENCH_KEEP_DATABASE is set).")
        else:
            connection.creation.destroy_test_db(old_name, verbosity=0)
    return 0


def _machine() -> str:
    """A line on the machine the run measures: its cores, its load, and the CPU a fixed pure-Python
    loop takes, the best of three. Most figures here are Python's time; on a machine where that loop
    is twice as slow they are about twice as large, so compare runs of two machines with it."""
    import time

    def loop() -> float:
        started, total = time.process_time(), 0
        for i in range(3_000_000):
            total += i
        return time.process_time() - started

    reference = min(loop() for _ in range(3))
    load = ", ".join(f"{figure:.2f}" for figure in os.getloadavg())
    return (
        f"\nThis machine: {os.cpu_count()} cores, load average {load} at the start; the reference Python loop "
        f"(3,000,000 additions) took {reference * 1000:.0f} ms of CPU, the best of 3."
    )


@contextmanager
def _settings_restored() -> Iterator[None]:
    """Run one benchmark, then put back the settings (and the task queue) the run started with.

    Several benchmarks point EMBEDDER and others at what they measure; one run after them would
    measure that instead of the configuration (the HTTP and load benchmarks start the real server
    with the settings' embedder, and measured the hashing one the reads benchmark had left)."""
    from django.conf import settings

    from config.celery import app

    wrapped = settings._wrapped.__dict__  # type: ignore[misc]  # the stubs type settings as Settings, not its lazy wrapper
    saved = dict(wrapped)
    queue = app.conf.task_default_queue
    try:
        yield
    finally:
        for name in [name for name in wrapped if name not in saved]:
            delattr(settings, name)
        for name, value in saved.items():
            if wrapped.get(name) is not value:
                setattr(settings, name, value)
        app.conf.task_default_queue = queue


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
