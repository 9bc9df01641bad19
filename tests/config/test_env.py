import pytest
from django.core.exceptions import ImproperlyConfigured

from config.env import env_bool, env_choice, env_float, env_int, env_list, env_secret, env_url


@pytest.mark.parametrize(("raw", "expected"), [("1", True), ("TRUE", True), ("on", True), ("0", False), ("no", False)])
def test_env_bool_reads_the_usual_spellings(monkeypatch, raw, expected):
    monkeypatch.setenv("X_FLAG", raw)
    assert env_bool("X_FLAG", default=not expected) is expected


def test_env_bool_uses_the_default_when_unset(monkeypatch):
    monkeypatch.delenv("X_FLAG", raising=False)
    assert env_bool("X_FLAG", default=True) is True


def test_env_bool_rejects_a_malformed_value(monkeypatch):
    monkeypatch.setenv("X_FLAG", "sometimes")
    with pytest.raises(ImproperlyConfigured, match="X_FLAG='sometimes' is not a boolean"):
        env_bool("X_FLAG", default=False)


def test_env_int_rejects_a_non_integer(monkeypatch):
    monkeypatch.setenv("X_NUM", "12k")
    with pytest.raises(ImproperlyConfigured, match="X_NUM='12k' is not an integer"):
        env_int("X_NUM", default=1)


def test_env_int_enforces_its_bounds(monkeypatch):
    monkeypatch.setenv("X_NUM", "0")
    with pytest.raises(ImproperlyConfigured, match="below its minimum of 1"):
        env_int("X_NUM", default=5, minimum=1)
    monkeypatch.setenv("X_NUM", "70000")
    with pytest.raises(ImproperlyConfigured, match="above its maximum of 65535"):
        env_int("X_NUM", default=5, maximum=65535)
    monkeypatch.setenv("X_NUM", " 42 ")
    assert env_int("X_NUM", default=5, minimum=1, maximum=65535) == 42


def test_env_float_rejects_nan_and_garbage(monkeypatch):
    monkeypatch.setenv("X_RATIO", "nan")
    with pytest.raises(ImproperlyConfigured, match="is not a number"):
        env_float("X_RATIO", default=0.5, minimum=0, maximum=1)
    monkeypatch.setenv("X_RATIO", "half")
    with pytest.raises(ImproperlyConfigured, match="is not a number"):
        env_float("X_RATIO", default=0.5)


def test_env_list_rejects_empty_items(monkeypatch):
    monkeypatch.setenv("X_HOSTS", "a.example,,b.example")
    with pytest.raises(ImproperlyConfigured, match="has an empty item"):
        env_list("X_HOSTS", default=[])
    monkeypatch.setenv("X_HOSTS", "a.example, b.example")
    assert env_list("X_HOSTS", default=[]) == ["a.example", "b.example"]


def test_env_choice_names_the_allowed_values(monkeypatch):
    monkeypatch.setenv("X_MODE", "fast")
    with pytest.raises(ImproperlyConfigured, match="not one of local, openai"):
        env_choice("X_MODE", choices=("local", "openai"), default="local")


def test_env_url_requires_a_known_scheme(monkeypatch):
    monkeypatch.setenv("X_DB", "mysql://db/x")
    with pytest.raises(ImproperlyConfigured, match="must be a URL starting with one of postgres://"):
        env_url("X_DB", schemes=("postgres", "postgresql"))
    monkeypatch.setenv("X_DB", "postgres://db/x")
    assert env_url("X_DB", schemes=("postgres",)) == "postgres://db/x"


def test_env_secret_reads_a_file_and_refuses_both_sources(monkeypatch, tmp_path):
    secret_file = tmp_path / "secret"
    secret_file.write_text("s3cret\n")
    monkeypatch.delenv("X_SECRET", raising=False)
    monkeypatch.setenv("X_SECRET_FILE", str(secret_file))
    assert env_secret("X_SECRET") == "s3cret"
    monkeypatch.setenv("X_SECRET", "inline")
    with pytest.raises(ImproperlyConfigured, match="not both"):
        env_secret("X_SECRET")
    monkeypatch.delenv("X_SECRET")
    monkeypatch.setenv("X_SECRET_FILE", str(tmp_path / "missing"))
    with pytest.raises(ImproperlyConfigured, match="cannot be read"):
        env_secret("X_SECRET")


def test_settings_refuse_a_malformed_knob_at_startup(tmp_path):
    """A typo in the environment stops the process with a message naming the variable."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "DIGEST_LIMIT": "forty"}
    result = subprocess.run(
        [sys.executable, "-c", "import django, os; os.environ['DJANGO_SETTINGS_MODULE']='config.settings'; django.setup()"],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode != 0
    assert "DIGEST_LIMIT='forty' is not an integer" in result.stderr
