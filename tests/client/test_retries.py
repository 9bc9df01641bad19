"""429 and 503 are retried as Retry-After says, within a budget; past it the error is raised at once.

The retry rule is driven by a tiny local HTTP server that answers as scripted (a real 429 from
Mnemo asks to wait out a whole window); the last test shows the real server's 429 as RateLimited.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import pytest
from mnemo_client import AsyncMnemo, Mnemo, RateLimited, RetryPolicy, Unavailable

from tests.support.fixtures import run_async, serve_asgi
from tests.support.http_stub import JsonHandler, serve

OK: tuple[int, dict[str, str], dict] = (
    200, {}, {"team": "t", "agent": "a", "agent_name": "A", "key_prefix": "p", "can_admin": False},
)  # fmt: skip


def throttled(retry_after: str | None) -> tuple[int, dict[str, str], dict]:
    headers = {"Retry-After": retry_after} if retry_after is not None else {}
    return 429, headers, {"error": {"code": "throttled", "message": "This API key is over its limit."}}


@dataclass
class Script:
    answers: list[tuple[int, dict[str, str], dict]]
    seen_at: list[float] = field(default_factory=list)


@contextmanager
def scripted_server(script: Script) -> Iterator[str]:
    class Handler(JsonHandler):
        def do_GET(self) -> None:
            script.seen_at.append(time.monotonic())
            status, headers, body = script.answers.pop(0) if script.answers else (500, {}, {"error": {}})
            self.send_json(status, body, headers)

    with serve(Handler) as url:
        yield url


def test_a_429_is_retried_after_the_seconds_retry_after_names():
    script = Script([throttled("1"), OK])
    with scripted_server(script) as url, Mnemo(url, api_key="k") as mnemo:
        assert mnemo.me()["team"] == "t"
    first, second = script.seen_at
    assert second - first >= 1.0


def test_a_wait_past_the_budget_is_not_slept_the_error_says_when():
    script = Script([throttled("30"), OK])
    with scripted_server(script) as url, Mnemo(url, api_key="k", retry=RetryPolicy(max_wait=5)) as mnemo:
        started = time.monotonic()
        with pytest.raises(RateLimited) as limited:
            mnemo.me()
    assert time.monotonic() - started < 2
    assert len(script.seen_at) == 1
    assert (limited.value.status, limited.value.code, limited.value.retry_after) == (429, "throttled", 30.0)


def test_retries_stop_after_max_retries_and_after_the_total_wait():
    script = Script([throttled("0")] * 5 + [OK])
    with (
        scripted_server(script) as url,
        Mnemo(url, api_key="k", retry=RetryPolicy(max_retries=2)) as mnemo,
        pytest.raises(RateLimited) as limited,
    ):
        mnemo.me()
    assert (len(script.seen_at), limited.value.attempts) == (3, 3)

    # Three waits of 0.4 s fit a budget of 1 s twice: the third would pass it, so the error is raised.
    script = Script([throttled("0.4")] * 4 + [OK])
    with (
        scripted_server(script) as url,
        Mnemo(url, api_key="k", retry=RetryPolicy(max_wait=1)) as mnemo,
        pytest.raises(RateLimited),
    ):
        mnemo.me()
    assert len(script.seen_at) == 3
    assert script.seen_at[-1] - script.seen_at[0] < 1.0 + 0.5


def test_a_503_is_retried_with_backoff_but_memory_unavailable_is_not():
    unavailable = (503, {}, {"error": {"code": "unavailable", "message": "Restarting."}})
    script = Script([unavailable, unavailable, OK])
    with scripted_server(script) as url, Mnemo(url, api_key="k", retry=RetryPolicy(backoff=0.05)) as mnemo:
        assert mnemo.me()["agent"] == "a"
    assert len(script.seen_at) == 3

    # Mnemo recorded the person's message before composing failed: a retry would record it twice.
    hard_failure = (503, {}, {"error": {"code": "memory_unavailable", "message": "The memory store failed."}})
    script = Script([hard_failure, OK])
    with scripted_server(script) as url, Mnemo(url, api_key="k") as mnemo, pytest.raises(Unavailable) as failed:
        mnemo.me()
    assert (failed.value.code, len(script.seen_at)) == ("memory_unavailable", 1)


def test_an_http_date_retry_after_and_the_async_client():
    when = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(time.time() + 2))  # 1-2 s away
    script = Script([throttled(when), OK])

    async def scenario() -> None:
        async with AsyncMnemo(url, api_key="k") as mnemo:
            assert (await mnemo.me())["team"] == "t"

    with scripted_server(script) as url:
        run_async(scenario)
    assert len(script.seen_at) == 2
    assert script.seen_at[1] - script.seen_at[0] >= 0.9


@pytest.mark.django_db(transaction=True)
def test_the_real_servers_429_is_rate_limited_with_retry_after(django_db_blocker, tenant):
    with django_db_blocker.unblock(), serve_asgi("client-limits", API_RATE="3/hour") as server:
        with Mnemo(server.url, api_key=tenant.key.plaintext, retry=RetryPolicy(max_retries=0)) as mnemo:
            for _ in range(3):
                mnemo.me()
            with pytest.raises(RateLimited) as limited:
                mnemo.me()
        error = limited.value
        assert (error.status, error.code) == (429, "throttled")
        assert 0 < error.retry_after <= 3600
        assert "3 requests per hour" in error.message

        # With retries on, an hour's wait is past the default budget: raised at once, not slept.
        with Mnemo(server.url, api_key=tenant.key.plaintext) as mnemo:
            started = time.monotonic()
            with pytest.raises(RateLimited) as again:
                mnemo.remember(person="ada", key="k", description="d", content="c")
        assert time.monotonic() - started < 5
        assert again.value.attempts == 1
