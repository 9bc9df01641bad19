"""Import conversation history (JSON lines) for one agent of a team, through the conversations service."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from accounts.models import Agent, Team
from config.exceptions import DomainError
from conversations.history_import import import_conversations, parse_jsonl


class Command(BaseCommand):
    help = (
        "Import conversations with their messages from a JSON-lines file (one conversation a line) for one agent. "
        "Every line is checked first; a bad line is refused with its number and nothing is written. "
        "Importing again adds only messages not yet present (matched by external_id)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="The JSON-lines file, or - for standard input.")
        parser.add_argument("--team", required=True, help="The slug of the team to import into.")
        parser.add_argument("--agent", required=True, help="The slug of the agent the conversations were with.")

    def handle(self, *args: object, file: str, team: str, agent: str, **options: Any) -> None:
        target = Team.objects.filter(slug=team).first()
        if target is None:
            raise CommandError(f"No team with slug {team!r}.")
        speaker = Agent.objects.filter(team=target, slug=agent).first()
        if speaker is None:
            raise CommandError(f"No agent {agent!r} in team {team!r}.")
        try:
            text = sys.stdin.read() if file == "-" else Path(file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise CommandError(f"Cannot read {file}: {exc}") from exc
        try:
            items = parse_jsonl(text)
            total = sum(
                len(i.get("messages") or [])
                for i in items
                if isinstance(i, dict) and isinstance(i.get("messages"), list)
            )
            quiet = options.get("verbosity", 1) == 0
            with tqdm(total=total, desc="importing", unit="message", file=sys.stderr, disable=quiet) as bar:
                report = import_conversations(team=target, agent=speaker, items=items, progress=bar.update)
        except DomainError as exc:
            raise CommandError(f"{file}: {exc.message}") from exc
        self.stdout.write(report.summary())
        self.stdout.write(
            f"Import {report.id}: the messages are embedded in the background; "
            f"GET /api/v1/conversations/imports/{report.id} shows how far."
        )
