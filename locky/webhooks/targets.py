"""Where webhooks may be sent (docs/http/audit.md).

A webhook URL is ``https://`` or ``http://`` with a host; its host must not be, or
resolve to, a private, loopback, link-local or otherwise non-public address (the service
must not become a way to reach its own network: cloud metadata at 169.254.169.254, an
admin port on localhost), unless the operator sets ``LOCKY_WEBHOOK_ALLOW_PRIVATE=true``.
Every address a name resolves to must be public, and a delivery goes only to a name
that resolves.

The check runs when a subscription is made and again before every delivery, as a name
may resolve elsewhere later. A name that does not resolve when the subscription is made
is taken (its DNS may not be there yet, or not seen from here); its deliveries are
refused, and recorded as failed, for as long as it does not. A delivery resolves the name once (:func:`target`) and
connects to the addresses that were checked, never to what a second lookup answers:
a name that answers a public address to the check and 127.0.0.1 to the connection (DNS
rebinding) reaches nothing it should not.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

MAX_URL = 2048

Address = ipaddress.IPv4Address | ipaddress.IPv6Address

#: Refused beside what :mod:`ipaddress` calls non-global: the IETF protocol
#: assignments (192.0.0.0/24; it counts 192.0.0.9 and .10 global) and the deprecated
#: IPv6 site-local block (fec0::/10, which it counts global).
REFUSED_NETWORKS = (ipaddress.ip_network("192.0.0.0/24"), ipaddress.ip_network("fec0::/10"))

PRIVATE_REFUSED = "Private, loopback and link-local addresses are refused (LOCKY_WEBHOOK_ALLOW_PRIVATE allows them)."
UNRESOLVED = "The host name does not resolve to an address."


class TargetRefused(ValueError):
    """Why a webhook URL is not accepted (the message is shown to the caller)."""


@dataclass(frozen=True)
class Target:
    """A checked URL: where to connect (``addresses``, in the order to try) and what to
    say the host is (``host``: the Host header and, for https, the TLS server name the
    certificate is verified against)."""

    scheme: str
    host: str
    port: int | None
    path: str
    addresses: tuple[Address, ...]


def public(address: Address) -> bool:
    """Whether ``address`` is one webhooks may reach without LOCKY_WEBHOOK_ALLOW_PRIVATE."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return public(address.ipv4_mapped)
        if address.sixtofour is not None and not public(address.sixtofour):
            return False  # 2002:7f00:1::/48 is 6to4 for 127.0.0.1
    if any(address in network for network in REFUSED_NETWORKS if network.version == address.version):
        return False
    return address.is_global and not (address.is_multicast or address.is_reserved)


def resolve(host: str) -> list[Address]:
    """The addresses ``host`` names (itself, when it is one), each once, in the
    resolver's order; ``[]`` when it does not resolve."""
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError):
        return []
    addresses: list[Address] = []
    for info in infos:
        address = ipaddress.ip_address(info[4][0].split("%", 1)[0])
        if address not in addresses:
            addresses.append(address)
    return addresses


def _parse(url: str):
    if len(url) > MAX_URL:
        raise TargetRefused(f"Longer than {MAX_URL} characters.")
    try:
        parts = urlsplit(url)
        host = parts.hostname
        port = parts.port
    except ValueError:
        raise TargetRefused("Not a valid URL.") from None
    if parts.scheme not in ("https", "http") or not host:
        raise TargetRefused("Must be an https:// or http:// URL with a host.")
    if parts.username is not None or parts.password is not None:
        raise TargetRefused("Must not hold a user name or password: sign deliveries with the webhook's secret.")
    return parts, host, port


def _checked(host: str, addresses: list[Address], *, resolved: bool = False) -> None:
    """Refuse a local name or any non-public address; with ``resolved``, also a name
    that resolved to nothing (a delivery needs somewhere to go)."""
    name = host.rstrip(".").lower()
    if name == "localhost" or name.endswith(".localhost") or any(not public(a) for a in addresses):
        raise TargetRefused(PRIVATE_REFUSED)
    if resolved and not addresses:
        raise TargetRefused(UNRESOLVED)


def check(url: str, *, allow_private: bool) -> str:
    """``url`` if webhooks may be sent there, else :class:`TargetRefused` (a subscription
    being made): a name that does not resolve yet is taken, one that resolves to any
    refused address is not. With ``allow_private`` the host is not looked up."""
    parts, host, _ = _parse(url)
    if not allow_private:
        _checked(host, resolve(host))
    return url


def target(url: str, *, allow_private: bool) -> Target:
    """Where a delivery to ``url`` connects: the host resolved once, every address it
    resolved to checked; :class:`TargetRefused` if any is refused or there is none."""
    parts, host, port = _parse(url)
    addresses = resolve(host)
    if not allow_private:
        _checked(host, addresses, resolved=True)
    elif not addresses:
        raise TargetRefused(UNRESOLVED)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return Target(parts.scheme, host, port, path, tuple(addresses))
