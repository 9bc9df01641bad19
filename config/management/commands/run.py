"""`make run`: migrate, ensure the demo tenant, then run web + Celery worker + beat until Ctrl-C."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from types import FrameType

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

from config import embedded

STARTUP_TIMEOUT = 90


class Command(BaseCommand):
    help = "Run Mnemo: migrate, create the demo tenant, start the web server, a Celery worker and beat."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=settings.PORT)
        parser.add_argument("--concurrency", type=int, default=2, help="Celery worker processes.")

    def handle(self, *args: object, host: str, port: int, concurrency: int, **options: object) -> None:
        self.stdout.write(f"Data dir: {settings.DATA_DIR}")
        call_command("migrate", interactive=False, verbosity=0)
        call_command("collectstatic", interactive=False, verbosity=0)
        self.stdout.write("Demo tenant:")
        call_command("bootstrap_demo")

        python = sys.executable
        beat_schedule = settings.DATA_DIR / "celerybeat-schedule"
        commands = {
            "web": [python, "-m", "uvicorn", "config.asgi:application", "--host", host, "--port", str(port),
                    "--no-access-log", "--timeout-graceful-shutdown", "5"],
            "worker": [python, "-m", "celery", "-A", "config", "worker", "-l", "INFO",
                       "--concurrency", str(concurrency), "--without-gossip", "--without-mingle",
                       "--without-heartbeat", "-n", f"mnemo-{port}@%h"],
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
                self.stdout.write(self.style.SUCCESS(f"Mnemo is up at {url}"))
                self.stdout.write(self._where(url))
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

    def _where(self, url: str) -> str:
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
            f"  Memory lens  {url}lens/   sign in with the login above: what agents remember about you",
            f"  Demo         {url}demo/{demo}   a coach that keeps eight facts about whoever talks to it",
            f"  API          {url}api/docs/   with the API key above; health at {url}healthz",
            f"  Admin        {url}admin/   needs a superuser: {sys.executable} manage.py createsuperuser",
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
