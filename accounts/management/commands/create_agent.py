from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounts.models import Team
from accounts.services import create_agent
from config.exceptions import DomainError


class Command(BaseCommand):
    help = "Create an agent in a team."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--team", required=True, help="The team's slug.")
        parser.add_argument("--slug", required=True)
        parser.add_argument("--name", default="")
        parser.add_argument("--persona", default="")

    def handle(self, *args: object, team: str, slug: str, name: str, persona: str, **options: object) -> None:
        team_row = Team.objects.filter(slug=team).first()
        if team_row is None:
            raise CommandError(f"No team {team!r}; create it with `manage.py create_team {team}`.")
        try:
            agent = create_agent(team=team_row, slug=slug, name=name, persona=persona)
        except DomainError as exc:
            raise CommandError(exc.message) from exc
        self.stdout.write(f"Created agent {agent}.")
