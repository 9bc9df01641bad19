"""What `make run` tells a newcomer once Mnemo is up, and what a pasted command does with the wrong data dir."""

import os
import subprocess
import sys
from pathlib import Path

from config import embedded
from config.management.commands.run import Command

ROOT = Path(__file__).resolve().parents[2]
CREDENTIALS = "  login     owner / pw\n  API key   mnemo_key\n"


def test_run_names_the_lens_the_demo_the_admin_and_what_ctrl_c_stops(settings, monkeypatch):
    settings.DEMO_ENABLED = True
    monkeypatch.setattr(embedded, "started_here", {"redis"})
    where = Command()._where("http://127.0.0.1:8000/", CREDENTIALS)
    assert "Memory lens  http://127.0.0.1:8000/lens/   sign in with the login below" in where
    assert "Demo         http://127.0.0.1:8000/demo/   " in where
    assert "needs a superuser: .venv/bin/python manage.py createsuperuser" in where
    # The login and the key come after the addresses, just before how to stop: the last thing printed.
    assert where.index("API key   mnemo_key") > where.index("Admin")
    assert where.index("API key   mnemo_key") < where.index("Press Ctrl-C")
    assert "Press Ctrl-C to stop the web server, the worker and beat and the embedded Redis this run started." in where
    assert "The embedded Postgres was already running and keeps running; `make stop` stops it all." in where


def test_run_says_when_the_demo_is_off(settings, monkeypatch):
    settings.DEMO_ENABLED = False
    monkeypatch.setattr(embedded, "started_here", set())
    where = Command()._where("http://127.0.0.1:8000/", CREDENTIALS)
    assert "http://127.0.0.1:8000/demo/ (off: set DEMO_ENABLED=1)" in where
    assert "Press Ctrl-C to stop the web server, the worker and beat." in where


def test_printed_commands_carry_a_data_dir_that_is_not_the_default(settings, monkeypatch, tmp_path):
    settings.DATA_DIR = tmp_path / "my data"
    monkeypatch.setattr(embedded, "started_here", set())
    where = Command()._where("http://127.0.0.1:8000/", CREDENTIALS)
    assert f"MNEMO_DATA_DIR='{tmp_path}/my data' .venv/bin/python manage.py createsuperuser" in where
    assert embedded.manage_command("createsuperuser", embedded.DEFAULT_DATA_DIR) == (
        ".venv/bin/python manage.py createsuperuser"
    )


def test_a_command_given_a_data_dir_without_a_database_says_so_and_starts_nothing(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env["MNEMO_DATA_DIR"] = str(tmp_path)
    result = subprocess.run(
        [sys.executable, "manage.py", "createsuperuser", "--noinput", "--username", "x", "--email", "x@example.com"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 1
    assert f"{tmp_path} holds none, so nothing was started" in result.stderr
    assert "set MNEMO_DATA_DIR" in result.stderr
    assert list(tmp_path.iterdir()) == []  # no Postgres, no Redis, not even a secret key


def test_only_commands_that_make_or_look_after_a_data_dir_may_start_in_an_empty_one(tmp_path):
    empty = {"MNEMO_DATA_DIR": str(tmp_path)}
    assert embedded.refusal_for_an_empty_data_dir(["manage.py", "shell"], empty) is not None
    assert embedded.refusal_for_an_empty_data_dir(["manage.py", "erase_note", "1"], empty) is not None
    for allowed in (["manage.py", "migrate"], ["manage.py", "run"], ["manage.py", "services", "stop"], ["manage.py"]):
        assert embedded.refusal_for_an_empty_data_dir(allowed, empty) is None
    assert embedded.refusal_for_an_empty_data_dir(["manage.py", "shell", "--help"], empty) is None
    # A database elsewhere, or a cluster in the data dir, lets any command run.
    assert (
        embedded.refusal_for_an_empty_data_dir(["manage.py", "shell"], {**empty, "DATABASE_URL": "postgres://x/y"})
        is None
    )
    (tmp_path / "pgdata").mkdir()
    (tmp_path / "pgdata" / "PG_VERSION").write_text("18\n")
    assert embedded.refusal_for_an_empty_data_dir(["manage.py", "shell"], empty) is None
