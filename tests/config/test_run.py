"""What `make run` tells a newcomer once Mnemo is up."""

from config import embedded
from config.management.commands.run import Command


def test_run_names_the_lens_the_demo_the_admin_and_what_ctrl_c_stops(settings, monkeypatch):
    settings.DEMO_ENABLED = True
    monkeypatch.setattr(embedded, "started_here", {"redis"})
    where = Command()._where("http://127.0.0.1:8000/")
    assert "Memory lens  http://127.0.0.1:8000/lens/   sign in with the login above" in where
    assert "Demo         http://127.0.0.1:8000/demo/   " in where
    assert "manage.py createsuperuser" in where
    assert "Press Ctrl-C to stop the web server, the worker and beat and the embedded Redis this run started." in where
    assert "The embedded Postgres was already running and keeps running; `make stop` stops it all." in where


def test_run_says_when_the_demo_is_off(settings, monkeypatch):
    settings.DEMO_ENABLED = False
    monkeypatch.setattr(embedded, "started_here", set())
    where = Command()._where("http://127.0.0.1:8000/")
    assert "http://127.0.0.1:8000/demo/ (off: set DEMO_ENABLED=1)" in where
    assert "Press Ctrl-C to stop the web server, the worker and beat." in where
