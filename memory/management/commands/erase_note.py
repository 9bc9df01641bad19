"""Erase one note, as the lens, the API and the admin do (a person asked for one fact to go)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounts.models import Team
from memory.exceptions import NoteNotFound
from memory.models import Note, Revision
from memory.services import Actor, erase_note


class Command(BaseCommand):
    help = (
        "Erase one note: the note and its vector, its content in every revision of its bank and key, the "
        "messages it was learned from (kept as tombstones) and the conversation summaries they fed (cleared, "
        "then rebuilt from what is left). The revision log keeps its events. Note ids are global: --team "
        "names the team the note must belong to, so a mistyped id cannot erase another team's note."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("note", type=int, help="The note's id (as the API and the lens name it).")
        parser.add_argument("--team", required=True, help="The slug of the team the note belongs to.")
        parser.add_argument("--yes", action="store_true", help="Do not ask for confirmation.")

    def handle(self, *args: object, note: int, team: str, yes: bool, **options: Any) -> None:
        target = Team.objects.filter(slug=team).first()
        if target is None:
            raise CommandError(f"No team with slug {team!r}.")
        found = Note.objects.for_team(target).select_related("bank").filter(pk=note).first()
        if found is None:
            raise CommandError(f"No note {note} in team {team}.")
        # The key is not shown: it may be built from what the note says, and terminals keep scrollback.
        where = f"note {note} of bank {found.bank.address} in team {team}"
        if not yes:
            answer = input(f"Erase {where}, with the messages it was learned from? This cannot be undone. "
                           f"Type the note's id to confirm: ")  # fmt: skip
            if answer.strip() != str(note):
                raise CommandError("Not confirmed; nothing was erased.")
        try:
            erased = erase_note(note=found, actor=Actor(Revision.Actor.ADMIN, "erase_note"))
        except NoteNotFound as exc:
            raise CommandError(f"Note {note} was deleted meanwhile; nothing was erased.") from exc
        self.stdout.write(f"Erased {where}: {erased.summary()}")
