"""`manage.py mcp --agent-key KEY`: the agent tools over MCP on stdin/stdout."""

from __future__ import annotations

import asyncio
import os

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection

from accounts.services import authenticate_key
from config.mcp import serve_stdio


class Command(BaseCommand):
    help = (
        "Serve the agent tools over MCP on stdin/stdout, as the agent whose API key is given. "
        "For MCP clients that start a local process; remote clients use /mcp on the web server."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--agent-key",
            default=os.environ.get("MNEMO_KEY", ""),
            help="The agent's API key (default: $MNEMO_KEY); it decides the team and agent of every call.",
        )

    def handle(self, *args: object, agent_key: str, **options: object) -> None:
        agent_key = agent_key.strip()
        if not agent_key:
            raise CommandError("Give the agent's API key with --agent-key KEY (or set MNEMO_KEY).")
        api_key = authenticate_key(agent_key)
        if api_key is None:
            raise CommandError(
                "The agent key is unknown or revoked; issue one with `manage.py create_api_key --team T --agent A`."
            )
        # stdout carries the protocol: anything said to people goes to stderr.
        self.stderr.write(
            f"Serving the Mnemo tools over MCP on stdio as agent {api_key.agent.slug} of team {api_key.team.slug}."
        )
        connection.close()  # calls run in Django's thread for async code, with their own connection
        asyncio.run(serve_stdio(agent_key))
