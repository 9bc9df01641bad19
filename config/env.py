"""Typed readers for settings that come from the environment.

Each helper raises ImproperlyConfigured naming the variable and the value it could not
understand, so a typo in a deployment fails at start-up instead of running with a default.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def _raw(name: str) -> str | None:
    value = os.environ.get(name)
    return None if value is None else value.strip()


def env_str(name: str, default: str = "") -> str:
    value = _raw(name)
    return default if value is None or value == "" else value


def env_bool(name: str, *, default: bool) -> bool:
    value = _raw(name)
    if value is None:
        return default
    lowered = value.lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={value!r} is not a boolean; use one of 1/0, true/false, yes/no, on/off.")


def env_int(name: str, *, default: int, minimum: int | None = None, maximum: int | None = None) -> int:
    value = _raw(name)
    if value is None or value == "":
        return default
    try:
        number = int(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={value!r} is not an integer.") from None
    if minimum is not None and number < minimum:
        raise ImproperlyConfigured(f"{name}={number} is below its minimum of {minimum}.")
    if maximum is not None and number > maximum:
        raise ImproperlyConfigured(f"{name}={number} is above its maximum of {maximum}.")
    return number


def env_float(name: str, *, default: float, minimum: float | None = None, maximum: float | None = None) -> float:
    value = _raw(name)
    if value is None or value == "":
        return default
    try:
        number = float(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={value!r} is not a number.") from None
    if number != number:  # NaN compares unequal to itself and would pass both bounds
        raise ImproperlyConfigured(f"{name}={value!r} is not a number.")
    if minimum is not None and number < minimum:
        raise ImproperlyConfigured(f"{name}={number} is below its minimum of {minimum}.")
    if maximum is not None and number > maximum:
        raise ImproperlyConfigured(f"{name}={number} is above its maximum of {maximum}.")
    return number


_RATE = re.compile(r"(?P<count>[0-9]+)/(?P<span>[0-9]*)(?P<unit>s|sec|second|m|min|minute|h|hour|d|day)s?")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_rate(text: str) -> tuple[int, int]:
    """ "600/min" -> (600, 60); "5/15m" -> (5, 900). Raises ValueError on anything else."""
    match = _RATE.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"{text!r} is not a rate; write it as requests/period, e.g. 600/min, 10/s or 5/15min.")
    count, span = int(match["count"]), int(match["span"] or 1)
    if count < 1 or span < 1:
        raise ValueError(f"{text!r} must allow at least one request in a period of at least one unit.")
    return count, span * _UNIT_SECONDS[match["unit"][0]]


def env_rate(name: str, *, default: str) -> str:
    """A rate such as 600/min (requests per period), checked here so a typo stops start-up."""
    value = env_str(name, default)
    try:
        parse_rate(value)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name}: {exc}") from None
    return value


def env_list(name: str, *, default: list[str]) -> list[str]:
    value = _raw(name)
    if value is None:
        return list(default)
    items = [item.strip() for item in value.split(",")]
    if any(item == "" for item in items):
        raise ImproperlyConfigured(f"{name}={value!r} has an empty item; separate values with single commas.")
    return items


def env_choice(name: str, *, choices: tuple[str, ...], default: str) -> str:
    value = env_str(name, default)
    if value not in choices:
        raise ImproperlyConfigured(f"{name}={value!r} is not one of {', '.join(choices)}.")
    return value


def env_secret(name: str) -> str | None:
    """Read a secret from NAME, or from the file named by NAME_FILE (Docker/systemd secrets)."""
    value = _raw(name)
    file_name = _raw(f"{name}_FILE")
    if value and file_name:
        raise ImproperlyConfigured(f"Set either {name} or {name}_FILE, not both.")
    if file_name:
        try:
            return Path(file_name).read_text().strip()
        except OSError as exc:
            raise ImproperlyConfigured(f"{name}_FILE={file_name!r} cannot be read: {exc.strerror}.") from None
    return value or None


def env_url(name: str, *, schemes: tuple[str, ...]) -> str | None:
    value = _raw(name)
    if not value:
        return None
    scheme = value.split("://", 1)[0] if "://" in value else ""
    if scheme not in schemes:
        raise ImproperlyConfigured(
            f"{name} must be a URL starting with one of {', '.join(s + '://' for s in schemes)}."
        )
    return value


def env_url_list(name: str, *, schemes: tuple[str, ...]) -> list[str]:
    """Comma-separated URLs, each starting with one of `schemes`; a refused one is named by its
    host and path only (its user and password are not repeated in the error)."""
    urls = env_list(name, default=[])
    for url in urls:
        if not url.startswith(tuple(scheme + "://" for scheme in schemes)):
            raise ImproperlyConfigured(
                f"{name}: {url.split('@')[-1]!r} is not a {' or '.join(s + '://' for s in schemes)} URL."
            )
    return urls
