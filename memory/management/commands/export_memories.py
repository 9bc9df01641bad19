"""Export everything memory holds about one person, as a memory package (for a data-access request)."""

from __future__ import annotations

import json
import os
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounts.models import Person, Team
from memory.packages import export_person


class Command(BaseCommand):
    help = "Export one person's banks, notes and revisions as a memory package (JSON), to stdout or a file."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--team", required=True, help="The team's slug.")
        parser.add_argument("--person", required=True, help="The person's id (as the agent platform names them).")
        parser.add_argument("--output", help="Write the package to this file instead of standard output.")

    def handle(self, *args: object, team: str, person: str, output: str | None, **options: Any) -> None:
        target = Team.objects.filter(slug=team).first()
        if target is None:
            raise CommandError(f"No team with slug {team!r}.")
        found = Person.objects.for_team(target).filter(external_id=person).first()
        if found is None:
            raise CommandError(f"No person {person!r} in team {team}.")
        text = json.dumps(export_person(team=target, person=found), ensure_ascii=False, indent=2)
        if output is None:
            self.stdout.write(text)
            return
        try:
            # Personal data: readable by the owner only.
            descriptor = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
                handle.write(text + "\n")
        except OSError as exc:
            raise CommandError(f"Cannot write {output}: {exc}") from exc
        self.stderr.write(f"Exported {person} of team {team} to {output}.")
