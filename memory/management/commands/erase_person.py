"""Erase everything held about one person in a team (a data-subject erasure request)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounts.models import Person, Team
from memory.models import Revision
from memory.services import Actor, erase_person


class Command(BaseCommand):
    help = (
        "Erase everything held about one person in a team: their notes, what shared banks say of them, the "
        "content of their revisions, their mutes and their conversations. The revision log keeps its events. "
        "The person row stays as a tombstone unless --hard. Export first (export_memories) if they asked for a copy."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--team", required=True, help="The team's slug.")
        parser.add_argument("--person", required=True, help="The person's id (as the agent platform names them).")
        parser.add_argument("--hard", action="store_true", help="Delete the person row too, not only their data.")
        parser.add_argument("--yes", action="store_true", help="Do not ask for confirmation.")

    def handle(self, *args: object, team: str, person: str, hard: bool, yes: bool, **options: Any) -> None:
        target = Team.objects.filter(slug=team).first()
        if target is None:
            raise CommandError(f"No team with slug {team!r}.")
        found = Person.objects.for_team(target).filter(external_id=person).first()
        if found is None:
            raise CommandError(f"No person {person!r} in team {team}.")
        if not yes:
            answer = input(f"Erase everything held about {person!r} in team {team}? This cannot be undone. "
                           f"Type the person's id to confirm: ")  # fmt: skip
            if answer.strip() != person:
                raise CommandError("Not confirmed; nothing was erased.")
        report = erase_person(team=target, person=found, actor=Actor(Revision.Actor.ADMIN, "erase_person"), hard=hard)
        self.stdout.write(f"{person} of team {team}: {report.summary()}")
