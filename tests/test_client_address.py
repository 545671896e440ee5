"""The client-address rule (:mod:`locky.http.client_address`, docs/http/audit.md): the peer, or the
right-most ``X-Forwarded-For`` address that is not a trusted proxy when the peer is one;
and ``LOCKY_TRUSTED_PROXIES`` is checked at startup."""

from __future__ import annotations

import pytest

from locky.http.client_address import ClientAddresses, client_key, parse_networks
from locky.settings import Settings, SettingsError

BEHIND = ClientAddresses(["10.0.0.0/8", "2001:db8::/32"])


@pytest.mark.parametrize("peer, forwarded_for, client", [
    # No trusted proxies: the header is never read.
    ("198.51.100.7", "192.0.2.1", "198.51.100.7"),
    ("198.51.100.7", None, "198.51.100.7"),
])
def test_without_trusted_proxies_the_peer_is_the_client(peer, forwarded_for, client):
    assert ClientAddresses().resolve(peer, forwarded_for) == client


@pytest.mark.parametrize("peer, forwarded_for, client", [
    ("198.51.100.7", "192.0.2.1", "198.51.100.7"),  # an untrusted peer's header is ignored
    ("10.1.2.3", "192.0.2.1", "192.0.2.1"),  # one trusted proxy
    ("10.1.2.3", "192.0.2.1, 10.9.9.9", "192.0.2.1"),  # two: skip the trusted hop
    ("10.1.2.3", "6.6.6.6, 192.0.2.1", "192.0.2.1"),  # a forged entry left of the real one
    ("10.1.2.3", "6.6.6.6,192.0.2.1 ,10.0.0.9", "192.0.2.1"),  # spacing varies
    ("10.1.2.3", "10.4.4.4, 10.5.5.5", "10.4.4.4"),  # all trusted: the earliest hop
    ("10.1.2.3", None, "10.1.2.3"),  # no header: the proxy itself
    ("10.1.2.3", "", "10.1.2.3"),
    ("10.1.2.3", "not-an-address", "10.1.2.3"),  # garbage: the last hop we trust
    ("10.1.2.3", "192.0.2.1, garbage", "10.1.2.3"),
    ("10.1.2.3", "garbage, 192.0.2.1", "192.0.2.1"),  # garbage left of the client is its own
    ("10.1.2.3", "192.0.2.1:4711", "192.0.2.1"),  # with a port
    ("10.1.2.3", "[2001:db9::1]:443", "2001:db9::1"),
    ("10.1.2.3", "::ffff:192.0.2.1", "192.0.2.1"),  # IPv4-mapped IPv6
    ("2001:db8::5", "2001:db9::1", "2001:db9::1"),  # an IPv6 proxy
    ("::ffff:10.1.2.3", "192.0.2.1", "192.0.2.1"),  # a mapped proxy address is trusted too
    ("", "192.0.2.1", ""),  # a Unix socket: no peer address, no trust
])
def test_behind_trusted_proxies(peer, forwarded_for, client):
    assert BEHIND.resolve(peer, forwarded_for) == client


def test_throttle_keys_count_an_ipv6_client_by_its_64_block():
    assert client_key("192.0.2.1") == "ip:192.0.2.1"
    assert client_key("2001:db8:1:2:aaaa::1") == client_key("2001:db8:1:2:bbbb::2") == "ip:2001:db8:1:2::/64"
    assert client_key("2001:db8:1:3::1") != client_key("2001:db8:1:2::1")
    assert client_key("") == "ip:unknown"
    assert "@" not in client_key("2001:db8::1")  # never an email's key


def test_networks_parse_or_say_what_is_wrong():
    assert [str(n) for n in parse_networks(["10.0.0.0/8", "192.0.2.1", "::1"])] == ["10.0.0.0/8", "192.0.2.1/32", "::1/128"]
    with pytest.raises(ValueError, match=r"did you mean 10\.0\.0\.0/8"):
        parse_networks(["10.0.0.1/8"])
    with pytest.raises(ValueError, match="not an IP address"):
        parse_networks(["proxy.internal"])


def test_settings_check_trusted_proxies_and_the_per_address_limit():
    settings = Settings.load(environ={"LOCKY_TRUSTED_PROXIES": "10.0.0.0/8, 172.16.0.0/12"})
    assert settings.trusted_proxies == ("10.0.0.0/8", "172.16.0.0/12")
    assert settings.login_max_failures_per_ip == 50
    with pytest.raises(SettingsError, match="LOCKY_TRUSTED_PROXIES: 'proxy' is not an IP address"):
        Settings.load(environ={"LOCKY_TRUSTED_PROXIES": "proxy"})
    with pytest.raises(SettingsError, match="LOCKY_LOGIN_MAX_FAILURES_PER_IP must be between"):
        Settings.load(environ={"LOCKY_LOGIN_MAX_FAILURES_PER_IP": "0"})
