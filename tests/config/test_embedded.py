"""With DATABASE_URL and REDIS_URL set, nothing embedded starts."""

import os
import subprocess
import sys

from django.db import connection

from tests.fixtures import ROOT


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
