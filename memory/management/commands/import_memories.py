"""Import a memory package (JSON or JSONL) into a team, through the single write path."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, NoReturn

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from accounts.models import Team
from memory.exceptions import InvalidNote
from memory.models import Revision
from memory.packages import import_package, parse_package_text
from memory.services import Actor


class Command(BaseCommand):
    help = (
        "Import a memory package (JSON, or JSONL with a header line) into a team. Every note goes through "
        "the write path; refused notes are reported and the others still import. Importing twice is harmless."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="The package file, or - for standard input.")
        parser.add_argument("--team", required=True, help="The slug of the team to import into.")

    def handle(self, *args: object, file: str, team: str, **options: Any) -> None:
        target = Team.objects.filter(slug=team).first()
        if target is None:
            raise CommandError(f"No team with slug {team!r}.")
        try:
            text = sys.stdin.read() if file == "-" else Path(file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise CommandError(f"Cannot read {file}: {exc}") from exc
        name = "stdin" if file == "-" else Path(file).name
        actor = Actor(Revision.Actor.IMPORT, f"import_memories:{name}"[:200])
        bars: list[tqdm[NoReturn]] = []  # opened on the first note, once the file has been read as a package

        def progress(done: int, total: int) -> None:
            if not bars:
                quiet = options.get("verbosity", 1) == 0
                bars.append(tqdm(total=total, desc="importing", unit="note", file=sys.stderr, disable=quiet))
            bars[0].update(done - bars[0].n)

        try:
            # An operator's import: its conversations may be any agent's of the team, as an admin-capable key's.
            report = import_package(
                team=target, data=parse_package_text(text), actor=actor, agent=None, progress=progress
            )
        except InvalidNote as exc:
            raise CommandError(f"{file} is not a memory package Mnemo can read: {exc.message}") from exc
        finally:
            for bar in bars:
                bar.close()
        self.stdout.write(report.summary())
        for evicted in report.evicted:
            self.stdout.write(f"evicted {evicted['bank']}:{evicted['key']}: {evicted['reason']}")
        for refusal in report.refusals:
            self.stdout.write(f"refused {refusal.bank}:{refusal.key} ({refusal.code}): {refusal.message}")
