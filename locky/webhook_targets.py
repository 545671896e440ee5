"""Where webhooks may be sent (CONTRACT §12).

A webhook URL is ``https://`` or ``http://`` with a host; its host must not be, or
resolve to, a private, loopback, link-local or otherwise non-public address (the service
must not become a way to reach its own network: cloud metadata at 169.254.169.254, an
admin port on localhost), unless the operator sets ``LOCKY_WEBHOOK_ALLOW_PRIVATE=true``.
The address is checked when a subscription is made and again before every delivery, as
a name may resolve elsewhere later (DNS rebinding).
"""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit

MAX_URL = 2048


class TargetRefused(ValueError):
    """Why a webhook URL is not accepted (the message is shown to the caller)."""


def public(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_global and not (address.is_multicast or address.is_reserved)


def resolve(host: str) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    """The addresses ``host`` names (itself, when it is one); ``[]`` when it does not resolve."""
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError):
        return []
    return [ipaddress.ip_address(info[4][0].split("%", 1)[0]) for info in infos]


def check(url: str, *, allow_private: bool, resolve_names: bool = True) -> str:
    """``url`` if webhooks may be sent there, else :class:`TargetRefused`. A name that
    does not resolve now is accepted (delivery checks again)."""
    if len(url) > MAX_URL:
        raise TargetRefused(f"Longer than {MAX_URL} characters.")
    try:
        parts = urlsplit(url)
        host = parts.hostname
        parts.port  # noqa: B018 (raises on a bad port)
    except ValueError:
        raise TargetRefused("Not a valid URL.") from None
    if parts.scheme not in ("https", "http") or not host:
        raise TargetRefused("Must be an https:// or http:// URL with a host.")
    if parts.username is not None or parts.password is not None:
        raise TargetRefused("Must not hold a user name or password: sign deliveries with the webhook's secret.")
    if allow_private:
        return url
    addresses = resolve(host) if resolve_names else []
    if host.rstrip(".").lower() == "localhost" or host.rstrip(".").lower().endswith(".localhost") \
            or any(not public(address) for address in addresses):
        raise TargetRefused("Private, loopback and link-local addresses are refused"
                            " (LOCKY_WEBHOOK_ALLOW_PRIVATE allows them).")
    return url
