"""The real server for the HTTP benchmarks: web processes and a Celery worker started the way
`manage.py run` starts them (its own command lines), on the benchmark's scratch database and a
queue of their own, and a keep-alive HTTP client to drive them."""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
START_DEADLINE = 90.0


def _database_url() -> str:
    """A DATABASE_URL for the server's processes to reach the benchmark's scratch database."""
    from django.db import connection

    params = connection.settings_dict
    host = params.get("HOST") or params.get("OPTIONS", {}).get("host", "")
    port = params.get("PORT") or "5432"
    user, password = params.get("USER") or "postgres", params.get("PASSWORD") or ""
    if host.startswith("/"):
        return f"postgresql://{user}:{password}@/{params['NAME']}?host={host}&port={port}"
    return f"postgresql://{user}:{password}@{host}:{port}/{params['NAME']}"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass(frozen=True)
class Server:
    host: str
    port: int
    web_processes: int
    log_path: Path
    master_pid: int = 0
    pids: tuple[int, ...] = ()  # every process started (the web master first, then the worker)

    def web_cpu_seconds(self) -> float:
        """CPU time (user + system) used so far by the web processes (gunicorn's workers)."""
        return sum(_cpu_seconds(pid) for pid in _descendants(self.master_pid)[1:])

    def web_rss_megabytes(self) -> list[float]:
        """Each web process's resident memory now (gunicorn's workers, not its master), in MB."""
        return [_rss_megabytes(pid) for pid in _descendants(self.master_pid)[1:]]

    def cpu_seconds_by_part(self) -> dict[str, float]:
        """CPU time used so far by the web processes, the Celery worker (its pool included), every
        Postgres and Redis process of the machine, and this process (the benchmark's clients)."""
        worker = sum(_cpu_seconds(pid) for root in self.pids[1:] for pid in _descendants(root))
        postgres = sum(_cpu_seconds(pid) for pid in _processes_named("postgres"))
        redis = sum(_cpu_seconds(pid) for pid in _processes_named("redis-server"))
        return {
            "web": self.web_cpu_seconds(),
            "worker": worker,
            "database": postgres,
            "redis": redis,
            "clients": time.process_time(),
        }


def _descendants(pid: int) -> list[int]:
    """The process and every process under it."""
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except FileNotFoundError:
        return []
    return [pid] + [grandchild for child in children for grandchild in _descendants(int(child))]


def _processes_named(name: str) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() == name:
                    pids.append(int(entry.name))
            except OSError:  # gone meanwhile
                continue
    return pids


def _rss_megabytes(pid: int) -> float:
    """VmRSS of a process (0 once it is gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return 0.0
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024  # kB
    return 0.0


def _cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return 0.0
    # utime and stime, then cutime and cstime: the CPU of its children that have exited (and been
    # reaped), so that a Postgres backend that ends between two readings (a pool renewed, a
    # connection closed) still counts, in the postmaster's figures.
    return sum(int(field) for field in fields[11:15]) / os.sysconf("SC_CLK_TCK")


@contextmanager
def serve(name: str, *, web_processes: int | None = None, worker: bool = True) -> Iterator[Server]:
    """Start `web_processes` web processes (default WEB_CONCURRENCY) and, with `worker`, one Celery
    worker process; stop them (by pid) when the block ends. The rate limit is lifted: the
    clients here are one agent's key driving far more than API_RATE allows."""
    from django.conf import settings

    from config.management.commands.run import web_command, worker_command

    processes = web_processes or settings.WEB_CONCURRENCY
    queue = f"bench-{name}-{os.getpid()}"
    env = {
        **{k: v for k, v in os.environ.items() if k != "DJANGO_ALLOW_ASYNC_UNSAFE"},
        "DATABASE_URL": _database_url(),
        "REDIS_URL": settings.REDIS_URL,
        "CELERY_QUEUE": queue,
        "EMBEDDER": settings.EMBEDDER,
        "API_RATE": "100000000/min",
        "DJANGO_SETTINGS_MODULE": "config.settings",
    }
    server = Server("127.0.0.1", _free_port(), processes, settings.DATA_DIR / f"bench-{name}.log")
    log = server.log_path.open("w")
    web = web_command(sys.executable, host=server.host, port=server.port, processes=processes)
    children = [subprocess.Popen(web, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)]
    server = replace(server, master_pid=children[0].pid)
    if worker:
        command = worker_command(sys.executable, processes=1, name=f"{queue}@%h")
        children.append(subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT))
    server = replace(server, pids=tuple(child.pid for child in children))
    try:
        _wait_until_up(server, children)
        settle(server, "answering")
        yield server
    finally:
        for child in children:
            child.terminate()
        for child in children:
            try:
                child.wait(timeout=20)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        log.close()
        _purge(queue)


