from pathlib import Path

import psycopg
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from config import database, embedded, postgres_upgrade


class Command(BaseCommand):
    help = (
        "Show or stop the embedded Postgres and Redis (used when DATABASE_URL / REDIS_URL are unset), or upgrade "
        "an earlier Mnemo's embedded Postgres 16 data to Postgres 18 (dump and restore, the old cluster kept)."
    )
    # The system checks would connect to the database, which is not started for this command.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("action", choices=["status", "stop", "upgrade"])

    def handle(self, *args: object, action: str, **options: object) -> None:
        data_dir = settings.DATA_DIR
        sock = embedded.redis_socket_path(data_dir)
        if action == "upgrade":
            if settings.DATABASE_URL:
                raise CommandError(
                    "DATABASE_URL is set: the embedded Postgres is not used, so there is nothing to upgrade."
                )
            try:
                postgres_upgrade.upgrade(data_dir, say=self.stdout.write)
            except postgres_upgrade.UpgradeError as error:
                raise CommandError(str(error)) from error
            return
        if action == "status":
            if settings.DATABASE_URL:
                pg = f"external (DATABASE_URL): {self._server(settings.DATABASE_URL)}"
            else:
                pg = self._postgres_status(data_dir)
            rd = (
                "external (REDIS_URL)"
                if not settings.REDIS_URL.startswith(f"redis+socket://{sock}")
                else ("running" if embedded.redis_ping(sock) else "stopped")
            )
            self.stdout.write(f"postgres: {pg}\nredis:    {rd}\ndata dir: {data_dir}")
            return
        stopped_redis = embedded.stop_redis(sock)
        stopped_pg = embedded.stop_postgres(data_dir)
        self.stdout.write(
            f"redis: {'stopped' if stopped_redis else 'was not running'}; "
            f"postgres: {'stopped' if stopped_pg else 'was not running'}"
        )

    @staticmethod
    def _postgres_status(data_dir: Path) -> str:
        state = "running" if embedded.postgres_running(data_dir) else "stopped"
        found = embedded.cluster_major((data_dir / "pgdata").resolve())
        if found is not None and found != embedded.postgres_major():
            return (
                f"{state} (a Postgres {found} cluster: `manage.py services upgrade` moves it to this Mnemo's Postgres)"
            )
        if state == "running":
            # postmaster.pid's fourth and fifth lines: the port and the socket directory.
            lines = ((data_dir / "pgdata").resolve() / "postmaster.pid").read_text().splitlines()
            return f"{state}: " + Command._server(f"postgresql://postgres@/postgres?host={lines[4]}&port={lines[3]}")
        return state

    @staticmethod
    def _server(url: str) -> str:
        """What the server at url is ("Postgres 18.6, pgvector 0.8.1"), or why it could not be asked."""
        try:
            with psycopg.connect(url, connect_timeout=5) as conn, conn.cursor() as cursor:
                return database.describe(database.read_server(cursor))
        except psycopg.Error as error:
            return f"not reachable ({str(error).strip().splitlines()[0]})"
