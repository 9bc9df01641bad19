"""The real server under load: N concurrent clients (1, 4, 16), each an agent's session with a
person of its own, mixing turns, replies, recall and remember for a fixed time, against the web
processes and Celery worker `manage.py run` starts (the worker embeds and curates meanwhile).

Reports throughput, p50/p95 and errors per level (each run twice, the levels in order and back, each
run measured over a fixed window after a ramp), throughput against one client's (the in-run
baseline), and the CPU a request cost in each part: web processes, worker, Postgres, Redis and the
clients. Each level starts from a settled server and is charged the embedding it left the worker.
The clients run on the same machine as the server and share its cores."""

from __future__ import annotations

import os
import statistics
import threading
import time
from dataclasses import dataclass, field

from bench.bench_http import seed
from bench.server import Client, Server, serve, settle

LEVELS = (1, 4, 16)
# Each level runs twice, the levels in order and back (1, 4, 16, 16, 4, 1): a shared machine's
# speed drifts over minutes, and run this way a drift moves one client's figure as much as
# sixteen's, not only one of them. Each table row is a level's two runs together.
ORDER = LEVELS + LEVELS[::-1]
RAMP = 2.0  # seconds each level runs before it is measured: the clients start together, and fall out of step
SECONDS = 10.0  # the measured window of each level
NOTES = 30  # per person
RSS_TARGET_MB = 300  # the most a web process should hold after the run
QUERIES = ["coffee before climbing", "what does she do on weekends", "music she likes", "where does he run"]


@dataclass
class Tally:
    samples: list[float] = field(default_factory=list)  # requests that ended in the measured window
    by_operation: dict[str, list[float]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)  # at any time in the level
    completed: int = 0  # every request that ended, in the window or not (what the level's CPU paid for)

    def merge(self, other: Tally) -> None:
        self.samples += other.samples
        for name, samples in other.by_operation.items():
            self.by_operation.setdefault(name, []).extend(samples)
        self.errors += other.errors
        self.completed += other.completed


def session(
    server: Server, *, key: str, person: str, opens: float, closes: float, tally: Tally, lock: threading.Lock
) -> None:
    """One client: turn, reply, recall, remember, over and over, until the window closes. A request
    counts in the throughput and the percentiles when it ends inside the window."""
    client = Client(server, key=key)
    i = 0
    while time.monotonic() < closes:
        i += 1
        steps = [
            ("turn", "POST", "/api/v1/turns", {"person": person, "message": f"Any tips for today? ({i})"}, 201),
            ("reply", "POST", "", {"content": f"Try the morning climb, then a flat white. ({i})"}, 201),
            ("recall", "POST", "/api/v1/tools/recall_memories", {"person": person, "query": QUERIES[i % 4]}, 200),
            ("remember", "POST", "/api/v1/tools/remember",
             {"person": person, "key": f"plan-{i % 5}", "description": "A plan they mentioned",
              "content": f"They plan to try route {i} this week."}, 200),
        ]  # fmt: skip
        turn_id = None
        for name, method, path, body, status in steps:
            if name == "reply":
                if turn_id is None:
                    continue
                path = f"/api/v1/turns/{turn_id}/reply"
            start = time.perf_counter()
            try:
                answer = client.request(method, path, body, expect=status)
            except Exception as exc:  # every failure is counted and the first few shown
                with lock:
                    tally.errors.append(f"{name}: {exc}")
                continue
            elapsed = time.perf_counter() - start
            if name == "turn":
                turn_id = answer["turn"]
            ended = time.monotonic()
            with lock:
                tally.completed += 1
                if opens <= ended <= closes:
                    tally.samples.append(elapsed)
                    tally.by_operation.setdefault(name, []).append(elapsed)
    client.close()


def drive(server: Server, *, key: str, people: list[str], clients: int) -> tuple[Tally, float]:
    tally, lock = Tally(), threading.Lock()
    start = time.monotonic()
    opens = start + RAMP
    threads = [
        threading.Thread(target=session, args=(server,), kwargs={"key": key, "person": people[c], "opens": opens,
                                                               "closes": opens + SECONDS, "tally": tally, "lock": lock})
        for c in range(clients)
    ]  # fmt: skip
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return tally, time.monotonic() - start


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] * 1000 if ordered else float("nan")


