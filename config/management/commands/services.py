from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from config import embedded


class Command(BaseCommand):
    help = (
        "Show or stop the embedded Postgres and Redis (used when DATABASE_URL / REDIS_URL are unset); starts nothing."
    )
    # The system checks would connect to the database, which is not started for this command.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("action", choices=["status", "stop"])

    def handle(self, *args: object, action: str, **options: object) -> None:
        data_dir = settings.DATA_DIR
        sock = embedded.redis_socket_path(data_dir)
        if action == "status":
            pg = (
                "external (DATABASE_URL)"
                if settings.DATABASE_URL
                else ("running" if embedded.postgres_running(data_dir) else "stopped")
            )
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
