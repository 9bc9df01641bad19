"""With DATABASE_URL and REDIS_URL set, nothing embedded starts."""

import os
import re
import subprocess
import sys

from django.db import connection

from tests.support.fixtures import ROOT


def test_given_urls_mean_nothing_embedded_starts(tmp_path, db):
    from django.conf import settings

    settings_dict = connection.settings_dict
    database_url = (
        f"postgresql://postgres:@/{settings_dict['NAME']}?host={settings_dict['HOST']}&port={settings_dict['PORT']}"
    )
    redis_url = settings.REDIS_URL
    data_dir = tmp_path / "data"
    script = (
        "import django, os; os.environ['DJANGO_SETTINGS_MODULE'] = 'config.settings'; django.setup();"
        "from config import embedded; from django.db import connection;"
        "connection.ensure_connection(); print('started:', sorted(embedded.started_here))"
    )
    env = {**os.environ, "DATABASE_URL": database_url, "REDIS_URL": redis_url, "MNEMO_DATA_DIR": str(data_dir)}
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert "started: []" in result.stdout
    assert not (data_dir / "pgdata").exists()
    assert not (data_dir / "redis").exists()


def _services(action: str, data_dir: object) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key not in ("DATABASE_URL", "REDIS_URL")}
    env["MNEMO_DATA_DIR"] = str(data_dir)
    return subprocess.run(
        [sys.executable, "manage.py", "services", action], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )


def test_services_status_and_stop_start_nothing(tmp_path):
    data_dir = tmp_path / "data"
    status = _services("status", data_dir)
    assert status.returncode == 0, status.stderr
    assert "postgres: stopped" in status.stdout
    assert "redis:    stopped" in status.stdout
    stop = _services("stop", data_dir)
    assert stop.returncode == 0, stop.stderr
    assert "redis: was not running; postgres: was not running" in stop.stdout
    assert not (data_dir / "pgdata").exists()
    assert not (data_dir / "redis").exists()


def test_services_status_reports_the_running_servers(db):
    from django.conf import settings

    status = _services("status", settings.DATA_DIR)
    assert status.returncode == 0, status.stderr
    # The versions Mnemo needs are shown: Postgres 18 (the embedded one), pgvector 0.8 or later.
    assert re.search(r"postgres: running: Postgres 18\.\d+, pgvector 0\.(8|9|\d\d)\.\d+", status.stdout), status.stdout
    assert "redis:    running" in status.stdout