def _wait_until_up(server: Server, children: list[subprocess.Popen[bytes]]) -> None:
    deadline = time.monotonic() + START_DEADLINE
    while True:
        for child in children:
            if child.poll() is not None:
                raise RuntimeError(f"A server process exited during start-up; see {server.log_path}.")
        try:
            # 401 without touching the database; every web process must be serving, so ask a few times.
            client = Client(server, key="")
            for _ in range(4 * server.web_processes):
                client.request("GET", "/api/v1/me", expect=401)
            client.close()
            return
        except (OSError, http.client.HTTPException) as exc:
            if time.monotonic() > deadline:
                message = f"The server did not answer within {START_DEADLINE:.0f}s; see {server.log_path}."
                raise RuntimeError(message) from exc
            time.sleep(0.2)


SETTLED_CPU = 0.05  # of a core: the server's processes are taken to be idle below this
SETTLE_DEADLINE = 60.0


def settle(server: Server, after: str) -> None:
    """Wait until the server's processes are idle and the database does no work of its own.

    A web process answers as soon as it starts, while a thread of its own still loads the embedding
    models and the language identifier (memory.vectors.preload), and the worker starts up; after a
    load, the worker still embeds what the last requests wrote; after a bulk write (another
    benchmark's, on the same database), autovacuum works through it. Requests timed meanwhile would
    share the machine with that work, and the web processes' CPU per call would count it."""
    deadline = time.monotonic() + SETTLE_DEADLINE
    started = time.monotonic()

    def used() -> float:
        return sum(_cpu_seconds(pid) for root in server.pids for pid in _descendants(root))

    before = used()
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = used()
        if now - before < SETTLED_CPU * 0.5 and not _database_at_work():
            print(f"(the server's processes and the database settled {time.monotonic() - started:.1f} s after {after})")
            return
        before = now
    print(
        f"(the server's processes or the database were still busy {SETTLE_DEADLINE:.0f} s after {after}; measuring anyway)"
    )


def _database_at_work() -> int:
    """Backends of the benchmark's Postgres at work, autovacuum's included, other than this one."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND state = 'active' "
            "AND backend_type IN ('client backend', 'autovacuum worker')"
        )
        (busy,) = cursor.fetchone()
    return int(busy)


def _purge(queue: str) -> None:
    """Drop what the worker had not run yet (the queue is this run's own: a Redis list of its name)."""
    from config.redis import redis_client

    redis_client().delete(queue)


class Client:
    """One keep-alive connection with one API key, as an agent's HTTP client holds it."""

    def __init__(self, server: Server, *, key: str) -> None:
        self.server = server
        self.headers = {"Content-Type": "application/json"}
        if key:
            self.headers["Authorization"] = f"Bearer {key}"
        self.conn = http.client.HTTPConnection(server.host, server.port, timeout=60)

    def request(self, method: str, path: str, body: dict[str, Any] | None = None, *, expect: int = 200) -> Any:
        """Send one request; return the decoded JSON body. Raise RuntimeError on any other status."""
        payload = json.dumps(body).encode() if body is not None else None
        try:
            self.conn.request(method, path, body=payload, headers=self.headers)
            response = self.conn.getresponse()
            raw = response.read()
        except (OSError, http.client.HTTPException):
            self.conn.close()  # reconnects on the next request
            raise
        if response.status != expect:
            raise RuntimeError(f"{method} {path}: {response.status} {raw[:200]!r}")
        return json.loads(raw) if raw else None

    def close(self) -> None:
        self.conn.close()
