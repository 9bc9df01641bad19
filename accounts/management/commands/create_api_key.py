from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounts.models import Agent
from accounts.services import issue_api_key


class Command(BaseCommand):
    help = "Issue an API key for an agent. The key is printed once; only its hash is stored."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--team", required=True, help="The team's slug.")
        parser.add_argument("--agent", required=True, help="The agent's slug.")
        parser.add_argument("--name", default="", help="A label for telling keys apart.")
        parser.add_argument("--admin", action="store_true", help="Allow changing the team's memory settings.")

    def handle(self, *args: object, team: str, agent: str, name: str, admin: bool, **options: object) -> None:
        agent_row = Agent.objects.select_related("team").filter(team__slug=team, slug=agent).first()
        if agent_row is None:
            raise CommandError(f"No agent {agent!r} in team {team!r}; create it with `manage.py create_agent`.")
        issued = issue_api_key(agent=agent_row, name=name, can_admin=admin)
        self.stderr.write("Copy this key now: it is not stored and will not be shown again.")
        self.stdout.write(issued.plaintext)
