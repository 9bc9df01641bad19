"""The Postgres Mnemo needs: 17 or later, with pgvector 0.8 or later. Checked once per process.

pgvector 0.8 has the iterative index scans (`hnsw.iterative_scan`): a vector search filtered to
one team's or person's rows keeps reading the index until it has found enough of them, so the
database's own index can answer it. Mnemo is tested on the Postgres 18 it embeds; 17 is the
oldest it supports. An older server or extension would still run, finding less or slower,
without saying so; the process stops at its first connection instead, saying what to do.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.db.backends.base.base import BaseDatabaseWrapper

MIN_SERVER_VERSION = 170000  # server_version_num of Postgres 17.0
MIN_VECTOR = (0, 8)


@dataclass(frozen=True)
class Server:
    version_num: int  # server_version_num: 180006 for 18.6
    vector_installed: str | None  # the vector extension's version in this database, None if not created yet
    vector_available: str | None  # the version CREATE EXTENSION vector would create, None if pgvector is missing


READ = """
SELECT current_setting('server_version_num')::int,
       (SELECT installed_version FROM pg_available_extensions WHERE name = 'vector'),
       (SELECT default_version FROM pg_available_extensions WHERE name = 'vector')
"""


def read_server(cursor: Any) -> Server:
    """What the server behind a DB-API cursor is: a psycopg cursor, or Django's."""
    cursor.execute(READ)
    version_num, installed, available = cursor.fetchone()
    return Server(version_num=version_num, vector_installed=installed, vector_available=available)


def describe(server: Server) -> str:
    """The server as `services status` prints it: "Postgres 18.6, pgvector 0.8.1"."""
    major, minor = divmod(server.version_num, 10000)
    if server.vector_installed:
        vector = f"pgvector {server.vector_installed}"
    elif server.vector_available:
        vector = f"pgvector {server.vector_available} available, not yet created (migrate creates it)"
    else:
        vector = "no pgvector"
    return f"Postgres {major}.{minor}, {vector}"


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".") if part.isdigit())


def unsupported(server: Server) -> str | None:
    """Why Mnemo cannot use this server (None: it can)."""
    if server.version_num < MIN_SERVER_VERSION:
        major, minor = divmod(server.version_num, 10000)
        return (
            f"The database server is Postgres {major}.{minor}; Mnemo needs Postgres 17 or later "
            f"(with pgvector 0.8 or later). Upgrade the server (pg_upgrade, or dump and restore); "
            f"for the embedded Postgres of an earlier Mnemo, `manage.py services upgrade` does it."
        )
    if server.vector_installed is not None:
        if _version(server.vector_installed) < MIN_VECTOR:
            return (
                f"The vector extension in this database is pgvector {server.vector_installed}; Mnemo needs 0.8 or "
                f"later. "
                + (
                    f"The server has {server.vector_available}: run `ALTER EXTENSION vector UPDATE;` in the database."
                    if server.vector_available and _version(server.vector_available) >= MIN_VECTOR
                    else "Install pgvector 0.8 or later on the server, then run `ALTER EXTENSION vector UPDATE;`."
                )
            )
        return None
    if server.vector_available is None:
        return "The database server has no pgvector: install pgvector 0.8 or later on it (https://github.com/pgvector/pgvector)."
    if _version(server.vector_available) < MIN_VECTOR:
        return f"The database server's pgvector is {server.vector_available}; Mnemo needs 0.8 or later: upgrade it on the server."
    return None


_checked = False


def require_supported_server(sender: object, connection: BaseDatabaseWrapper, **kwargs: object) -> None:
    """connection_created: the first connection of the process checks the server (one query, once)."""
    global _checked
    if _checked or connection.vendor != "postgresql":
        return
    # The raw connection's cursor: the check is no query of the caller's (nor of a test's count).
    with connection.connection.cursor() as cursor:
        problem = unsupported(read_server(cursor))
    if problem is not None:
        # Closed, so the next use connects (and is refused) again rather than using this connection.
        connection.close()
        raise ImproperlyConfigured(problem)
    _checked = True
