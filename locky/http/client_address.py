"""The client address of a request: the peer, or ``X-Forwarded-For`` behind trusted proxies.

The one rule (docs/http/audit.md, ``LOCKY_TRUSTED_PROXIES``): the client is the peer that
connected, unless that peer is a trusted proxy; then it is the right-most address of
``X-Forwarded-For`` that is not itself a trusted proxy. Every proxy appends the address it
received the request from, so everything right of the first untrusted entry was written
by proxies we trust, and everything left of it by whoever that client is (and may be
forged). A peer outside the trusted networks can put anything in the header: it is
ignored.
"""

from __future__ import annotations

import functools
import ipaddress
from typing import Iterable

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address

#: Prefix length of the IPv6 block one client is counted by: providers hand out a /64 to
#: a single subscriber, so counting single IPv6 addresses would let one client rotate
#: through 2**64 of them.
IPV6_CLIENT_PREFIX = 64


def parse_networks(values: Iterable[str]) -> tuple[Network, ...]:
    """The networks of ``values`` (CIDRs or single addresses); ``ValueError`` names the
    first that is not one, or that has host bits set (``10.0.0.1/8``: ambiguous)."""
    networks = []
    for value in values:
        try:
            networks.append(ipaddress.ip_network(value))
        except ValueError:
            try:
                loose = ipaddress.ip_network(value, strict=False)
            except ValueError:
                raise ValueError(f"{value!r} is not an IP address or CIDR network") from None
            raise ValueError(f"{value!r} has host bits set: did you mean {loose}?") from None
    return tuple(networks)


@functools.lru_cache(maxsize=4096)
def parse_address(text: str | None) -> Address | None:
    """``text`` as an address (IPv4-mapped IPv6 as IPv4; ``[v6]:port`` and ``v4:port``
    forms accepted), or ``None``. Remembered for the last 4,096 texts: every request
    parses its peer's address, which is mostly the same few (a proxy, a load balancer)."""
    if not text:
        return None
    text = text.strip()
    if text.startswith("["):  # [v6] or [v6]:port
        text = text[1:].split("]", 1)[0]
    elif text.count(":") == 1:  # v4:port (a bare IPv6 address has several colons)
        text = text.split(":", 1)[0]
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


class ClientAddresses:
    """Finds the client address of requests, given the trusted proxies' networks."""

    def __init__(self, trusted_proxies: Iterable[str] = ()):
        self.trusted = parse_networks(trusted_proxies)

    def is_trusted(self, address: Address | None) -> bool:
        return address is not None and any(address in network for network in self.trusted)

    def resolve(self, peer: str | None, forwarded_for: str | None) -> str:
        """The client address of a request from ``peer`` carrying ``forwarded_for`` (the
        ``X-Forwarded-For`` value, several headers joined by commas); ``""`` when the peer
        is not an address (a Unix socket)."""
        peer_address = parse_address(peer)
        if not self.is_trusted(peer_address) or not forwarded_for:
            return peer_text(peer)
        client = peer_address
        for entry in reversed(forwarded_for.split(",")):
            hop = parse_address(entry)
            if hop is None:
                # Not an address: the trusted proxy to its right is the last hop we know.
                break
            client = hop
            if not self.is_trusted(hop):
                break
        return str(client)

    def of(self, req) -> str:
        """The client address of the Falcon request ``req``."""
        if not self.trusted:  # no proxy is trusted: the peer, whatever the header says
            return peer_text(req.remote_addr)
        return self.resolve(req.remote_addr, req.get_header("X-Forwarded-For"))


@functools.lru_cache(maxsize=4096)
def peer_text(peer: str | None) -> str:
    """The client address of a peer when no proxy is trusted, as :meth:`ClientAddresses.resolve`
    gives it; remembered, like :func:`parse_address`, for the last 4,096 peers."""
    address = parse_address(peer)
    return str(address) if address is not None else ""


def client_key(address: str) -> str:
    """The login-throttle key of a client address: ``ip:<address>``, an IPv6 address by
    its /64 block. Emails always hold an ``@`` and these never do, so the two never meet."""
    parsed = parse_address(address)
    if isinstance(parsed, ipaddress.IPv6Address):
        return f"ip:{ipaddress.ip_network(f'{parsed}/{IPV6_CLIENT_PREFIX}', strict=False)}"
    return f"ip:{parsed if parsed is not None else 'unknown'}"
