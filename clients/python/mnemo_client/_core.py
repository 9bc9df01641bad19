"""What the sync and async clients share: configuration, request building, the retry rule."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any
from urllib.parse import quote

import httpx

from mnemo_client.errors import MnemoError

DEFAULT_URL = "http://127.0.0.1:8000"
DEFAULT_TIMEOUT = 30.0
DEFAULT_PAGE_SIZE = 100  # the server's largest page is API_MAX_PAGE_SIZE (200 by default)
USER_AGENT = "mnemo-client/0.1.0"

# The ten agent tools, in the order GET /api/v1/tools lists them.
TOOL_NAMES = (
    "remember",
    "recall_memories",
    "forget_memory",
    "remember_about_user",
    "remember_about_project",
    "edit_note",
    "search",
    "recall",
    "recent_messages",
    "search_conversation",
)


@dataclass(frozen=True)
class RetryPolicy:
    """When a 429 or 503 is retried: at most `max_retries` times, sleeping at most `max_wait` seconds in all.

    The wait is the answer's Retry-After when it gives one, else a short exponential backoff. A
    wait that would take the total past `max_wait` is not slept at all: the error is raised at
    once, carrying `retry_after`, so the caller can decide (queue the work, tell the person).
    """

    max_retries: int = 3
    max_wait: float = 60.0
    backoff: float = 0.5  # first wait when the answer names none; doubles each retry, at most 8 s

    def delay(self, error: MnemoError, *, retries_done: int, waited: float) -> float | None:
        """Seconds to sleep before the next try, or None to raise `error` now."""
        if error.status not in (429, 503) or retries_done >= self.max_retries:
            return None
        if error.code == "memory_unavailable":
            # Mnemo recorded the person's message before composing failed: sending the turn
            # again would record the message twice. The caller decides.
            return None
        wait = error.retry_after if error.retry_after is not None else min(8.0, self.backoff * 2**retries_done)
        if waited + wait > self.max_wait:
            return None
        return wait


@dataclass(frozen=True)
class Call:
    """One API request: method, path under the base URL, query parameters and JSON body."""

    method: str
    path: str
    params: Mapping[str, Any] | None = None
    body: Any = None


def settings(base_url: str | None, api_key: str | None) -> tuple[str, str]:
    """The base URL and key, from the arguments or MNEMO_URL / MNEMO_KEY."""
    url = (base_url or os.environ.get("MNEMO_URL") or DEFAULT_URL).rstrip("/")
    key = api_key or os.environ.get("MNEMO_KEY") or ""
    if not key:
        raise ValueError("Pass api_key= or set MNEMO_KEY to an agent's API key (manage.py create_api_key prints one).")
    return url, key


def headers(api_key: str, extra: Mapping[str, str] | None) -> dict[str, str]:
    return {
        "Authorization": f"Bearer {api_key}",
        "User-Agent": USER_AGENT,
        "Accept": "application/json",
        **(extra or {}),
    }


def segment(value: str | int) -> str:
    """A path segment: bank ids and person ids may hold ':' or '/', so everything is escaped."""
    return quote(str(value), safe="")


def jsonable(value: Any) -> Any:
    """A value as JSON: datetimes become ISO 8601 text."""
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return value


def query(**params: Any) -> dict[str, Any]:
    """Parameters or a body without the ones left at None (None means "not given")."""
    return {name: jsonable(value) for name, value in params.items() if value is not None}


def tool_call(name: str, args: Mapping[str, Any]) -> Call:
    return Call("POST", f"/api/v1/tools/{segment(name)}", body=query(**args))


def decode(response: httpx.Response) -> Any:
    if response.status_code == 204 or not response.content:
        return None
    return response.json()
