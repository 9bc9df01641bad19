from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounts.services import create_team
from config.exceptions import DomainError


class Command(BaseCommand):
    help = "Create a team (a tenant)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug")
        parser.add_argument("--name", default="")

    def handle(self, *args: object, slug: str, name: str, **options: object) -> None:
        try:
            team = create_team(slug=slug, name=name)
        except DomainError as exc:
            raise CommandError(exc.message) from exc
        self.stdout.write(f"Created team {team.slug}.")
