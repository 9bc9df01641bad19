"""One HTTP POST of a delivery: signed, to the address that was checked, redirects not followed, and
the whole of it (resolving, connecting, sending, the answer's first bytes) within WEBHOOK_TIMEOUT."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import ipaddress
from dataclasses import dataclass

import httpx

from webhooks.exceptions import UnsafeUrl
from webhooks.safety import parse_url, resolve_checked

USER_AGENT = "Mnemo-Webhooks/1"
ANSWER_BYTES = 300  # of the receiver's answer, kept in the delivery log when it is not a 2xx


def signature(body: bytes, secret: str) -> str:
    """The X-Mnemo-Signature header's value: sha256=<hex HMAC-SHA256 of the raw body>."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class Answer:
    status_code: int | None = None  # None: no answer (a network error, the deadline, a refusal)
    error: str = ""
    refused: bool = False  # the URL's host now resolves to an address Mnemo may not call


async def _post(url: str, body: bytes, headers: dict[str, str], timeout: float) -> Answer:
    target = parse_url(url)
    address = await resolve_checked(target)
    # Connect to the address just checked, not to the name: resolving it again could give another.
    literal = f"[{address}]" if isinstance(address, ipaddress.IPv6Address) else str(address)
    host = f"[{target.host}]" if ":" in target.host else target.host
    default_port = 443 if target.scheme == "https" else 80
    headers = {**headers, "Host": host if target.port == default_port else f"{host}:{target.port}"}
    # TLS still verifies the certificate against the name (SNI), as if we had connected by it.
    extensions = {"sni_hostname": target.host} if target.scheme == "https" else {}
    async with (
        httpx.AsyncClient(timeout=timeout, follow_redirects=False, trust_env=False) as client,
        client.stream(
            "POST", f"{target.scheme}://{literal}:{target.port}{target.path}", content=body, headers=headers,
            extensions=extensions,
        ) as response,
    ):  # fmt: skip
        if 200 <= response.status_code < 300:
            return Answer(response.status_code)
        head = b""
        async for chunk in response.aiter_raw():
            head += chunk
            if len(head) >= ANSWER_BYTES:
                break
        text = head[:ANSWER_BYTES].decode("utf-8", "replace")
        redirect = 300 <= response.status_code < 400
        where = f" to {response.headers.get('location', '')[:200]} (not followed)" if redirect else ""
        return Answer(response.status_code, f"HTTP {response.status_code}{where}: {text}".strip(": "))


async def _post_within(url: str, body: bytes, headers: dict[str, str], timeout: float) -> Answer:
    # httpx's timeout bounds each step (connect, each read); a receiver that sends a byte a second would
    # never trip it. This deadline bounds the whole request, so no receiver holds a worker longer.
    try:
        async with asyncio.timeout(timeout):
            return await _post(url, body, headers, timeout)
    except TimeoutError:
        return Answer(error=f"No answer within {timeout:g} s (WEBHOOK_TIMEOUT).")


def post(url: str, body: bytes, headers: dict[str, str], *, timeout: float) -> Answer:
    """POST body to url; never raises for what the receiver or the network did."""
    try:
        return asyncio.run(_post_within(url, body, headers, timeout))
    except UnsafeUrl as exc:
        return Answer(error=exc.message, refused=True)
    except httpx.HTTPError as exc:
        return Answer(error=f"{type(exc).__name__}: {exc}"[:500])
    except OSError as exc:
        return Answer(error=f"{type(exc).__name__}: {exc}"[:500])
