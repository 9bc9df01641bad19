"""Which URLs Mnemo may call: http(s) only, and (unless WEBHOOK_ALLOW_PRIVATE) only hosts whose every
address is public, checked when a URL is subscribed and again when each delivery resolves it."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.conf import settings

from webhooks.exceptions import UnsafeUrl

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True)
class Target:
    """A URL taken apart, with the address a delivery connects to (the one that was checked)."""

    scheme: str
    host: str
    port: int
    path: str  # with the query


def parse_url(url: str) -> Target:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise UnsafeUrl("A webhook URL must start with http:// or https://.", field="url")
    if not parts.hostname:
        raise UnsafeUrl("A webhook URL needs a host.", field="url")
    if parts.username is not None or parts.password is not None:
        raise UnsafeUrl(
            "A webhook URL may not carry a user name or password; verify the signature instead.", field="url"
        )
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise UnsafeUrl("The webhook URL's port is not a number from 1 to 65535.", field="url") from None
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return Target(parts.scheme, parts.hostname, port, path)


def refusal(address: Address) -> str | None:
    """Why a delivery may not go to this address, or None when it may."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return refusal(address.ipv4_mapped)
    # The narrowest name first: a loopback or link-local address is private too.
    for kind, flag in (
        ("unspecified", address.is_unspecified),
        ("loopback", address.is_loopback),
        ("link-local", address.is_link_local),
        ("multicast", address.is_multicast),
        ("reserved", address.is_reserved),
        ("private", address.is_private),
    ):
        if flag:
            return kind
    if not address.is_global:  # shared address space (100.64/10) and the like
        return "not public"
    return None


def _addresses(infos: list[tuple[object, ...]]) -> list[Address]:
    found: list[Address] = []
    for info in infos:
        sockaddr = info[4]
        assert isinstance(sockaddr, tuple)
        # An IPv6 scope id (fe80::1%eth0) is not part of the address.
        address = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
        if address not in found:
            found.append(address)
    return found


def check_addresses(host: str, addresses: list[Address]) -> Address:
    """The address to connect to: the first, once every one the host resolves to is allowed. A host
    that resolves to a public and a private address is refused: which one a client picks is not ours."""
    if not addresses:
        raise UnsafeUrl(f"The webhook host {host} does not resolve to any address.", field="url")
    if not settings.WEBHOOK_ALLOW_PRIVATE:
        for address in addresses:
            if (why := refusal(address)) is not None:
                raise UnsafeUrl(
                    f"The webhook host {host} resolves to {address}, a {why} address; Mnemo only calls public "
                    "addresses (an operator may allow private ones with WEBHOOK_ALLOW_PRIVATE=1).",
                    field="url",
                )
    return addresses[0]


def check_url(url: str) -> Target:
    """Refuse a URL no delivery could go to (subscribe time): the scheme, and the addresses its host has now."""
    target = parse_url(url)
    try:
        infos = socket.getaddrinfo(target.host, target.port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        raise UnsafeUrl(f"The webhook host {target.host} does not resolve.", field="url") from None
    check_addresses(target.host, _addresses(list(infos)))
    return target


async def resolve_checked(target: Target) -> Address:
    """Delivery time: resolve the host again (it may now point elsewhere: DNS rebinding) and check it;
    the caller connects to the address returned, not to the name."""
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(target.host, target.port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        raise UnsafeUrl(f"The webhook host {target.host} does not resolve.", field="url") from None
    return check_addresses(target.host, _addresses(list(infos)))
