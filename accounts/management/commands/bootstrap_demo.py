from django.core.management.base import BaseCommand

from accounts.demo import ensure_demo


class Command(BaseCommand):
    help = "Create (idempotently) the demo team, coach agent, owner login and agent API key, and print them."

    def handle(self, *args: object, **options: object) -> None:
        demo = ensure_demo()
        self.stdout.write(
            "\n".join(
                [
                    f"  team      {demo.team.slug}",
                    f"  agent     {demo.agent.slug}",
                    f"  login     {demo.username} / {demo.password}   (the Memory lens at /lens/: what the coach"
                    f" remembers about '{demo.username}'; as team admin, about everyone in team {demo.team.slug})",
                    f"  API key   {demo.api_key}",
                ]
            )
        )
