"""`make run`: migrate, ensure the demo tenant, then run web + Celery worker + beat until Ctrl-C."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import cast

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection, connections
from django.db.backends.postgresql.base import DatabaseWrapper as PostgresWrapper

from config import embedded, metrics

STARTUP_TIMEOUT = 90
# gunicorn's server hooks: a file, so gunicorn's master loads it without importing the config package.
GUNICORN_HOOKS = Path(__file__).resolve().parents[2] / "gunicorn_hooks.py"


def web_command(python: str, *, host: str, port: int, processes: int) -> list[str]:
    """gunicorn with uvicorn's worker class: `processes` event loops, each with its own connection pool.

    Not `uvicorn --workers`: its shared listening socket lacks TCP_NODELAY, which stalls every
    keep-alive response by the delayed-ACK timer (about 40 ms); gunicorn's socket has it.
    """
    bind = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    return [python, "-m", "gunicorn", "config.asgi:application", "--worker-class", "uvicorn_worker.UvicornWorker",
            "--workers", str(processes), "--bind", bind, "--graceful-timeout", "5", "--timeout", "120", "--no-control-socket",
            "--config", str(GUNICORN_HOOKS)]  # fmt: skip


def worker_command(python: str, *, processes: int, name: str) -> list[str]:
    """A Celery worker of `processes` prefork processes on the default queue (CELERY_QUEUE)."""
    return [python, "-m", "celery", "-A", "config", "worker", "-l", "INFO", "--concurrency", str(processes),
            "--without-gossip", "--without-mingle", "--without-heartbeat", "-n", name]  # fmt: skip


def connection_budget(*, web: int, workers: int) -> int:
    """The most database connections `manage.py run` may hold at once.

    A web process holds up to DB_POOL_MAX_SIZE (requests run concurrently, each on a connection
    of its own); a Celery worker process runs one task at a time on one connection (Celery closes
    the pool around each task); the worker's parent process and beat may hold one each. Without
    the pool (DB_POOL=0) a web process opens one per request in flight, counted the same way.
    """
    return web * settings.DB_POOL_MAX_SIZE + workers + 2


class Command(BaseCommand):
    help = "Run Mnemo: migrate, create the demo tenant, start the web server, a Celery worker and beat."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=settings.PORT)
        parser.add_argument("--concurrency", type=int, default=2, help="Celery worker processes.")
        parser.add_argument(
            "--web-concurrency", type=int, default=settings.WEB_CONCURRENCY,
            help="Web processes (default WEB_CONCURRENCY, itself the number of cores).",
        )  # fmt: skip

    def handle(
        self, *args: object, host: str, port: int, concurrency: int, web_concurrency: int, **options: object
    ) -> None:
        if web_concurrency < 1 or concurrency < 1:
            raise CommandError("--web-concurrency and --concurrency must be at least 1.")
        self.stdout.write(f"Data dir: {settings.DATA_DIR}")
        call_command("migrate", interactive=False, verbosity=0)
        call_command("collectstatic", interactive=False, verbosity=0)
        # Printed last, in the block that says Mnemo is up, not above the Celery banner.
        demo = io.StringIO()
        call_command("bootstrap_demo", stdout=demo)
        self._check_connection_budget(web=web_concurrency, workers=concurrency)
        # This process serves nothing from here on: give its connections back to Postgres.
        connections.close_all()
        if settings.DB_POOL:
            cast(PostgresWrapper, connection).close_pool()

        # Counts of an earlier run's processes must not be added to this run's (config.metrics).
        if (metrics_dir := metrics.reset_multiprocess_dir()) is not None:
            self.stdout.write(f"Metrics: GET /metrics, every process writing to {metrics_dir}")
        python = sys.executable
        beat_schedule = settings.DATA_DIR / "celerybeat-schedule"
        commands = {
            "web": web_command(python, host=host, port=port, processes=web_concurrency),
            "worker": worker_command(python, processes=concurrency, name=f"mnemo-{port}@%h"),
            "beat": [python, "-m", "celery", "-A", "config", "beat", "-l", "INFO",
                     "--schedule", str(beat_schedule)],
        }  # fmt: skip
        children: dict[str, subprocess.Popen[bytes]] = {}
        stopping = False

        def stop(signum: int, frame: FrameType | None) -> None:
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        try:
            for name, command in commands.items():
                # Each child gets its own process group so our Ctrl-C handling decides the order.
                children[name] = subprocess.Popen(command, start_new_session=True)
            url = f"http://{host}:{port}/"
            self._wait_until_healthy(url, children, lambda: stopping)
            if not stopping:
                self.stdout.write(f"{web_concurrency} web process(es), {concurrency} Celery worker process(es), beat.")
                self.stdout.write(self.style.SUCCESS(f"Mnemo is up at {url}"))
                self.stdout.write(self._where(url, demo.getvalue()))
            while not stopping:
                for name, child in children.items():
                    if child.poll() is not None:
                        raise CommandError(
                            f"The {name} process exited with code {child.returncode}; stopping the rest."
                        )
                time.sleep(0.5)
        finally:
            self._stop(children)
            self._stop_embedded()

    def _where(self, url: str, credentials: str) -> str:
        """The block a newcomer reads last: where everything is, the demo login and key, and how to stop."""
        demo = "" if settings.DEMO_ENABLED else " (off: set DEMO_ENABLED=1)"
        embedded_here = sorted(embedded.started_here)
        stops = "the web server, the worker and beat"
        if embedded_here:
            stops += (
                " and the embedded " + " and ".join(name.capitalize() for name in embedded_here) + " this run started"
            )
        used = set() if settings.DATABASE_URL else {"postgres"}
        if f"redis+socket://{embedded.redis_socket_path(settings.DATA_DIR)}" == settings.REDIS_URL:
            used.add("redis")
        kept = used - set(embedded_here)
        lines = [
            f"  Memory lens  {url}lens/   sign in with the login below: what agents remember about you",
            f"  Demo         {url}demo/{demo}   a coach that keeps eight facts about whoever talks to it",
            f"  API          {url}api/docs/   with the API key below; health at {url}healthz",
            f"  Admin        {url}admin/   needs a superuser: {embedded.manage_command('createsuperuser', settings.DATA_DIR)}",
            "The demo tenant:",
            credentials.rstrip("\n"),
            f"Press Ctrl-C to stop {stops}.",
        ]
        if kept:
            lines.append(
                "The embedded "
                + " and ".join(sorted(name.capitalize() for name in kept))
                + (
                    " were already running and keep running"
                    if len(kept) > 1
                    else " was already running and keeps running"
                )
                + "; `make stop` stops it all."
            )
        return "\n".join(lines)

    def _check_connection_budget(self, *, web: int, workers: int) -> None:
        """Refuse to start processes that could together open more connections than Postgres allows."""
        needed = connection_budget(web=web, workers=workers)
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT current_setting('max_connections')::int - current_setting('superuser_reserved_connections')::int"
            )
            available = cursor.fetchone()[0]
        if needed > available:
            raise CommandError(
                f"{web} web process(es) x DB_POOL_MAX_SIZE={settings.DB_POOL_MAX_SIZE} plus {workers} Celery worker "
                f"process(es) may open {needed} database connections; Postgres allows {available}. "
                "Lower WEB_CONCURRENCY or DB_POOL_MAX_SIZE, or raise max_connections."
            )
        self.stdout.write(f"Database connections: up to {needed} of the {available} Postgres allows.")

    def _wait_until_healthy(
        self, url: str, children: dict[str, subprocess.Popen[bytes]], stopping: Callable[[], bool]
    ) -> None:
        deadline = time.monotonic() + STARTUP_TIMEOUT
        last = ""
        while time.monotonic() < deadline and not stopping():
            for name, child in children.items():
                if child.poll() is not None:
                    raise CommandError(f"The {name} process exited with code {child.returncode} during start-up.")
            try:
                with urllib.request.urlopen(url + "healthz", timeout=5) as response:
                    if response.status == 200:
                        return
            except OSError as exc:
                last = str(exc)
            time.sleep(0.5)
        if not stopping():
            raise CommandError(f"Mnemo did not become healthy within {STARTUP_TIMEOUT}s ({last}); see the log above.")

    def _stop(self, children: dict[str, subprocess.Popen[bytes]]) -> None:
        if not children:
            return
        self.stdout.write("Stopping " + ", ".join(children) + "…")
        for child in children.values():
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 15
        for name, child in children.items():
            try:
                child.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.stderr.write(f"{name} did not stop within 15s; killing it.")
                child.kill()
                child.wait()

    def _stop_embedded(self) -> None:
        # Stop only what this run started: a server found running belongs to someone else.
        if "redis" in embedded.started_here:
            embedded.stop_redis(embedded.redis_socket_path(settings.DATA_DIR))
            self.stdout.write("Stopped the embedded Redis.")
        if "postgres" in embedded.started_here:
            from django.db import connections

            connections.close_all()
            embedded.stop_postgres(settings.DATA_DIR)
            self.stdout.write("Stopped the embedded Postgres.")