def run(scratch_team_slug: str) -> None:
    from django.conf import settings

    key, people = seed(scratch_team_slug, people=max(LEVELS), notes=NOTES)
    tallies = {clients: Tally() for clients in LEVELS}
    seconds = dict.fromkeys(LEVELS, 0.0)  # clients -> the wall time of its runs
    cpu: dict[int, dict[str, float]] = {clients: {} for clients in LEVELS}  # clients -> part -> CPU seconds
    with serve("load") as server:
        drive(server, key=key, people=people, clients=2 * server.web_processes)  # warm every web process
        settle(server, "the warm-up")
        for clients in ORDER:
            # Each run starts from a quiet server, and is charged the work it left the worker (the
            # embeddings of what it wrote): it settles before the next run starts.
            before = server.cpu_seconds_by_part()
            tally, wall = drive(server, key=key, people=people, clients=clients)
            settle(server, f"{clients} client(s)")
            after = server.cpu_seconds_by_part()
            for part in after:
                cpu[clients][part] = cpu[clients].get(part, 0.0) + after[part] - before[part]
            tallies[clients].merge(tally)
            seconds[clients] += wall
        rss = server.web_rss_megabytes()  # after every level has run, twice
    passes = ORDER.count(LEVELS[0])
    window = SECONDS * passes  # the measured seconds of each level
    results = [(clients, tallies[clients], seconds[clients]) for clients in LEVELS]
    print(
        f"\n{server.web_processes} web process(es) and one Celery worker process (started as "
        "`manage.py run` starts them; it starts two worker processes by default), "
        f"EMBEDDER={settings.EMBEDDER}; each client a person of its own with {NOTES} notes; clients on the same "
        f"machine. Levels in the order {', '.join(map(str, ORDER))}, each row a level's {passes} runs together. A run "
        f"lasts {RAMP:.0f} s (the clients start together and fall out of step), then is measured for {SECONDS:.0f} s: "
        "req/s and the percentiles are of the requests that ended in those seconds."
    )
    print("\n### Load: turns, replies, recall and remember from N concurrent clients\n")
    print("| clients | requests | req/s | p50 ms | p95 ms | errors | x 1 client req/s |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    base = len(results[0][1].samples) / window
    for clients, tally, _ in results:
        rate = len(tally.samples) / window
        print(
            f"| {clients} | {len(tally.samples)} | {rate:.1f} | {percentile(tally.samples, 0.5):.1f} | "
            f"{percentile(tally.samples, 0.95):.1f} | {len(tally.errors)} | {rate / base:.2f} |"
        )
    print(
        "\n| clients | " + " | ".join(f"{name} p50 / p95 ms" for name in ("turn", "reply", "recall", "remember")) + " |"
    )
    print("| ---: | ---: | ---: | ---: | ---: |")
    for clients, tally, _ in results:
        cells = []
        for name in ("turn", "reply", "recall", "remember"):
            samples = tally.by_operation.get(name, [])
            cells.append(
                f"{statistics.median(samples) * 1000:.1f} / {percentile(samples, 0.95):.1f}" if samples else "—"
            )
        print(f"| {clients} | " + " | ".join(cells) + " |")
    parts = ("web", "worker", "database", "redis", "clients")
    print(
        "\nCPU ms per request, by part: the web processes, the Celery worker (embedding what was written), "
        "every Postgres process, Redis (the broker, the pending lists, the rate limits) and the benchmark's "
        "client threads; from each run's start until its work is done (the server settled), over every "
        "request the level's runs completed (in a window or not). Cores busy: all of it over the runs' seconds.\n"
    )
    print("| clients | " + " | ".join(parts) + " | total | cores busy |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for clients, tally, wall in results:
        used = cpu[clients]
        per = {part: used[part] * 1000 / max(tally.completed, 1) for part in parts}
        print(
            f"| {clients} | "
            + " | ".join(f"{per[part]:.2f}" for part in parts)
            + f" | {sum(per.values()):.2f} | {sum(used.values()) / wall:.2f} |"
        )
    print(_bound(results, cpu, base=base, window=window))
    print(
        f"\nResident memory (RSS) of each of the {len(rss)} web processes after every level's runs: "
        + ", ".join(f"{mb:.0f} MB" for mb in sorted(rss))
        + (f"; the largest {max(rss):.0f} MB (target: at most {RSS_TARGET_MB} MB)." if rss else ".")
    )
    errors = [error for _, tally, _ in results for error in tally.errors]
    if errors:
        print(f"\nFirst errors ({len(errors)} in all):\n" + "\n".join(f"- {error[:300]}" for error in errors[:5]))


def _bound(
    results: list[tuple[int, Tally, float]], cpu: dict[int, dict[str, float]], *, base: float, window: float
) -> str:
    """What the machine's cores allow the most clients, from this run's own figures: every core busy
    with requests that cost what they cost at that level. One client's requests follow one another,
    so it uses about one core for the web and the database while the worker embeds what it wrote
    beside it; at the top level every request's share of the worker comes out of the same cores."""
    clients, tally, _ = results[-1]
    cores = os.cpu_count() or 1
    per = {part: seconds * 1000 / max(tally.completed, 1) for part, seconds in cpu[clients].items()}
    total = sum(per.values())
    most = cores * 1000 / total
    without_worker = cores * 1000 / (total - per.get("worker", 0.0))
    measured = len(tally.samples) / window
    return (
        f"\nWhat bounds {clients} clients on this machine: with all {cores} cores busy at {total:.1f} ms of CPU a "
        f"request, they could complete at most {most:.1f} req/s, {most / base:.2f}x one client's {base:.1f} "
        f"(measured: {measured:.1f} req/s, {measured / base:.2f}x). Without the worker's "
        f"{per.get('worker', 0.0):.1f} ms a request (the embedding of what was written) the bound would be "
        f"{without_worker / base:.2f}x."
    )
